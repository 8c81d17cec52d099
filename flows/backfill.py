"""The Prefect flow `backfill`: import → prefilter → plan → draft + verify → commit.

The sequencing lives in flows/pipeline.py (`run_backfill`); this module only wraps each step as
a Prefect task. Parameters, task names and log lines carry ids and counts, never private text
(Prefect's database keeps all three). Tasks do not cache (resume lives in the ledger, the batch
files and PostgreSQL: Prefect's cache re-ran finished work after a kill -9) and do not retry
(provider calls retry in their adapters: one layer only). Batches are drafted and committed by
Prefect's thread pool; the adaptive concurrency controllers decide how many requests are in
flight at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task, unmapped
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from core.settings import get_settings
from flows import pipeline as pl
from flows.pool_run import work_pool_run
from state import runlock


@task(name="import-export", cache_policy=NO_CACHE, retries=0)
def import_task(run_id: str, source: str, export_path: str) -> dict[str, Any]:
    return pl.import_export(pl.pipeline(run_id), source, export_path)


@task(name="plan-batches", cache_policy=NO_CACHE, retries=0)
def plan_task(run_id: str, source: str) -> list[str]:
    return pl.plan(pl.pipeline(run_id), source)


@task(name="draft-batch", cache_policy=NO_CACHE, retries=0)
def draft_task(run_id: str, batch_id: str) -> dict[str, Any]:
    return pl.draft_batch(pl.pipeline(run_id), batch_id)


@task(name="commit-batch", cache_policy=NO_CACHE, retries=0)
def commit_task(run_id: str, batch_id: str) -> dict[str, Any]:
    return pl.commit_batch(pl.pipeline(run_id), batch_id)


def run_tags(source: str, export_path: str) -> list[str]:
    """What a flow run is tagged with besides the data dir and process: its source and the
    export's file name (the name only, never its folder)."""
    return [f"source:{source}", f"export:{Path(export_path).name}"]


def name_flow_run(run_id: str, source: str, export_path: str) -> str | None:
    """Name the current flow run after pmem's run id and tag it with the source and export file
    name, so the Prefect UI lists it as pmem knows it; returns the link to its page in the UI.
    Never fails the run: a Prefect API hiccup leaves Prefect's own name."""
    from prefect import get_client
    from prefect.context import FlowRunContext

    from flows.prefect_server import flow_run_url

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return None
    run = ctx.flow_run
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(
                run.id, name=run_id, tags=sorted(set(run.tags) | set(run_tags(source, export_path)))
            )
    except Exception as err:  # noqa: BLE001 - naming is for the UI only
        get_run_logger().warning("could not name the flow run (%s)", type(err).__name__)
    return flow_run_url(str(run.id))


def _mapped(t: Any) -> Any:
    def run_all(run_id: str, batch_ids: list[str]) -> list[pl.Outcome]:
        if not batch_ids:
            return []
        futures = t.map(run_id=unmapped(run_id), batch_id=batch_ids)
        outcomes: list[pl.Outcome] = []
        for f in futures:
            try:
                outcomes.append(f.result())
            except Exception as err:  # noqa: BLE001 - the sequencer decides
                outcomes.append(err)
        return outcomes

    return run_all


PREFECT_STEPS = pl.Steps(
    import_export=import_task,
    plan=plan_task,
    draft_all=_mapped(draft_task),
    commit_all=_mapped(commit_task),
)


@flow(
    name="backfill",
    log_prints=False,
    validate_parameters=True,
    task_runner=ThreadPoolTaskRunner(max_workers=8),  # type: ignore[arg-type]
)
def backfill(
    source: str,
    export_path: str,
    dry_run: bool = False,
    llm: str | None = None,
    embed: bool = True,
    max_cost: float | None = None,
    price: str | None = None,
    include_others: bool = False,
    max_wait: float | None = None,
    request: str | None = None,
) -> dict[str, Any]:
    """One backfill run; running it again with the same source and export resumes it. It ends
    with the new messages indexed for recall and (``embed``) embedded by the local embedder.
    The run's options are its parameters: plain values (``price``: --price's IN/OUT;
    ``max_wait``: --max-wait, else PMEM_MAX_WAIT_SECONDS), and
    ``request``, the id of what names conversations (--redraft keys, --exclude rules), which
    the CLI stored for it (state/requests.py) and which never is a parameter itself."""
    logger = get_run_logger()
    settings = pl.with_max_wait(get_settings(), max_wait)
    options, excludes = pl.flow_options(
        settings,
        export_path=export_path,
        max_cost=max_cost,
        price=price,
        include_others=include_others,
        request=request,
    )
    p = pl.Pipeline.open(settings, llm, options=options, excludes=excludes)
    link: list[str | None] = [None]

    def on_event(kind: str, data: dict[str, Any]) -> None:
        logger.info("%s %s", kind, data)
        if kind == "run":
            runlock.note_run(data["run_id"])  # a second run in this data dir can name it
            link[0] = name_flow_run(data["run_id"], source, export_path)

    try:
        summary = pl.run_backfill(
            p,
            source,
            export_path,
            dry_run=dry_run,
            steps=PREFECT_STEPS,
            on_event=on_event,
            embed=embed,
        )
        summary["flow_run_url"] = link[0]
        logger.info(
            "run %s %s: %d drafter calls, %d commits",
            summary["run_id"],
            summary["status"],
            summary["drafter_calls"],
            summary["commits"],
        )
        return summary
    finally:
        p.close()


@flow(
    name="backfill-pool",
    log_prints=False,
    validate_parameters=True,
    task_runner=ThreadPoolTaskRunner(max_workers=8),  # type: ignore[arg-type]
)
def backfill_pool(
    run_id: str,
    source: str,
    embed: bool = True,
    max_cost: float | None = None,
    price: str | None = None,
    include_others: bool = False,
    max_wait: float | None = None,
) -> dict[str, Any]:
    """One worker's part of a pool run (`pmem backfill --pool`: the submitter imported the export
    and planned the batches of ``run_id``): take the run's batches through the claims in
    PostgreSQL until none is left, alongside the run's other flow runs; the first to find them
    all done finishes the run (index, totals). The worker's own environment gives the database,
    the run files' location (PMEM_RUNS_URL), the model's provider and key (PMEM_LLM); the
    run's options are parameters, as for ``backfill`` (what names conversations is not: the
    submitter planned with it)."""
    logger = get_run_logger()
    settings = pl.with_max_wait(get_settings(), max_wait)
    options, _ = pl.flow_options(
        settings,
        export_path="",
        max_cost=max_cost,
        price=price,
        include_others=include_others,
    )
    p = pl.Pipeline.open(settings, options=options)  # this worker's PMEM_LLM and provider key
    try:
        summary = work_pool_run(p, run_id, steps=PREFECT_STEPS, embed=embed)
    finally:
        p.close()
    logger.info(
        "run %s (%s): this worker drafted %d batches (%d drafter calls, %d commits)%s",
        run_id,
        source,
        summary["batches_drafted"],
        summary["drafter_calls"],
        summary["commits"],
        "" if summary.get("part") else f"; the run is {summary['status']}",
    )
    return summary
