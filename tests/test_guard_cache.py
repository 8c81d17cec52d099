"""The guard's scans of whole conversations, stored by the import's later stage
(store.guard_cache): recall's redaction is the same with the stored scan as without it, a stored
scan is used only for the same guard and texts, and it holds no text."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

import store.guard_cache as gc
from core.models import Conversation
from mcp_server.service import MemoryService
from store.guard_cache import GuardCache
from store.ledger import Ledger
from tests.test_secrets import _conversation

WHEN = datetime(2025, 3, 3, 10, 0, tzinfo=UTC)
NOW = datetime(2025, 3, 4, 12, 0, tzinfo=UTC)
VALUE = "Zq8vR2mK7xT4"  # revealed as a password in one message, repeated in the title and a hit


def conversation(key: str, title: str, texts: list[str]) -> Conversation:
    return _conversation(texts, title=title, key=key, when=WHEN)


@pytest.fixture
def svc(db) -> MemoryService:
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    ledger.upsert(
        conversation(
            "g1",
            f"デプロイの相談 {VALUE}",
            [
                f"デプロイ先のサーバーを決めたい。メモ: {VALUE}",
                "了解です。候補を挙げます。",
                "ちなみに管理画面の設定も見ておく。",
                "はい。",
                f"管理画面の password: {VALUE}",
            ],
        ),
        imp,
    )
    ledger.upsert(conversation("g2", "関係ない話", ["今日は晴れ。デプロイは明日。"]), imp)
    return MemoryService(db, embedder=None, tz="UTC")


def shown(svc: MemoryService) -> dict[str, str]:
    r = svc.recall("デプロイ", now=NOW)
    out = {h.message_key: h.text for h in r.hits}
    out |= {h.conversation_key: h.conversation_title or "" for h in r.hits}
    return out


def test_a_stored_scan_redacts_what_a_scan_at_query_time_redacts(svc, db, monkeypatch) -> None:
    before = shown(svc)  # no stored scan yet: scanned at query time
    assert before["chatgpt:g1"].startswith("デプロイの相談 [REDACTED")
    assert VALUE not in before["chatgpt:g1:n0"]  # a value revealed four messages later
    assert GuardCache(db).pending() == 2
    assert (
        GuardCache(db).fill() == 2 and GuardCache(db).pending() == 0 and GuardCache(db).fill() == 0
    )

    def no_scan(*_a, **_k):
        raise AssertionError("scanned at query time although the scan is stored")

    monkeypatch.setattr(gc, "find_secrets_in_messages", no_scan)
    after = shown(svc)
    assert after == before and VALUE not in " ".join(after.values())


def test_a_stored_scan_is_used_only_for_the_same_guard_and_texts(svc, db, monkeypatch) -> None:
    GuardCache(db).fill()
    calls = []
    real = gc.find_secrets_in_messages

    def counted(texts, speakers=None):
        calls.append(len(texts))
        return real(texts, speakers)

    monkeypatch.setattr(gc, "find_secrets_in_messages", counted)
    monkeypatch.setattr(gc, "guard_version", lambda: "another-guard")  # a changed rule
    assert VALUE not in " ".join(shown(svc).values()) and calls  # scanned again at query time
    assert GuardCache(db).pending() == 2 and GuardCache(db).fill() == 2
    with db.connection() as conn:  # the older scans of those conversations are gone
        assert conn.execute("SELECT count(*) FROM conversation_guard").fetchone()[0] == 2


def test_a_changed_conversation_is_scanned_again_and_rows_hold_no_text(svc, db, db_url) -> None:
    GuardCache(db).fill()
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    ledger.upsert(
        conversation(
            "g2", "関係ない話", ["今日は晴れ。デプロイは明日。", "token = Kx9mQ2vL7pR4wZ8t"]
        ),
        imp,
    )
    assert GuardCache(db).pending() == 1 and GuardCache(db).fill() == 1
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT findings::text FROM conversation_guard").fetchall()
    text = " ".join(r[0] for r in rows)
    assert VALUE not in text and "Kx9mQ2vL7pR4wZ8t" not in text and "デプロイ" not in text
    assert "password" in text or "secret" in text  # kinds and offsets only


def test_reindex_runs_the_stage(svc, db) -> None:
    svc.reindex()
    assert GuardCache(db).pending() == 0


def test_a_chat_partners_message_is_redacted_from_the_stored_scan(db, monkeypatch) -> None:
    """A chat history's partner (channel ``other``) is one of the conversation's words: recall
    shows the partner's messages, so the stored scan covers them, with the whole conversation
    as context (a value the person stated as a password three messages before goes from the
    partner's repeat of it too; redacting the partner's hit with its neighbours alone left it)."""
    from core.models import Channel, Message

    texts = [
        ("user", Channel.PERSON, f"wifi password: {VALUE}"),
        ("Sam", Channel.OTHER, "ok, noted"),
        ("user", Channel.PERSON, "see you at the lake house"),
        ("Sam", Channel.OTHER, "the lake house then"),
        ("Sam", Channel.OTHER, f"lake house wifi was {VALUE} right?"),
    ]
    conv = _conversation([t for _, _, t in texts], title="lake house", key="p1", when=WHEN)
    conv = conv.model_copy(
        update={
            "messages": [
                Message(**(m.model_dump() | {"role": role, "channel": channel}))
                for m, (role, channel, _) in zip(conv.messages, texts, strict=True)
            ]
        }
    )
    ledger = Ledger(db)
    ledger.upsert(conv, ledger.start_import("chatgpt", "synthetic"))
    svc = MemoryService(db, embedder=None, tz="UTC")
    assert GuardCache(db).fill() == 1 and GuardCache(db).pending() == 0

    def no_scan(*_a, **_k):
        raise AssertionError("scanned at query time although the scan is stored")

    monkeypatch.setattr(gc, "find_secrets_in_messages", no_scan)
    monkeypatch.setattr(
        "core.secrets.find_secrets_in_messages", no_scan
    )  # the neighbours' scan  # the neighbours' scan
    hits = {h.message_key: h.text for h in svc.recall("lake house wifi", now=NOW).hits}
    assert "chatgpt:p1:n4" in hits and VALUE not in " ".join(hits.values())
    assert "[REDACTED" in hits["chatgpt:p1:n4"]


def test_a_scan_stored_before_the_partners_were_words_is_made_again(svc, db, monkeypatch) -> None:
    """A stored scan records what made it (the guard's version and the channels scanned): one
    made over fewer channels counts as missing, so the next later stage scans again."""
    monkeypatch.setattr(gc, "WORD_CHANNELS", ("person", "assistant"))
    assert GuardCache(db).fill() == 2 and GuardCache(db).pending() == 0
    monkeypatch.undo()
    assert GuardCache(db).pending() == 2 and GuardCache(db).fill() == 2
