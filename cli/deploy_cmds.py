"""`pmem prefect deploy|worker` and `pmem backfill --pool`: the backfill on a Prefect process
work pool, with workers on as many machines as reach the same PostgreSQL, Prefect server and run
files (docs/scale-out.md). Prefect is imported lazily, in flows/pool.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import err_console, handle_errors, prefect_app, print_json, settings
from cli.prefect_env import _prefect_env, quiet_prefect_console
from cli.run_words import _CONTRACT_KEYS, _progress_bars
from core.display import plural
from core.errors import CostLimitStop, RateLimitStop


@prefect_app.command()
@handle_errors
def deploy(
    pool: Annotated[
        str, typer.Option("--pool", help="The process work pool (created if missing).")
    ] = "pmem",
    as_json: Annotated[
        bool,
        typer.Option("--json", help="End with one JSON object: pool, pool_created, deployments."),
    ] = False,
) -> None:
    """Register the backfill, re-import and summary flows as deployments (`backfill-pool/POOL`,
    `reimport/POOL`, `summarize/POOL`) on a Prefect process work pool, created if missing. Then
    `pmem worker --pool POOL` on each machine, and `pmem backfill … --pool POOL`.

    Exit codes: 0 deployed; 1 an error (no Prefect server, a pool of another type)."""
    _prefect_env(settings())
    quiet_prefect_console()
    from flows.pool import deploy as deploy_flows

    out = deploy_flows(pool)
    made = "created" if out["pool_created"] else "found"
    err_console.print(
        f"work pool {escape(pool)} {made}; deployments: {', '.join(out['deployments'])}",
        highlight=False,
    )
    err_console.print(f"start workers with: pmem worker --pool {escape(pool)}", highlight=False)
    if as_json:
        print_json(out)


@prefect_app.command()
@handle_errors
def worker(
    pool: Annotated[
        str, typer.Option("--pool", help="The work pool to take flow runs from.")
    ] = "pmem",
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            metavar="N",
            help="Run at most N flow runs at once (default: no limit).",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="The worker's name in the Prefect UI (default: a random one)."),
    ] = None,
) -> None:
    """Start a Prefect process worker on the pool with this environment (DATABASE_URL,
    PMEM_RUNS_URL, PMEM_LLM and the provider's key, PMEM_MEMORY_URL): it prints a line when it
    starts and one per flow run it takes, until Ctrl-C or SIGTERM. The flow runs it takes draft
    and commit the batches of pool runs, claimed in PostgreSQL with a lease
    (PMEM_LEASE_SECONDS): a worker that dies leaves its batches to the others.

    Exit codes: 0 stopped; 1 an error (no Prefect server)."""
    cfg = settings()
    _prefect_env(cfg)
    quiet_prefect_console()
    from flows.pool import run_worker

    def say(line: str) -> None:
        print(line, flush=True)

    run_worker(pool, limit=limit, say=say, name=name)


# ---------------------------------------------------------------- `pmem backfill --pool`


def run_on_pool(a: dict[str, Any]) -> dict[str, Any]:
    """`pmem backfill --pool`: import and plan here, submit the run to the pool; with --wait,
    follow it to its end (the summary totalled over every worker)."""
    from cli.prefect_env import flow_parameters, run_options
    from flows.pipeline import Pipeline
    from flows.pool import submit
    from flows.pool_run import follow_pool_run, submit_prepare
    from stages.exclude import parse_rules

    cfg = settings()
    _prefect_env(cfg)
    quiet_prefect_console()
    p = Pipeline.open(cfg, a["llm"], options=run_options(a), excludes=parse_rules(a["exclude"]))
    try:
        with _progress_bars():
            summary = submit_prepare(
                p, a["source"], a["export"], dry_run=a["dry_run"], pool=a["pool"]
            )
        run_id = summary["run_id"]
        flow_run_id, url, flow_runs = submit(
            a["pool"],
            run_id=run_id,
            source=a["source"],
            export_name=Path(a["export"]).name if a["export"] else "",
            embed=not a["no_embed"],
            settings=cfg,
            options=flow_parameters(a),
        )
        err_console.print(
            f"run {run_id} submitted to the work pool {escape(a['pool'])}: "
            f"{plural(summary['batches_total'], 'batch')} for {plural(flow_runs, 'flow run')}",
            highlight=False,
        )
        err_console.print(f"Prefect flow run: {url}", highlight=False)
        summary.update(flow_run_id=flow_run_id, flow_run_url=url, flow_runs=flow_runs)
        if not a["wait"]:
            summary["status"] = "submitted"
            err_console.print(
                f"follow it: pmem status   (or: pmem backfill … --pool {escape(a['pool'])} --wait)",
                highlight=False,
            )
            return summary
        with _progress_bars("waiting for the workers"):
            final = follow_pool_run(p, run_id)
        final.update(flow_run_id=flow_run_id, flow_run_url=url, flow_runs=flow_runs)
        for key in _CONTRACT_KEYS:
            final.setdefault(key, 0)
        return final
    finally:
        p.close()


def pool_stopped(summary: dict[str, Any]) -> None:
    """A pool run a worker stopped (a rate limit, --max-cost): raised as the in-process stop."""
    cls = CostLimitStop if summary["status"] == "cost_limit" else RateLimitStop
    err: Any = cls(summary.get("stop_reason") or "stopped", run_id=summary["run_id"])
    err.summary = summary
    raise err
