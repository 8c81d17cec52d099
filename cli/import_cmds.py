"""`pmem import`: an export into the source ledger (no drafting), then its new messages indexed
for `pmem recall` and embedded with the local embedder. Prefect is imported lazily."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import (
    EXIT_ERROR,
    app,
    err_console,
    handle_errors,
    print_json,
    settings,
)
from cli.run_words import _print_indexed, _progress_bars
from core.display import for_terminal as tty
from core.errors import ConfigError

EXIT_QUARANTINED = 3  # `pmem import`: some records were quarantined, the rest imported
_ERROR_LINES = (
    20  # error lines printed on the terminal; --json and `pmem ledger quarantine` have all
)


@app.command(name="import", short_help="Import an export into the ledger; index and embed it.")
@handle_errors
def import_(
    path: Annotated[
        str,
        typer.Argument(
            help="An export: zip, folder or file (ChatGPT, Claude.ai, Codex, Claude Code, a JSONL log, LINE, Telegram)."
        ),
    ],
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="chatgpt, claude, codex, claude-code, jsonl-log, line or telegram; detected when omitted.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="End with one JSON object: conversations, messages, skipped, errors."
        ),
    ] = False,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed",
            help="Index new messages for recall but do not embed them (`pmem reindex` does later).",
        ),
    ] = False,
    reread: Annotated[
        bool,
        typer.Option(
            "--reread",
            help="Read the file even when the ledger already holds it whole (same bytes, same reader).",
        ),
    ] = False,
    me: Annotated[
        str | None,
        typer.Option(
            "--me",
            metavar="NAMES",
            help="Your names in a chat history or log, comma-separated (default PMEM_ME); other speakers are kept as `other`.",
        ),
    ] = None,
) -> None:
    """Import an export into the source ledger (no drafting), then index its new messages for
    `pmem recall` and embed them with the local embedder (`--no-embed` skips the vectors).
    Re-importing changes nothing; an unchanged file (same bytes, same reader) is not even read
    again (`--reread` reads it anyway).

    Exit codes: 0 everything imported; 3 some records were quarantined and the rest imported
    (`pmem ledger quarantine` lists them); 1 the input could not be read (what was read before
    the damage is kept). Each problem is an `error:` line on stderr naming the file and record."""
    from flows.importing import empty_stats, error_entry, hash_file_behind, run_import
    from flows.indexing import index_for_search  # not flows.pipeline: the drafting path is not
    from flows.resources import Pipeline  # this verb's (~40 ms of imports at every start)
    from importers import IMPORTERS, check_source

    target = Path(path).expanduser()
    src = source
    problem: tuple[str, str, str | None] | None = None
    if not target.exists():
        problem = ("file or folder not found", "not-found", None)
    else:
        try:  # the same check as backfill's: a --source the file contradicts is refused
            src = check_source(target, source)
        except ConfigError as err:
            reason = (
                "unknown-format"
                if source is None
                else "unknown-source"
                if source not in IMPORTERS
                else "wrong-source"
            )
            problem = (str(err).removeprefix(target.name).lstrip(": "), reason, err.hint)
    if problem is not None:
        stats = empty_stats(problem[0])
        stats["errors"].append(error_entry(str(target), None, None, problem[1], "input"))
        _finish_import(src, stats, None, as_json, hint=problem[2])
        return
    assert src is not None
    from core.people import using_me

    started = time.monotonic()
    resolved = str(target.resolve())
    # the file's SHA-256 (the unchanged-file check) runs while the database is opened
    file_hash = None if reread else hash_file_behind(resolved)
    p = Pipeline.open(settings(), "extractive")  # an import never drafts: no model key needed
    try:
        with _import_bar() as on_progress, using_me(me):
            stats = run_import(
                p.ledger,
                src,
                resolved,
                on_progress=on_progress,
                index_messages=True,  # the recall index is built alongside
                skip_unchanged=not reread,  # a file the ledger holds whole is not read again
                file_hash=file_hash,
            )
        index_began = time.monotonic()
        with _progress_bars("indexing messages for recall"):
            # the Japanese normalised forms are the index's later stage: --no-embed leaves them
            # (like the vectors) to `pmem reindex`; recall matches on the bigrams meanwhile
            indexed = index_for_search(p, embed=not no_embed, memories=False, forms=not no_embed)
        indexed["indexed_messages"] += stats.pop("indexed_messages", 0)
        stats.update(stage_figures(stats, started, index_began, indexed))
    finally:
        p.close()
    _finish_import(src, stats, indexed, as_json)


def stage_figures(
    stats: dict[str, Any], started: float, index_began: float, indexed: dict[str, Any]
) -> dict[str, Any]:
    """The import's stages, wall clock inside the process (issue 31; the names are a contract):
    the ledger stage (reading, hashing, the prefilter, the COPY: until ``run_import``'s last
    ledger commit) with its MB/s, the index stage (from the ledger's end until every index is
    current: the lexical rows the workers write behind the ledger, the GIN built after a first
    load, the rows the import's pass left, the normal forms, the guard's scans, the vectors),
    and the time from the start until a lexical recall finds every imported message."""
    ledger = float(stats.get("elapsed_seconds") or 0.0)
    mb = (stats.get("bytes_read") or stats.get("bytes_total") or 0) / 1e6
    ended = time.monotonic()
    # the index rows the workers wrote behind the ledger, until run_import returned
    behind = float(stats.pop("index_behind_seconds", 0.0) or 0.0)
    ledger_end = index_began - behind
    lexical = float(indexed.get("lexical_seconds") or 0.0)
    return {
        "stages": {
            "ledger": {
                "seconds": round(ledger, 3),
                "mb_per_s": round(mb / ledger, 3) if ledger > 0 else None,
            },
            "index": {"seconds": round(ended - ledger_end, 3)},
        },
        "time_to_answerable_s": round(index_began + lexical - started, 3),
    }


def import_summary(
    src: str | None, stats: dict[str, Any], indexed: dict[str, Any] | None
) -> dict[str, Any]:
    """The `pmem import --json` object: the contract's nested counts, then the flat keys."""
    flat = {k: v for k, v in stats.items() if k not in ("conversations", "errors", "skipped")}
    out: dict[str, Any] = {
        "source": src,
        "conversations": {
            "new": stats["conversations_new"],
            "changed": stats["conversations_changed"],
            "unchanged": stats["conversations_unchanged"],
            "quarantined": stats["quarantined"],
        },
        "messages": {"new": stats["messages_new"]},
        "skipped": stats["skipped"],
        "errors": stats["errors"],
        "conversations_total": stats["conversations"],
        **flat,
    }
    if indexed is not None:
        out.update(
            {
                "indexed_messages": indexed["indexed_messages"],
                "embedded_messages": indexed["messages"],
                "messages_without_vectors": indexed["messages_without_vectors"],
                "vectors": indexed["vectors"],
                "indexed": indexed,
            }
        )
    return out


