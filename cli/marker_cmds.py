"""Topic markers (seed 004's "LLL"): `pmem mark "TEXT"` records one, `pmem marks` lists them.

A marker is a short line the owner writes when the topic changes ("今日はゼミ発表の準備"):
load_context shows the latest ones first (the current state), and `pmem recall Q
--since-marker ID_OR_TEXT` reads the span from one marker to the next. Markers are kept as
written (secrets redacted by the store's guard) and never edited.

Exit codes: 0 done (also when the same text was already the latest marker: nothing new is
written); 1 an error (an empty or too long text, a bad --at or --since, the database).
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any

import typer

from cli.app import err_console, handle_errors, memory_app, print_json, settings
from core.display import for_terminal
from core.errors import ConfigError


def _store() -> Any:
    from store.db import Database
    from store.markers import MarkerStore

    return MarkerStore(Database.open(settings()))


def _at(value: str | None) -> datetime | None:
    if value is None:
        return None
    from core.settings import local_zone

    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ConfigError(
            "--at must be an ISO 8601 time", hint="e.g. --at 2026-12-01T09:30+09:00"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=local_zone())


def _line(m: Any) -> str:
    from core.display import human_time
    from core.settings import local_zone

    session = f"  [session {m.session}]" if m.session else ""
    by = "" if m.client == "cli" else f"  (by {m.client})"
    return for_terminal(
        f"{human_time(m.at, local_zone())}  {m.id}  {' '.join(m.text.split())}{session}{by}"
    )


@memory_app.command()
@handle_errors
def mark(
    text: Annotated[
        str, typer.Argument(help="One short line: what the topic is now (今日はゼミ発表の準備).")
    ],
    session: Annotated[
        str | None, typer.Option("--session", help="The session the marker belongs to.")
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            help="When the topic changed (ISO 8601; default: now; without a zone, PMEM_TZ's).",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print one JSON object {"id", "at", "text", "session", "client", "redacted", "created"} last on stdout.',
        ),
    ] = False,
) -> None:
    """Record a topic marker: a short, timestamped line saying what the topic is now.

    load_context (what an AI client reads first) starts with the latest markers, so the thread
    survives a client's context compaction; `pmem recall Q --since-marker ID` reads what was said
    from a marker to the next. The text is kept as written, except that the secret guard
    replaces a secret with [REDACTED:…]; a marker is never edited. The same text as the latest
    marker (of the same session) is not recorded twice."""
    when = _at(at)
    added = _store().add(text, session=session, at=when, client="cli")
    m = added.marker
    if m.redacted:
        err_console.print(
            f"[yellow]the secret guard redacted {', '.join(m.redacted)} in the marker[/]",
            highlight=False,
        )
    if as_json:
        print_json({**m.as_json(), "created": added.created})
        return
    if not added.created:
        err_console.print("already the latest marker: nothing new recorded", highlight=False)
    sys.stdout.write(_line(m) + "\n")


@memory_app.command()
@handle_errors
def marks(
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="From this date or period on: 2026-11, 先週, 'last month', an ISO time."
        ),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="Only the markers of this session.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", help="At most this many, newest first.")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print one JSON object {"markers": [{"id", "at", "text", "session", "client", "redacted"}, ...]} (newest first) last on stdout.',
        ),
    ] = False,
) -> None:
    """List the topic markers, newest first: time, id (for --since-marker), text."""
    if limit is not None and limit < 1:
        raise ConfigError("--limit must be at least 1")
    lower = None
    if since is not None:
        from core.settings import time_zone
        from search.query import parse_bound, parse_now

        tz = time_zone()[0]
        lower = parse_bound(since, "since", parse_now(None, tz), tz)
    found = _store().find(since=lower, session=session, limit=limit)
    if as_json:
        print_json({"markers": [m.as_json() for m in found]})
        return
    if not found:
        err_console.print(
            'no markers yet: `pmem mark "what the topic is now"` records one'
            if since is None and session is None
            else "no markers match"
        )
        return
    for m in found:
        sys.stdout.write(_line(m) + "\n")
