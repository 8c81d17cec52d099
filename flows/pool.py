"""The backfill beyond one machine (issue 18, docs/scale-out.md): deployments on a Prefect process
work pool, the workers that run them, and a pool run's fan-out.

* ``deploy(pool)``: the work pool (type ``process``, created if missing) and the deployments
  ``backfill-pool/<pool>`` (the backfill's drafting and committing, flows/backfill.py),
  ``reimport/<pool>`` and ``summarize/<pool>`` on it. The flows are loaded by module path (the
  project is installed in every worker's environment, wherever its folder is), with the
  worker's own environment: its ``DATABASE_URL``, ``PMEM_RUNS_URL``,
  ``PMEM_LLM`` and provider key.
* ``run_worker(pool)``: a Prefect process worker on the pool that says when it starts and every
  flow run it takes.
* ``submit(pool, …)``: flow runs of ``backfill-pool/<pool>`` for a run the submitter imported
  and planned (flows.pipeline.submit_prepare), one per worker online in the pool; every one of
  them takes the run's batches through the claims in PostgreSQL (store/claims.py).

Parameters, names and tags carry ids only (the run id, the source, the export's file name).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from core.errors import ConfigError
from core.settings import Settings

DEFAULT_POOL = "pmem"


def deployment_name(flow_name: str, pool: str) -> str:
    return f"{flow_name}/{pool}"


def _flows() -> list[Any]:
    from flows.backfill import backfill_pool
    from flows.reimport import reimport
    from flows.summary_flow import summarize

    return [backfill_pool, reimport, summarize]


def deploy(pool: str = DEFAULT_POOL) -> dict[str, Any]:
    """Create the process work pool if missing and register (or update) the deployments on it."""
    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.deployments.runner import EntrypointType, RunnerDeployment
    from prefect.exceptions import ObjectAlreadyExists

    created = False
    with get_client(sync_client=True) as client:
        try:
            client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
            created = True
        except ObjectAlreadyExists:  # there already (or a worker made it just now)
            found = client.read_work_pool(pool)
            if found.type != "process":
                raise ConfigError(
                    f"work pool {pool!r} is of type {found.type!r}, not 'process'",
                    hint="choose another name with --pool",
                ) from None
    names = []
    for fl in _flows():
        d = RunnerDeployment.from_flow(
            fl,
            name=pool,
            work_pool_name=pool,
            entrypoint_type=EntrypointType.MODULE_PATH,
            tags=["pmem"],
            description=f"pmem's {fl.name} flow on the work pool {pool}",
        )
        d.apply()
        names.append(deployment_name(fl.name, pool))
    return {"pool": pool, "pool_created": created, "deployments": names}


def online_workers(pool: str) -> int:
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            workers = client.read_workers_for_work_pool(pool)
        except ObjectNotFound:
            return 0
    return sum(1 for w in workers if str(getattr(w.status, "value", w.status)).upper() == "ONLINE")


def submit(
    pool: str,
    *,
    run_id: str,
    source: str,
    export_name: str,
    embed: bool,
    settings: Settings,
    options: dict[str, Any] | None = None,
) -> tuple[str, str | None, int]:
    """Flow runs of ``backfill-pool/<pool>`` for the planned run ``run_id``: one per worker
    online in the pool (PMEM_POOL_FANOUT: that many), at least one, with the run's plain
    options (``options``: the flow's parameters, as the in-process flow gets them); returns the first's id,
    the link to it in the Prefect UI and how many were submitted. ConfigError when the pool
    has no such deployment."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    from flows.prefect_server import flow_run_url

    n = max(1, settings.pool_fanout or online_workers(pool))
    tags = [f"source:{source}"] + ([f"export:{export_name}"] if export_name else [])
    # the options given (a deployment registered before an option existed still takes the others)
    given = {k: v for k, v in (options or {}).items() if v is not None and v is not False}
    ids: list[str] = []
    for i in range(n):
        try:
            fr = run_deployment(
                deployment_name("backfill-pool", pool),
                timeout=0,
                as_subflow=False,
                parameters={"run_id": run_id, "source": source, "embed": embed} | given,
                tags=tags,
                flow_run_name=run_id if i == 0 else f"{run_id}-{i + 1}",
            )
        except ObjectNotFound:
            raise ConfigError(
                f"no deployment backfill-pool/{pool} on the Prefect server",
                hint=f"run `pmem deploy --pool {pool}` first",
            ) from None
        ids.append(str(fr.id))  # type: ignore[union-attr]  # sync call: a FlowRun
    return ids[0], flow_run_url(ids[0]), n


def run_worker(
    pool: str, *, limit: int | None, say: Callable[[str], None], name: str | None = None
) -> None:
    """A Prefect process worker on ``pool`` until stopped (Ctrl-C, SIGTERM): one line when it
    starts, one per flow run it takes (the flow run's name: a run id, and its id)."""
    from prefect.workers.process import ProcessWorker

    class PmemWorker(ProcessWorker):  # type: ignore[misc]
        async def run(self, flow_run: Any, configuration: Any, task_status: Any = None) -> Any:
            say(f"took flow run {flow_run.name} ({flow_run.id})")
            return await super().run(flow_run, configuration, task_status)

    worker = PmemWorker(work_pool_name=pool, limit=limit, name=name)
    cap = f"at most {limit} flow runs at once" if limit else "no limit on flow runs at once"

    def printer(line: Any = "", *_a: Any, **_k: Any) -> None:
        if str(line).endswith("started!"):
            say(f"worker {worker.name} started on the work pool {pool} ({cap})")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(worker.start(printer=printer))
