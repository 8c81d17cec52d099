"""`pmem proposals list|show|accept|reject ID` and `pmem confirm ID` (= accept): the owner's queue.

One queue (the ``proposals`` table) holds what AI clients (MCP) and the HTTP API may ask for but
never perform themselves: a proposed memory (create / append) and the confirmed actions —
correction, merge, delete, publish. Creation and append by the backfill and by `commit_memory`
stay under the owner's standing approval and do not wait here.

Exit codes (every verb; with ``--json`` one object is printed, last on stdout):

    0  done (also: the request had already been decided the same way)
    1  error: unknown id, a backfill draft (use `pmem apply`), decided the other way before,
       or the request cannot be performed as it stands
    3  conflict: the memory moved on since the request (stale revision) or was deleted; the
       request stays pending: reject it, or ask the client to send a new one
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from cli.app import EXIT_ERROR, app, err_console, print_json, settings
from core.display import for_terminal as tty
from core.errors import MemoryNotFound, PmemError, StaleRevision, TombstonedMemory

EXIT_CONFLICT = 3

proposals_app = typer.Typer(
    help="The owner's queue: proposed memories and the corrections, merges, deletes and "
    "publishing that AI clients and the HTTP API can only ask for.",
    no_args_is_help=True,
)
app.add_typer(proposals_app, name="proposals")


def _store():  # type: ignore[no-untyped-def]
    from store.db import Database
    from store.records import MemoryStore

    return MemoryStore(Database.open(settings()))


def _fail(err: PmemError, as_json: bool, proposal_id: str | None) -> typer.Exit:
    conflict = isinstance(err, StaleRevision | TombstonedMemory | MemoryNotFound)
    code = "conflict" if conflict else "error"
    if as_json:
        body: dict[str, Any] = {"error": code, "message": str(err), "proposal_id": proposal_id}
        if isinstance(err, StaleRevision):
            body |= {"memory_id": err.memory_id, "expected": err.expected, "current": err.current}
        print_json(body)
    err_console.print(f"[red]{code}:[/] {tty(str(err))}")
    hint = err.hint or (
        "the request stays pending: `pmem proposals reject ID`, or ask for a new one"
        if conflict
        else None
    )
    if hint:
        err_console.print(f"  → {tty(hint)}")
    return typer.Exit(EXIT_CONFLICT if conflict else EXIT_ERROR)


def _line(p: dict[str, Any]) -> str:
    from core.display import human_time
    from core.settings import local_zone

    when = human_time(p.get("created_at"), local_zone())  # in PMEM_TZ or the system's zone
    target = p.get("memory_id") or "(new memory)"
    rev = f" r{p['expected_revision']}" if p.get("expected_revision") is not None else ""
    return f"{p['proposal_id']}  {p['action']:<10} {target}{rev}  from {p.get('client') or '-'}  {when}  {p['status']}"


@proposals_app.command("list")
def proposals_list(
    all_: Annotated[
        bool,
        typer.Option("--all", help="Every row: decided requests and the backfill's drafts too."),
    ] = False,
    limit: Annotated[int, typer.Option(help="At most this many, oldest first.")] = 200,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """The pending requests, oldest first (with --all, every row of the queue)."""
    try:
        items = _store().proposals(everything=all_, limit=limit)
    except PmemError as err:
        raise _fail(err, as_json, None) from None
    if as_json:
        print_json({"proposals": [_jsonable(p) for p in items], "count": len(items)})
        return
    for p in items:
        typer.echo(tty(_line(p)))
    if not items:
        err_console.print(
            "nothing is waiting for you" + ("" if all_ else " (--all shows decided requests)")
        )
    else:
        err_console.print(
            "see one with `pmem proposals show ID`; then accept (or `pmem confirm ID`) or reject it"
        )


@proposals_app.command("show")
def proposals_show(
    proposal_id: Annotated[str, typer.Argument(help="A request id from `pmem proposals list`.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """One request: what it would do, to which memory, at which revision, and from whom."""
    store = _store()
    try:
        p = store.proposal(proposal_id)
        current = None
        if p.get("memory_id"):
            try:
                view = store.get(p["memory_id"])
                current = {
                    "title": view.title,
                    "current_revision": view.current_revision,
                    "status": view.status,
                }
            except MemoryNotFound:
                current = None
    except PmemError as err:
        raise _fail(err, as_json, proposal_id) from None
    if as_json:
        print_json(_jsonable(p) | {"memory": current})
        return
    typer.echo(tty(_line(p)))
    if current is not None:
        moved = (
            ""
            if p.get("expected_revision") in (None, current["current_revision"])
            else "  (moved on since the request)"
        )
        typer.echo(
            tty(
                f"memory: {current['title']} — revision {current['current_revision']}, {current['status']}{moved}"
            )
        )
    payload = p.get("payload") or {}
    if payload.get("merge_into"):
        typer.echo(tty(f"merge into: {payload['merge_into']}"))
    for key, value in (payload.get("record") or {}).items():
        if value not in (None, "", []):
            shown = ", ".join(value) if isinstance(value, list) else str(value)
            typer.echo(tty(f"{key}: {shown}", keep_newlines=True))
    for e in payload.get("evidence") or []:
        typer.echo(tty(f"evidence [{e.get('source_key')}]: {e.get('text')}"))
    if payload.get("note"):
        typer.echo(tty(f"note: {payload['note']}"))
    if p.get("result"):
        typer.echo(tty(f"result: {p['result']}"))


def _decide(proposal_id: str, accept: bool, as_json: bool) -> None:
    try:
        out = _store().decide(proposal_id, accept=accept, by="owner")
    except PmemError as err:
        raise _fail(err, as_json, proposal_id) from None
    if as_json:
        print_json(_jsonable(out))
        return
    verb = "accepted" if accept else "rejected"
    again = " (already)" if out.get("already") else ""
    done = out.get("result") or {}
    what = (
        f": memory {done.get('memory_id')} at revision {done['revision']}"
        if "revision" in done
        else (f": memory {done.get('memory_id')} deleted" if done.get("deleted") else "")
    )
    err_console.print(tty(f"{proposal_id} {verb}{again} ({out['action']}){what}"))


@proposals_app.command("accept")
def proposals_accept(
    proposal_id: Annotated[str, typer.Argument(help="A pending request id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Perform a pending request as the owner (your confirmation): create or append the
    proposed memory, or apply the correction, merge, delete or publish, at the revision the
    request was made against. Exit 3 when the memory moved on (the request stays pending)."""
    _decide(proposal_id, True, as_json)


@proposals_app.command("reject")
def proposals_reject(
    proposal_id: Annotated[str, typer.Argument(help="A pending request id.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Refuse a pending request; nothing is changed, the decision is kept."""
    _decide(proposal_id, False, as_json)


def _jsonable(p: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in p.items()}