def _finish_import(
    src: str | None,
    stats: dict[str, Any],
    indexed: dict[str, Any] | None,
    as_json: bool,
    hint: str | None = None,
) -> None:
    """Error lines, the summary in words, the JSON object, the exit code (0, 3 or 1). An exit
    other than 0 adds the error keys to the object (error, message, hint, exit_code)."""
    for e in stats["errors"][:_ERROR_LINES]:
        record = "" if e["record"] is None else f" record {e['record']}"
        message = e["reason"] if e["kind"] != "input" else (stats["input_error"] or e["reason"])
        err_console.print(
            f"[red]error:[/] {escape(tty(_base_name(e['file'])))}{record}: {escape(tty(message))}",
            highlight=False,
        )
    hidden = stats["errors_total"] - min(len(stats["errors"]), _ERROR_LINES)
    if hidden > 0:
        err_console.print(
            f"[red]error:[/] … and {hidden} more (`pmem ledger quarantine` lists every quarantined record)"
        )
    if hint:
        err_console.print(f"  → {escape(tty(hint))}", highlight=False)
    err_console.print(_import_words(stats), highlight=False)
    _print_indexed(indexed)
    failure: dict[str, Any] = {}
    if stats["input_error"]:
        failure = {
            "error": "error",
            "message": stats["input_error"],
            "hint": hint,
            "exit_code": EXIT_ERROR,
        }
    elif stats["quarantined"]:
        failure = {
            "error": "quarantined",
            "message": f"{stats['quarantined']} records quarantined, the rest imported",
            "hint": "`pmem ledger quarantine` lists them",
            "exit_code": EXIT_QUARANTINED,
        }
    if as_json:
        print_json(import_summary(src, stats, indexed) | failure)
    if failure:
        raise typer.Exit(failure["exit_code"])


def _base_name(label: str) -> str:
    """``/a/b/export.zip!dir/conversations.json`` → ``export.zip!conversations.json``."""
    file, _, member = label.partition("!")
    base = Path(file).name or file
    return f"{base}!{PurePosixPath(member).name}" if member else base


def _import_words(stats: dict[str, Any]) -> str:
    n = stats["conversations"]
    if stats.get("unchanged_file"):
        return (
            f"unchanged: the ledger already holds this file whole ({n} conversation"
            f"{'s' if n != 1 else ''}); nothing read (--reread reads it anyway)"
        )
    words = (
        f"imported {n} conversation{'s' if n != 1 else ''}: {stats['conversations_new']} new, "
        f"{stats['conversations_changed']} changed, {stats['conversations_unchanged']} unchanged; "
        f"{stats['messages_new']} new messages; {stats['quarantined']} quarantined"
    )
    if stats["skipped"]:
        parts = ", ".join(f"{count} {reason}" for reason, count in sorted(stats["skipped"].items()))
        words += f"; skipped {parts}"
    if stats["bytes_read"]:
        words += f"; {stats['bytes_read'] / 1e6:.1f} MB in {stats['elapsed_seconds']:.1f}s"
    if stats["input_error"]:
        words += "; the input could not be read" + (
            " to the end (what was read before is kept)" if n else ""
        )
    return words


@contextmanager
def _import_bar() -> Iterator[Any]:
    """A progress bar on stderr while importing: bytes read of the total, conversations so far
    (nothing is drawn when stderr is not a terminal)."""
    import time

    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TransferSpeedColumn,
    )

    bar = Progress(
        SpinnerColumn(),
        TextColumn("importing"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TextColumn("{task.fields[conversations]} conversations"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    task = bar.add_task("importing", total=None, conversations=0)
    last = [0.0]

    def update(progress: Any) -> None:
        now = time.monotonic()
        if now - last[0] < 0.1 and progress.bytes_read < progress.bytes_total:
            return
        last[0] = now
        bar.update(
            task,
            completed=progress.bytes_read,
            total=progress.bytes_total or None,
            conversations=progress.conversations,
        )

    with bar:
        yield update
