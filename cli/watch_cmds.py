"""`pmem watch [PATH…]`: the incremental re-index (seed 004), and what `pmem reindex --changed` runs.

A pass re-imports only the files whose size, mtime or content hash changed since the last pass
(a file that only grew is read from where the last pass stopped), then indexes and embeds the
new messages (flows/watch.py). `pmem watch` runs a pass every `--every` seconds (600) until
Ctrl-C, each pass holding the data dir's run lock only while it runs; `--once` runs one pass;
`--serve` serves the Prefect deployment `watch/every-10-minutes` instead.

Exit codes: 0 done (or stopped with Ctrl-C between passes); 1 an error (a PATH not found,
another run holds the data dir for a `--once` pass, a file could not be read); 3 some records
were quarantined (`pmem ledger quarantine` lists them), the rest imported; 130 Ctrl-C during a
pass (what was imported is kept; the next pass goes on from there).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import EXIT_ERROR, app, err_console, handle_errors, print_json, settings, step_bars
from core.display import for_terminal, plural

EXIT_QUARANTINED = 3
EXIT_INTERRUPTED = 130


def _tty(text: str) -> str:
    return escape(for_terminal(text))


@contextlib.contextmanager
def _pass_progress() -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """A bar on stderr while a pass runs (checking, importing i/N files, indexing); nothing is
    drawn when stderr is not a terminal."""

    bar = step_bars()
    task = bar.add_task("checking files", total=None)

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "import":
            bar.update(
                task,
                description=f"importing ({plural(data['checked'], 'file')} checked)",
                total=data["total"],
                completed=0,
            )
        elif kind == "imported":
            bar.update(
                task, completed=data["done"], description=f"importing {Path(data['path']).name}"
            )
        elif kind == "index":
            bar.update(task, description="indexing the new messages", total=None)

    with bar:
        yield on_event


def pass_words(s: dict[str, Any]) -> str:
    """One line for a pass: what was checked, what was imported, what was indexed."""
    files = s["files"]
    if s.get("status") == "skipped":
        return "pass skipped: another run holds this data dir"
    parts = [f"{plural(s['files_checked'], 'file')} checked"]
    changed = [
        f"{files[a]} {a}"
        for a in ("new", "grown", "changed", "touched", "gone", "failed")
        if files[a]
    ]
    parts.append(", ".join(changed) if changed else "nothing changed")
    if s["files_imported"]:
        parts.append(
            f"{plural(s['messages_new'], 'new message')} ({s['bytes_read'] / 1e3:.1f} kB read)"
        )
    if s["indexed_messages"] or s["embedded_messages"]:
        parts.append(f"{s['indexed_messages']} indexed, {s['embedded_messages']} embedded")
    if s["quarantined"]:
        parts.append(f"{s['quarantined']} quarantined")
    return "; ".join(parts) + f" ({s['elapsed_seconds']:.2f}s)"


def _print_pass(s: dict[str, Any], *, stamp: bool) -> None:
    for item in s["imported"]:
        how = f"from byte {item['read_from']}" if item["read_from"] else "whole"
        err_console.print(
            f"  {item['action']:7} {_tty(item['path'])}  ({how}: "
            f"{plural(item['messages_new'], 'new message')})",
            highlight=False,
        )
    for e in s["errors"][:20]:
        record = "" if e.get("record") is None else f" record {e['record']}"
        err_console.print(
            f"[red]error:[/] {_tty(str(e['file']))}{record}: {_tty(str(e['reason']))}",
            highlight=False,
        )
    for missing in s["paths_missing"]:
        err_console.print(
            f"[yellow]not found (left as recorded):[/] {_tty(missing)}", highlight=False
        )
    prefix = f"{datetime.now().strftime('%H:%M:%S')} " if stamp else ""
    err_console.print(prefix + pass_words(s), highlight=False)


def run_once(
    paths: list[str] | None,
    *,
    embed: bool,
    verify: bool = False,
    full: bool = False,
    source: str | None = None,
    trigger: str = "watch",
    stamp: bool = False,
) -> dict[str, Any]:
    """One pass with a progress bar and its lines on stderr; the summary."""
    from flows.watch import PassOptions, run_pass

    cfg = settings()
    with _pass_progress() as on_event:
        opts = PassOptions(
            embed=embed, verify=verify, full=full, source=source, trigger=trigger, on_event=on_event
        )
        summary = run_pass(cfg, paths, opts, command=_command())
    _print_pass(summary, stamp=stamp)
    return summary


def _command() -> str:
    from cli.foreground import command_line

    return command_line()


def exit_code(summary: dict[str, Any]) -> int:
    if summary["files"]["failed"]:
        return EXIT_ERROR
    if summary["quarantined"]:
        return EXIT_QUARANTINED
    return 0


def _check_source(source: str | None) -> None:
    if source is None:
        return
    from core.errors import ConfigError
    from importers import IMPORTERS

    if source not in IMPORTERS:
        known = ", ".join(sorted(IMPORTERS))
        raise ConfigError(f"unknown source {source!r}", hint=f"known: {known}")


@app.command(short_help="Re-import what changed since the last pass, repeatedly.")
@handle_errors
def watch(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[PATH]...",
            help="Files or folders to watch (walked recursively). Default: PMEM_WATCH_PATHS, else the PATHs earlier passes watched.",
        ),
    ] = None,
    once: Annotated[
        bool,
        typer.Option("--once", help="Run one pass and stop (what `pmem reindex --changed` does)."),
    ] = False,
    every: Annotated[
        float | None,
        typer.Option(
            "--every",
            help="Seconds between passes. Default: PMEM_WATCH_INTERVAL, else 600 (every 10 minutes).",
        ),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Serve the Prefect deployment watch/every-10-minutes (its runs show in the Prefect UI) instead of passing in this process.",
        ),
    ] = False,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed",
            help="Index the new messages for recall but do not embed them (`pmem reindex` does later).",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="Hash every file, also one whose size and mtime are unchanged (a rewrite that kept both).",
        ),
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Read every file whole, as a pass without state would (the ledger still writes only what is new).",
        ),
    ] = False,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="The importer for files whose format cannot be told (e.g. jsonl-log); detected per file when omitted.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="End with one JSON object: the pass (with --once), else the passes run until Ctrl-C.",
        ),
    ] = False,
) -> None:
    """Re-import only what changed since the last pass, then index and embed the new messages.

    Each pass compares every file's size and mtime with the last pass (and hashes it when they
    differ): an unchanged file is not read; a file that only grew is read from where the last
    pass stopped; a rewritten or new file is read whole. The new messages are then indexed for
    `pmem recall` and embedded. Passes hold the data dir's run lock while they run: a pass that
    finds a backfill running is skipped (with --once: exit 1)."""
    _check_source(source)
    if serve:
        _serve(paths, every, embed=not no_embed, verify=verify)
        return
    if once:
        summary = run_once(paths, embed=not no_embed, verify=verify, full=full, source=source)
        if as_json:
            print_json(summary)
        raise typer.Exit(exit_code(summary))
    _loop(
        paths, every, embed=not no_embed, verify=verify, full=full, source=source, as_json=as_json
    )


def _loop(
    paths: list[str] | None,
    every: float | None,
    *,
    embed: bool,
    verify: bool,
    full: bool,
    source: str | None,
    as_json: bool,
) -> None:
    """A pass every ``every`` seconds until Ctrl-C. A pass that finds the run lock held is
    skipped; an error in one pass (the database restarting) is printed and the next one runs."""
    from core.errors import PmemError
    from flows.watch import interval_seconds
    from state.runlock import RunLocked

    interval = interval_seconds(every)
    passes: list[dict[str, Any]] = []
    stop = threading.Event()
    in_pass = threading.Event()

    def on_sigint(_signum: int, _frame: Any) -> None:
        if stop.is_set() or in_pass.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    err_console.print(f"watching (a pass every {interval:g}s; Ctrl-C stops)", highlight=False)
    totals = {"files_imported": 0, "messages_new": 0, "indexed_messages": 0, "embedded_messages": 0}
    try:
        first = True
        while not stop.is_set():
            in_pass.set()
            try:
                s = run_once(
                    paths,
                    embed=embed,
                    verify=verify,
                    full=full and first,
                    source=source,
                    stamp=True,
                )
                passes.append(s)
                for k in totals:
                    totals[k] += s[k]
            except RunLocked as err:
                err_console.print(
                    f"{datetime.now().strftime('%H:%M:%S')} pass skipped: {_tty(str(err))}",
                    highlight=False,
                )
            except KeyboardInterrupt:
                err_console.print(
                    "[yellow]stopped (Ctrl-C) during a pass: what it imported is kept; "
                    "the next pass goes on from there[/]"
                )
                _finish(passes, totals, as_json, "interrupted")
                raise typer.Exit(EXIT_INTERRUPTED) from None
            except PmemError as err:
                if not passes:
                    raise  # the first pass: a PATH not found, nothing to watch
                err_console.print(
                    f"[red]pass failed:[/] {_tty(str(err))}; the next pass tries again"
                )
            finally:
                in_pass.clear()
            first = False
            deadline = time.monotonic() + interval
            while not stop.is_set() and time.monotonic() < deadline:
                stop.wait(min(1.0, deadline - time.monotonic()))
    finally:
        signal.signal(signal.SIGINT, previous)
    err_console.print(
        f"stopped watching after {plural(len(passes), 'pass')}: "
        f"{plural(totals['messages_new'], 'new message')}"
    )
    _finish(passes, totals, as_json, "stopped")


def _finish(
    passes: list[dict[str, Any]], totals: dict[str, int], as_json: bool, status: str
) -> None:
    if as_json:
        print_json(
            {
                "status": status,
                "passes": len(passes),
                **totals,
                "last": passes[-1] if passes else None,
            }
        )
    sys.stdout.flush()


def _serve(
    paths: list[str] | None, every: float | None, *, embed: bool, verify: bool = False
) -> None:
    from cli.prefect_cmds import _connect
    from flows.watch import env_paths, interval_seconds, resolve_roots

    roots = (
        [str(p) for p in resolve_roots(paths, _known_roots())] if paths or not env_paths() else []
    )
    interval = interval_seconds(every)
    with err_console.status("starting the Prefect server…"):
        url = _connect()
    from flows.watch_flow import build_deployment, deployment_name, serve_watch

    cfg = settings()
    build_deployment(cfg, roots, interval, embed=embed, verify=verify)  # validates first
    where = ", ".join(_tty(r) for r in roots) or "PMEM_WATCH_PATHS"
    err_console.print(
        f"serving watch/{deployment_name(interval)}: a pass over {where} every {interval:g}s "
        f"on {url.removesuffix('/api')}; Ctrl-C stops (the schedule is paused until the next "
        "`pmem watch --serve`)",
        highlight=False,
    )
    serve_watch(cfg, roots, interval, embed=embed, verify=verify)


def _known_roots() -> list[str]:
    from store.db import Database
    from store.watch_state import WatchState

    db = Database.open(settings())
    try:
        return WatchState(db).roots()
    finally:
        db.close()
