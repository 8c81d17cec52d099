"""The `pmem` console script. The only place where errors become messages and exit codes.

Heavy modules (Prefect, the flows) are imported inside the commands that need them, so read
paths such as `pmem search` start fast and never import Prefect.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from core.errors import PmemError, RateLimitStop
from core.settings import Settings, get_settings

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_TEMPFAIL = 75  # rate-limit stop: run the same command again later

app = typer.Typer(
    help=(
        "personal-memory: turn your AI conversation exports into a long-term, searchable memory.\n\n"
        "Typical use:  pmem backfill --source chatgpt --export conversations.json, "
        "then  pmem search 'データベース'.  Run the same backfill command again to resume."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="The embedded PostgreSQL (or the server DATABASE_URL points at).", no_args_is_help=True)
app.add_typer(db_app, name="db")

err_console = Console(stderr=True, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def print_json(obj: Any) -> None:
    """Every --json output is one JSON object, printed last on stdout."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def handle_errors(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RateLimitStop as err:
            err_console.print(f"[yellow]stopped:[/] {escape(str(err))}")
            if err.hint:
                err_console.print(f"  → {escape(err.hint)}")
            raise typer.Exit(EXIT_TEMPFAIL) from None
        except PmemError as err:
            err_console.print(f"[red]error:[/] {escape(str(err))}")
            if err.hint:
                err_console.print(f"  → {escape(err.hint)}")
            raise typer.Exit(EXIT_ERROR) from None

    return wrapper  # type: ignore[return-value]


def _settings() -> Settings:
    return get_settings()


def _open_store(settings: Settings):
    from store.db import Database
    from store.records import MemoryStore

    return MemoryStore(Database.open(settings))


@app.callback()
def _root(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details to stderr.")] = False) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


# ---------------------------------------------------------------- db


@db_app.command("start")
@handle_errors
def db_start() -> None:
    """Start the embedded PostgreSQL (first start initialises it under PMEM_DATA_DIR)."""
    from store import db, embedded

    s = _settings()
    if s.database_url:
        err_console.print("DATABASE_URL is set: using your own server, nothing to start.")
        return
    st = embedded.start(s.pgdata_dir)
    db.ensure_database(st.uri() or "", s.db_name)
    err_console.print(f"embedded PostgreSQL running (pid {st.pid}) in {s.pgdata_dir}")


@db_app.command("stop")
@handle_errors
def db_stop() -> None:
    """Stop the embedded PostgreSQL."""
    from store import embedded

    s = _settings()
    stopped = embedded.stop(s.pgdata_dir)
    err_console.print("stopped" if stopped else "not running")


@db_app.command("status")
@handle_errors
def db_status(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Is the database running, where, and which migrations are applied."""
    from store import embedded

    s = _settings()
    if s.database_url:
        from store.db import redact_url

        info: dict[str, Any] = {"mode": "external", "url": redact_url(s.database_url)}
    else:
        st = embedded.status(s.pgdata_dir)
        info = {"mode": "embedded", "running": st.running, "pid": st.pid, "pgdata": st.pgdata}
    if as_json:
        print_json(info)
    else:
        for k, v in info.items():
            typer.echo(f"{k}: {v}")


@db_app.command("url")
@handle_errors
def db_url() -> None:
    """Print the application database URL (starts the embedded server if needed)."""
    from store.db import app_url

    typer.echo(app_url(_settings()))


@db_app.command("init")
@handle_errors
def db_init(keep_running: Annotated[bool, typer.Option(help="Leave the server running.")] = False) -> None:
    """Create the database and apply migrations (what `make setup` runs)."""
    from store import embedded
    from store.db import Database

    s = _settings()
    was_running = s.database_url is not None or embedded.status(s.pgdata_dir).running
    Database.open(s).close()
    err_console.print("database ready (migrations applied)")
    if not was_running and not keep_running:
        embedded.stop(s.pgdata_dir)


# ---------------------------------------------------------------- read paths


@app.command()
@handle_errors
def search(
    query: Annotated[str, typer.Argument(help="Words or a phrase, Japanese or English.")],
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object {\"hits\": [...]}.")] = False,
) -> None:
    """Search the memories (lexical, Japanese-aware)."""
    store = _open_store(_settings())
    hits = store.search(query, limit=limit)
    if as_json:
        print_json({"hits": [h.model_dump(mode="json") for h in hits]})
        return
    if not hits:
        err_console.print("no hits")
    for h in hits:
        typer.echo(f"{h.score:5.2f}  {h.id}  [{h.kind}] {h.title}\n       {h.index_summary}")


@app.command()
@handle_errors
def show(
    memory_id: Annotated[str, typer.Argument(help="A memory id from `pmem search`.")],
    history: Annotated[bool, typer.Option("--history", help="Also list every revision.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print one memory with its evidence (and its revisions)."""
    store = _open_store(_settings())
    view = store.get(memory_id, history=history)
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    typer.echo(f"{view.title}  ({view.id}, {view.kind}, revision {view.current_revision}, {view.status})")
    if view.occurred_at:
        typer.echo(f"occurred: {view.occurred_at.isoformat()}")
    typer.echo(f"aliases: {', '.join(view.aliases)}\ntags: {', '.join(view.tags)}\n")
    typer.echo(view.canonical_summary)
    typer.echo("\nevidence:")
    for e in view.evidence:
        typer.echo(f"  - [{e['source_key']}] {e['text']}")
    if history:
        typer.echo("\nrevisions:")
        for r in view.revisions:
            typer.echo(f"  {r['revision']}: {r['reason']} {r['created_at']} run={r['run_id']} model={r['model']}")


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

    settings = _settings()
    path = resolve_export(settings, source, export)
    _prefect_env(settings)
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
    p = Pipeline.open(_settings())
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

    runs = RunStore(Database.open(_settings()))
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
    store = _open_store(_settings())
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


def main() -> None:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    app()


if __name__ == "__main__":
    main()
