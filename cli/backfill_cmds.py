"""Write paths: `pmem backfill`, `import`, `status`, `demo`. Prefect is imported lazily."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.app import EXIT_ERROR, app, err_console, handle_errors, open_store, print_json, settings
from core.errors import PmemError
from core.settings import Settings

# ---------------------------------------------------------------- write paths


def _prefect_env(settings: Settings) -> None:
    """Prefect reads its settings on import: keep its home under the data dir, telemetry off."""
    # Prefect's temporary server dies silently (start-up "timeout") when its home is missing
    settings.prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.prefect_home))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # the first start migrates its SQLite database: slow on a small machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def _run_backfill(source: str, export: str | None, dry_run: bool, llm: str | None) -> dict[str, Any]:
    from flows.pipeline import resolve_export

    cfg = settings()
    path = resolve_export(cfg, source, export)
    _prefect_env(cfg)
    from flows.backfill import backfill as backfill_flow

    return backfill_flow(source=source, export_path=str(path), dry_run=dry_run, llm=llm)


def _print_summary(summary: dict[str, Any]) -> None:
    err_console.print(
        f"run [bold]{summary['run_id']}[/] {summary['status']}"
        f"{' (resumed)' if summary['resumed'] else ''}{' (dry run)' if summary['dry_run'] else ''}: "
        f"{summary['conversations']} conversations ({summary['kept']} kept, {summary['dropped']} dropped), "
        f"{summary['batches_total']} batches ({summary['batches_skipped_complete']} already complete), "
        f"{summary['drafter_calls']} drafter calls, {summary['commits']} commits, "
        f"{summary['rejected_evidence']} evidence pointers rejected, {summary['elapsed_seconds']:.1f}s"
    )


@app.command()
@handle_errors
def backfill(
    source: Annotated[str, typer.Option("--source", "-s", help="chatgpt (more formats come with the importers).")] = "chatgpt",
    export: Annotated[str | None, typer.Option("--export", "-e", help="The export file. Default: newest file in <data dir>/exports/<source>/.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Draft and verify, commit nothing.")] = False,
    llm: Annotated[str | None, typer.Option("--llm", help="provider:model; default PMEM_LLM or the offline extractive drafter.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="End with one JSON object summarising the run.")] = False,
) -> None:
    """Import an export, draft case records and commit them. Run it again to resume."""
    with err_console.status("backfilling: importing, drafting, committing…"):
        summary = _run_backfill(source, export, dry_run, llm)
    _print_summary(summary)
    if summary["batches_failed"]:
        err_console.print(f"  → {summary['batches_failed']} batch(es) failed; run the same command again to retry them")
    if as_json:
        print_json(summary)
    if summary["status"] != "complete":
        raise typer.Exit(EXIT_ERROR)


@app.command(name="import")
@handle_errors
def import_(
    path: Annotated[str, typer.Argument(help="An export file.")],
    source: Annotated[str | None, typer.Option("--source", help="Format; detected when omitted.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Import an export into the source ledger only (no drafting). Re-importing changes nothing."""
    from core.errors import ConfigError
    from flows.pipeline import Pipeline, import_export
    from importers import sniff

    src = source or sniff(Path(path))
    if src is None:
        raise ConfigError(f"cannot tell the format of {path}", hint="pass --source chatgpt")
    p = Pipeline.open(settings())
    try:
        stats = import_export(p, src, str(Path(path).resolve()))
    finally:
        p.close()
    err_console.print(
        f"{stats['conversations']} conversations: {stats['conversations_new']} new, "
        f"{stats['conversations_changed']} changed, {stats['conversations_unchanged']} unchanged; "
        f"{stats['quarantined']} quarantined"
    )
    if as_json:
        print_json({"source": src, **stats})


@app.command()
@handle_errors
def status(
    run_id: Annotated[str | None, typer.Argument(help="A run id; default: the latest runs.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What the backfill runs did: batches by stage, commits, what is left."""
    from store.db import Database
    from store.runs import RunStore

    runs = RunStore(Database.open(settings()))
    items = [runs.get_run(run_id)] if run_id else runs.list_runs()
    items = [r for r in items if r]
    if run_id and not items:
        raise PmemError(f"no run {run_id}", hint="`pmem status` lists the runs")
    out = [
        {"run_id": r["run_id"], "source": r["source"], "status": r["status"], "dry_run": r["dry_run"],
         "started_at": r["started_at"], "batches": runs.stage_counts(r["run_id"]), "summary": r["summary"]}
        for r in items
    ]
    if as_json:
        print_json({"items": out})
        return
    for r in out:
        s = r["summary"] or {}
        typer.echo(f"{r['run_id']}  {r['source']}  {r['status']}{'  dry-run' if r['dry_run'] else ''}  "
                   f"batches {r['batches']}  commits {s.get('commits', 0)}  drafter calls {s.get('drafter_calls', 0)}")


@app.command()
@handle_errors
def demo(
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run the whole pipeline offline on the bundled sample export, then search it."""
    from core.settings import PROJECT_ROOT

    export = PROJECT_ROOT / "examples" / "demo" / "conversations.json"
    with err_console.status("running the demo backfill…"):
        summary = _run_backfill("chatgpt", str(export), False, "extractive")
    _print_summary(summary)
    store = open_store(settings())
    queries = ["引っ越し", "データベース", "laptop", "Fly.io"]
    results = {}
    for q in queries:
        hits = store.search(q, limit=3)
        results[q] = [h.model_dump(mode="json") for h in hits]
        typer.echo(f"\n$ pmem search {q!r}")
        for h in hits:
            typer.echo(f"  {h.score:4.2f}  {h.id}  [{h.kind}] {h.title}")
        if not hits:
            typer.echo("  (no hits)")
    typer.echo("\nshow one with: pmem show MEMORY_ID --history")
    if as_json:
        print_json({"summary": summary, "searches": results})
