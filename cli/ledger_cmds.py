"""`pmem ledger`: what was imported, what was set aside, and the person's keep/drop overrides.

`list` and `show` read the source ledger; `quarantine` lists the records imports set aside;
`keep` / `drop` override the prefilter for one conversation. Message text (and titles) are shown
with secrets redacted (`core.secrets.redact`) unless `--raw`; text on the terminal has its control
characters escaped, so an export cannot move the cursor or rewrite the screen. They never import
Prefect.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import app, err_console, handle_errors, print_json, settings
from core.display import for_terminal, local_time
from core.errors import PmemError

ledger_app = typer.Typer(
    help="The source ledger: imported conversations, quarantined records, keep/drop overrides.",
    no_args_is_help=True,
)
app.add_typer(ledger_app, name="ledger")

# kind of a message as `pmem ledger show` reports it (the importers' channel, see
# shared/docs/formats.md): person, assistant, tool, machinery; `other` is another human speaker
KINDS = ("person", "assistant", "tool", "machinery", "other")


def _show(text: str | None, raw: bool) -> str | None:
    if text is None or raw:
        return text
    from core.secrets import redact

    return redact(text)[0]


def _show_conversation(texts: list[str], raw: bool) -> list[str]:
    """A conversation's texts, redacted as one conversation (a secret split across two
    messages goes from both) unless ``raw``."""
    if raw:
        return texts
    from core.secrets import redact_messages

    return redact_messages(texts)


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _open_ledger() -> Any:
    from store.db import Database
    from store.ledger import Ledger

    return Ledger(Database.open(settings()))


def _rule_version() -> str:
    from stages.prefilter import RULE_VERSION

    return RULE_VERSION


def _item(row: dict[str, Any], raw: bool) -> dict[str, Any]:
    return {
        "key": row["key"],
        "source": row["source"],
        "title": _show(row["title"], raw),
        "created_at": _when(row["created_at"]),
        "message_count": row["message_count"],
        "kept": row["kept"],
        "prefilter_reason": row["prefilter_reason"],
        "override": None if row["override"] is None else ("keep" if row["override"] else "drop"),
    }


def _kept_word(kept: bool | None) -> str:
    return "undecided" if kept is None else ("kept" if kept else "dropped")


@ledger_app.command("list")
@handle_errors
def list_(
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Only this source (chatgpt, claude, codex, claude-code, jsonl-log, line, telegram).",
        ),
    ] = None,
    raw: Annotated[
        bool, typer.Option("--raw", help="Show titles as stored (no secret redaction).")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object {"items": [...]}.')
    ] = False,
) -> None:
    """Every imported conversation: key, title, date, messages, and whether the prefilter kept it."""
    ledger = _open_ledger()
    try:
        rows = ledger.list_conversations(_rule_version(), source)
    finally:
        ledger.db.close()
    items = [_item(r, raw) for r in rows]
    if as_json:
        print_json({"items": items})
        return
    if not items:
        err_console.print("the ledger is empty: import an export with `pmem import PATH`")
    for it in items:
        when = local_time(it["created_at"])
        title = for_terminal(it["title"] or "(untitled)")
        typer.echo(
            f"{for_terminal(it['key'])}  {when}  {it['message_count']:>5} msgs  "
            f"{_kept_word(it['kept'])} ({it['prefilter_reason'] or '-'})  {title}"
        )
    if items:
        kept = sum(1 for it in items if it["kept"])
        err_console.print(f"{len(items)} conversations, {kept} kept")


@ledger_app.command()
@handle_errors
def show(
    conversation_key: Annotated[
        str, typer.Argument(help="A key from `pmem ledger list`, e.g. chatgpt:<conversation_id>.")
    ],
    raw: Annotated[
        bool, typer.Option("--raw", help="Show the text as stored (no secret redaction).")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help='One JSON object {"conversation": {...}, "messages": [...]}.'),
    ] = False,
) -> None:
    """One conversation's active path in order, each message with its kind (person, assistant,
    tool, machinery, other). Secrets are redacted unless --raw."""
    ledger = _open_ledger()
    try:
        row = ledger.conversation_row(conversation_key, _rule_version())
        if row is None:
            raise PmemError(
                f"no conversation {conversation_key} in the ledger",
                hint="`pmem ledger list` shows the keys",
            )
        rows = ledger.active_messages(conversation_key)
    finally:
        ledger.db.close()
    conversation = {
        **_item(row, raw),
        "external_id": row["external_id"],
        "updated_at": _when(row["updated_at"]),
        "provenance": row["provenance"],
        "unknown_types": row["unknown_types"],
    }
    title, *texts = _show_conversation([row["title"] or "", *(m["text"] for m in rows)], raw)
    if row["title"] is not None:
        conversation["title"] = title  # a value its messages reveal as a secret goes from it too
    messages = [
        {
            "key": m["key"],
            "role": m["role"],
            "kind": m["channel"],
            "content_type": m["content_type"],
            "created_at": _when(m["created_at"]),
            "text": text or "",
        }
        for m, text in zip(rows, texts, strict=True)
    ]
    if as_json:
        print_json({"conversation": conversation, "messages": messages})
        return
    title = for_terminal(conversation["title"] or "(untitled)")
    typer.echo(
        f"{title}  ({for_terminal(conversation['key'])}, {conversation['message_count']} messages, "
        f"{_kept_word(conversation['kept'])}: {conversation['prefilter_reason'] or '-'})"
    )
    for m in messages:
        when = local_time(m["created_at"])
        typer.echo(f"\n[{m['kind']}] {for_terminal(m['role'])}  {when}  {for_terminal(m['key'])}")
        typer.echo(for_terminal(m["text"], keep_newlines=True))


@ledger_app.command()
@handle_errors
def quarantine(
    source: Annotated[str | None, typer.Option("--source", help="Only this source.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='One JSON object {"items": [...]}.')
    ] = False,
) -> None:
    """Records the imports set aside: the file, the record (array index or line number) and why."""
    ledger = _open_ledger()
    try:
        rows = ledger.quarantined(source)
    finally:
        ledger.db.close()
    items = [
        {
            "file": r["file"],
            "record": r["position"],
            "reason": r["reason"],
            "source": r["source"],
            "seen_at": _when(r["seen_at"]),
        }
        for r in rows
    ]
    if as_json:
        print_json({"items": items})
        return
    if not items:
        err_console.print("nothing quarantined")
    for it in items:
        typer.echo(
            f"{for_terminal(it['file'])}  record {it['record']}  {for_terminal(it['reason'])}"
        )


def _override(conversation_key: str, keep: bool, as_json: bool) -> None:
    ledger = _open_ledger()
    try:
        if not ledger.has_conversation(conversation_key):
            raise PmemError(
                f"no conversation {conversation_key} in the ledger",
                hint="`pmem ledger list` shows the keys",
            )
        ledger.set_override(conversation_key, keep)
    finally:
        ledger.db.close()
    if as_json:
        print_json({"key": conversation_key, "kept": keep, "override": "keep" if keep else "drop"})
        return
    word = "kept for drafting" if keep else "dropped from drafting"
    err_console.print(
        f"{escape(for_terminal(conversation_key))} is {word} (your override; the next backfill follows it)"
    )


@ledger_app.command()
@handle_errors
def keep(
    conversation_key: Annotated[str, typer.Argument(help="A key from `pmem ledger list`.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Keep a conversation for drafting whatever the prefilter says."""
    _override(conversation_key, True, as_json)


@ledger_app.command()
@handle_errors
def drop(
    conversation_key: Annotated[str, typer.Argument(help="A key from `pmem ledger list`.")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Drop a conversation from drafting whatever the prefilter says."""
    _override(conversation_key, False, as_json)
