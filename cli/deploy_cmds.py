"""`pmem deploy` and `pmem worker`: the backfill on a Prefect process work pool, with workers on as
many machines as reach the same PostgreSQL, Prefect server and run files (docs/scale-out.md).
Prefect is imported lazily, in flows/pool.py."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from cli.app import err_console, handle_errors, prefect_app, print_json, settings
from cli.backfill_cmds import _prefect_env, quiet_prefect_console


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
