"""`pmem status` (what the runs did, the memories held, the disk used), `pmem stop`, and the run
files' `pmem runs gc` and `pmem runs demo` (the pipeline on the bundled sample export, in a
database of its own)."""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.app import (
    app,
    err_console,
    handle_errors,
    print_json,
    runs_app,
    settings,
)
from cli.owner_cmds import _confirm, _outcome
from core.display import for_terminal as tty
from core.display import human_bytes, human_seconds, human_time, plural
from core.errors import PmemError

# ---------------------------------------------------------------- demo


def _demo_database(cfg: Any) -> str:
    """Point this process at a database of its own on the same server (made fresh), and a runs
    folder of its own: PMEM_DB_NAME (embedded) or DATABASE_URL (your server), PMEM_RUNS_DIR."""
    from store.db import fresh_sibling_database

    name, url = fresh_sibling_database(cfg, "_demo")
    if cfg.database_url:
        os.environ["DATABASE_URL"] = url
    else:
        os.environ["PMEM_DB_NAME"] = name
    runs = cfg.data_dir / "demo" / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    os.environ["PMEM_RUNS_DIR"] = str(runs)
    return name


@runs_app.command()
@handle_errors
def demo(
    into_my_store: Annotated[
        bool,
        typer.Option(
            "--into-my-store",
            help="Write the sample memories into your own store (they stay there).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run the whole pipeline offline on the bundled sample export, then search it.

    It works in
    a database of its own (`<your database>_demo`, made fresh each time) on the same server, so
    your memories and `pmem export` are untouched; --into-my-store writes into your store."""
    from cli.backfill_cmds import _print_summary, _run_backfill, plain_args
    from core.settings import PROJECT_ROOT

    def say(text: str) -> None:  # with --json, stdout holds only the JSON object
        if as_json:
            err_console.print(text, markup=False, highlight=False)
        else:
            typer.echo(text)

    cfg = settings()
    demo_db = None if into_my_store else _demo_database(cfg)
    err_console.print(
        f"demo: the sample export goes into {f'the demo database {demo_db}' if demo_db else 'your own store'}"
    )
    export = PROJECT_ROOT / "examples" / "demo" / "conversations.json"
    with err_console.status("running the demo backfill…"):
        summary = _run_backfill(plain_args("chatgpt", str(export), "extractive"))
    _print_summary(summary)
    from cli.read import hit_line, message_line
    from core.display import terminal_width
    from core.settings import local_zone
    from mcp_server.service import MemoryService

    zone, width = local_zone(), terminal_width()
    svc = MemoryService.open(settings())
    try:
        queries = ["引っ越し", "データベース", "laptop", "Fly.io", "household budget app database"]
        results = {}
        for q in queries:
            hits = svc.search(q, limit=3)
            results[q] = [h.model_dump(mode="json") for h in hits]
            say(f"\n$ pmem search {q!r}")
            for n, h in enumerate(hits, 1):
                say(hit_line(h, n, zone, width))
            if not hits:
                say("  (no hits)")
        question, now = "2024年5月に何を決めた？", "2025-01-10T12:00:00+09:00"
        recall = svc.recall(question, now=datetime.fromisoformat(now), limit=3, max_chars=120)
        say(f"\n$ pmem recall {question!r} --now {now}")
        who = max((len(r.role) for r in recall.hits), default=4)
        for r in recall.hits:
            say(message_line(r, who, width))
    finally:
        svc.close()
    if into_my_store:
        say("\nshow one with: pmem show MEMORY_ID --history")
    else:
        say(
            "\nthese memories are in the demo database only; your store is unchanged "
            "(`pmem demo --into-my-store` writes them into it)"
        )
    if as_json:
        print_json({"summary": summary, "searches": results, "database": demo_db or "your store"})


# ---------------------------------------------------------------- status


def _size(path: Path) -> int:
    total = 0
    if path.is_dir():
        for p in path.rglob("*"):
            try:
                if p.is_file() and not p.is_symlink():
                    total += p.stat().st_size
            except OSError:
                continue
    return total


def _did_something(run: dict[str, Any]) -> bool:
    s = run.get("summary") or {}
    if run["status"] in ("open", "stopped", "failed", "cost_limit", "interrupted"):
        return True
    return bool(
        run.get("drafts") or run.get("commits_done") or s.get("commits") or s.get("drafter_calls")
    )


def _run_words(r: dict[str, Any], zone: Any) -> list[str]:
    s = r.get("summary") or {}
    name = Path(r.get("export_path") or "").name or "(pending conversations)"
    head = f"{r['run_id']}  {r['source']}  {name}  {r['status']}{'  (dry run)' if r['dry_run'] else ''}"
    when = f"  started {human_time(r['started_at'], zone)}"
    if r.get("finished_at"):
        when += f", finished {human_time(r['finished_at'], zone)}"
    batches = r["batches"]
    done = ", ".join(f"{n} {stage}" for stage, n in sorted(batches.items())) or "none"
    rest = r["drafts"] - r["commits_done"] - r["commits_left"] - r["conflicts"]
    if r["dry_run"] and r["drafts"] and not r["commits_done"]:  # why drafts and commits differ
        why = " (a dry run commits nothing until `pmem runs apply`)"
    elif rest > 0:
        why = f" ({plural(rest, 'draft')} not committable: `pmem runs review` says why)"
    else:
        why = ""
    body = (
        f"  {plural(sum(batches.values()), 'batch')} ({done}); {plural(r['drafts'], 'draft')}; "
        f"{plural(r['commits_done'], 'commit')} done, {r['commits_left']} left{why}"
        + (f"; {plural(r['conflicts'], 'conflict')}" if r["conflicts"] else "")
    )
    lines = [head, when, body]
    if s.get("conversations") is not None:
        lines.append(
            f"  {plural(s['conversations'], 'conversation')} in the export; "
            f"{plural(s.get('drafter_calls', 0), 'drafter call')}"
        )
    if (
        r["status"] in ("open", "stopped", "cost_limit", "interrupted")
        and r["commits_left"]
        and r.get("budget_applies", True)
    ):
        lines.append(
            f"  budget: {r['budget_in_window']} of {r['budget_limit']} requests used in the current "
            f"{human_seconds(r['budget_window_s'])} window; about {human_seconds(r['eta_seconds'])} left"
        )
    if r["dry_run"] and r["status"] == "complete" and r["drafts"]:  # no drafts: nothing to review
        lines.append(f"  next: pmem runs review {r['run_id']}  then  pmem runs apply {r['run_id']}")
    return lines


@app.command(short_help="What the runs did, the memories held, the disk used.")
def status(
    run_id: Annotated[
        str | None, typer.Argument(help="A run id; default: the latest runs that did something.")
    ] = None,
    all_runs: Annotated[
        bool, typer.Option("--all", help="Also the runs that found nothing to do.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What the runs did, the memories held, and the disk used.

    The runs that did something (dates, export file, batches, drafts, commits done and left, budget and
    ETA while one is open), the memories held, and the disk used by the database, the runs
    folder and the vectors. Exit 0, 1 unknown run."""
    from core.settings import local_zone
    from flows.progress import run_progress
    from store.db import Database, disk_usage
    from store.records import MemoryStore
    from store.runs import RunStore

    with _outcome(as_json, run_id=run_id):
        cfg = settings()
        db = Database.open(cfg)
        runs = RunStore(db)
        items = [runs.get_run(run_id)] if run_id else runs.list_runs(limit=50)
        items = [r for r in items if r]
        if run_id and not items:
            raise PmemError(f"no run {run_id}", hint="`pmem status` lists the runs")
        out = []
        for r in items:
            p = run_progress(db, cfg, r) | {
                "export_path": r.get("export_path"),
                "finished_at": r.get("finished_at"),
                "model": r.get("model"),
            }
            if run_id or all_runs or _did_something(p):
                out.append(p)
        out = out[:10] if not run_id and not all_runs else out
        usage = disk_usage(db) | {"runs_bytes": _size(cfg.runs_dir)}
        counts = MemoryStore(db).counts()
        db.close()
        if as_json:
            print_json(
                {
                    "items": out,
                    "hidden_runs": len(items) - len(out),
                    "memories": counts,
                    "disk": usage,
                }
            )
            return
        zone = local_zone()
        if out:
            typer.echo(f"times in {zone} (PMEM_TZ sets the zone)")
        if not out:
            err_console.print(
                "no runs that did something yet: start one with "
                "`make backfill SOURCE=chatgpt EXPORT=path`"
            )
        for r in out:
            for line in _run_words(r, zone):
                typer.echo(tty(line))
        hidden = len(items) - len(out)
        if hidden and not run_id:
            typer.echo(
                f"({plural(hidden, 'run')} that found nothing to do not shown: --all shows them)"
            )
        typer.echo(
            f"memories: {plural(counts['memories'], 'memory', 'memories')}, "
            f"{plural(counts['revisions'], 'revision')}, {plural(counts['evidence'], 'evidence excerpt')}, "
            f"{plural(counts['tombstones'], 'tombstone')}"
        )
        typer.echo(
            f"disk: database {human_bytes(usage['database_bytes'])} (of it vectors "
            f"{human_bytes(usage['vector_bytes'])}), runs folder {human_bytes(usage['runs_bytes'])}"
            + ("  (`pmem gc` removes old run files)" if usage["runs_bytes"] > 50_000_000 else "")
        )


# ---------------------------------------------------------------- gc


def gc_candidates(cfg: Any, db: Any, older_than_days: float) -> list[dict[str, Any]]:
    """Folders under runs/ that nothing needs any more: a superseded batch's drafts; the batch
    folders of a finished (complete, not dry) run older than ``older_than_days`` whose batches
    are committed; a summary run finished as long ago; a run folder the database does not know.
    The folders pmem keeps under runs/ (core.settings.RUNS_FOLDERS: the concept cache) are
    never offered."""
    from datetime import UTC, timedelta

    from core.errors import ResultFileError
    from core.settings import CONCEPT_CACHE, DATA_FOLDERS, SUMMARY_RUN_PREFIX
    from flows.summarize import STATE_SCHEMA as SUMMARY_STATE
    from state.files import read_checked
    from store.runs import RunStore

    runs = RunStore(db)
    known = {r["run_id"]: r for r in runs.list_runs(limit=100_000)}
    cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
    found: list[dict[str, Any]] = []
    root = cfg.runs_dir
    if not root.is_dir():
        return found
    with db.connection() as conn:
        batch_rows = conn.execute("SELECT batch_id, run_id, status FROM batches").fetchall()
    status_of = {(run, batch): st for batch, run, st in batch_rows}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if folder.name == CONCEPT_CACHE or folder.name in DATA_FOLDERS:
            continue  # pmem's own folders (a runs folder set to the data dir included)
        if folder.name.startswith(SUMMARY_RUN_PREFIX):
            state = folder / "run-state.json"
            try:
                done = read_checked(state, SUMMARY_STATE).get("status") == "complete"
            except (ResultFileError, OSError):
                done = False  # unfinished, or not readable: the next `pmem summary update` needs it
            if done and datetime.fromtimestamp(state.stat().st_mtime, UTC) < cutoff:
                found.append(
                    {
                        "path": folder,
                        "why": f"a summary run finished over {older_than_days:g} days ago",
                    }
                )
            continue
        run = known.get(folder.name)
        if run is None:
            found.append({"path": folder, "why": "a run the database does not know"})
            continue
        old_done = (
            run["status"] == "complete"
            and not run["dry_run"]
            and (run.get("finished_at") or run["started_at"]) < cutoff
        )
        bdir = folder / "batches"
        for b in sorted(p for p in bdir.iterdir() if p.is_dir()) if bdir.is_dir() else []:
            st = status_of.get((folder.name, b.name))
            if st == "superseded":
                found.append({"path": b, "why": "superseded drafts"})
            elif old_done and st in ("committed", None):
                found.append(
                    {"path": b, "why": f"committed, run finished over {older_than_days:g} days ago"}
                )
    for f in found:
        f["bytes"] = _size(f["path"])
    return found


@runs_app.command()
def gc(
    older_than: Annotated[
        float,
        typer.Option(
            "--older-than", help="Days after which a finished run's committed batch files go."
        ),
    ] = 30,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Remove without asking.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Remove run files nothing needs any more (asks first).

    Superseded drafts, the committed batch files of
    runs finished more than --older-than days ago (not dry runs: `pmem apply` needs those), and
    run folders the database does not know. Memories, the ledger and the database are not
    touched. Asks first. Exit 0 removed (or nothing to remove), 1 error / not confirmed."""
    from store.db import Database

    with _outcome(as_json):
        cfg = settings()
        db = Database.open(cfg)
        found = gc_candidates(cfg, db, older_than)
        db.close()
        total = sum(f["bytes"] for f in found)
        if not found:
            err_console.print("nothing to remove")
            if as_json:
                print_json({"removed": 0, "bytes": 0, "paths": []})
            return
        for f in found:
            err_console.print(
                tty(
                    f"{f['path'].relative_to(cfg.runs_dir)}  {human_bytes(f['bytes'])}  ({f['why']})"
                ),
                highlight=False,
                markup=False,
            )
        _confirm(
            f"remove {plural(len(found), 'folder')} ({human_bytes(total)}) under {cfg.runs_dir}?",
            yes,
        )
        for f in found:
            shutil.rmtree(f["path"], ignore_errors=True)
        err_console.print(f"removed {plural(len(found), 'folder')}, {human_bytes(total)} freed")
        if as_json:
            print_json(
                {
                    "removed": len(found),
                    "bytes": total,
                    "paths": [str(f["path"].relative_to(cfg.runs_dir)) for f in found],
                }
            )


# ---------------------------------------------------------------- stop


@app.command(short_help="Stop the Prefect server and the embedded PostgreSQL.")
def stop(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Stop the Prefect server and the embedded PostgreSQL pmem started for this data dir.

    The local Prefect server
    and the embedded PostgreSQL (both start again on the next command that needs them).
    Exit 0 (also when nothing ran), 1 error."""
    from flows.prefect_server import stop_server
    from store import embedded

    with _outcome(as_json):
        cfg = settings()
        prefect = False if os.environ.get("PREFECT_API_URL") else stop_server(cfg)
        database = False if cfg.database_url else embedded.stop(cfg.pgdata_dir)
        err_console.print(
            f"Prefect server: {'stopped' if prefect else 'not running'}; embedded PostgreSQL: "
            f"{'stopped' if database else 'not running' if not cfg.database_url else 'not managed (DATABASE_URL)'}"
        )
        if as_json:
            print_json({"prefect_stopped": prefect, "database_stopped": database})
