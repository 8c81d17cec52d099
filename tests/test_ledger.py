"""The source ledger on the real PostgreSQL: lossless, idempotent, growth-aware."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from core.models import Channel, Conversation, Message, Provenance
from importers import iter_source
from store.ledger import Ledger
from tests.conftest import REAL

SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
TABLES = (
    "source_conversations",
    "source_messages",
    "prefilter_decisions",
    "memories",
    "memory_revisions",
)


def snapshot(db_url: str) -> dict[str, list[tuple]]:
    """Every ledger row with its xmin: any UPDATE (even to the same values) changes xmin."""
    with psycopg.connect(db_url) as conn:
        return {
            t: conn.execute(f"SELECT xmin::text, * FROM {t} ORDER BY 2").fetchall()  # noqa: S608
            for t in ("source_conversations", "source_messages")
        }


def import_file(ledger: Ledger, path) -> list[str]:
    imp = ledger.start_import("chatgpt", str(path))
    outcomes = [
        ledger.upsert(c, imp)[0]
        for c in iter_source("chatgpt", path)
        if isinstance(c, Conversation)
    ]
    return outcomes


@pytest.mark.needs_shared
def test_reimport_changes_no_row(db, db_url):
    ledger = Ledger(db)
    assert import_file(ledger, SUBSET) == ["new"] * 6
    before = snapshot(db_url)
    assert len(before["source_messages"]) > 50
    assert import_file(ledger, SUBSET) == ["unchanged"] * 6
    assert snapshot(db_url) == before


def test_ledger_round_trips_byte_exact(db):
    ledger = Ledger(db)
    texts = [
        "nul\x00inside",
        "lone \ud800 surrogate",
        "emoji 🧠👩‍💻",
        "crlf\r\nline\r\n",
        "  spaces  ",
        "",
    ]
    conv = make_conv("c-exact", texts)
    ledger.upsert(conv, ledger.start_import("chatgpt", "synthetic"))
    back = ledger.load(conv.key)
    assert [m.text for m in back.active_messages] == texts
    assert back.content_hash == conv.content_hash


def test_grown_conversation_adds_only_new_messages(db, db_url):
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    first = make_conv("c-grow", ["最初の質問", "回答"])
    assert ledger.upsert(first, imp) == ("new", 2)
    before = {r[1]: r[0] for r in snapshot(db_url)["source_messages"]}  # key → xmin
    grown = make_conv("c-grow", ["最初の質問", "回答", "追加の質問"])
    assert ledger.upsert(grown, imp) == ("changed", 1)
    after = {r[1]: r[0] for r in snapshot(db_url)["source_messages"]}
    assert set(after) - set(before) == {"chatgpt:c-grow:n2"}
    assert all(after[k] == v for k, v in before.items()), "old messages must not be rewritten"


def make_conv(cid: str, texts: list[str]) -> Conversation:
    t0 = datetime(2025, 4, 1, 12, 0, tzinfo=UTC)
    msgs = [
        Message(
            key=f"chatgpt:{cid}:n{i}",
            node_id=f"n{i}",
            parent_id=f"n{i - 1}" if i else None,
            role="user" if i % 2 == 0 else "assistant",
            channel=Channel.PERSON if i % 2 == 0 else Channel.ASSISTANT,
            content_type="text",
            text=t,
            created_at=t0,
            position=i,
        )
        for i, t in enumerate(texts)
    ]
    return Conversation(
        key=f"chatgpt:{cid}",
        source="chatgpt",
        external_id=cid,
        title="t",
        created_at=t0,
        messages=msgs,
        provenance=Provenance(file="synthetic", position=0),
    )
