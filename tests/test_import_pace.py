"""The import's pace (issue 12, item 1; ADR 0026): the import's pass indexes bigrams, words and
stems only and queues the Japanese messages; the later stage (``SearchStore.sync_forms``: the
default import after its summary, the backfill, `pmem reindex`) adds SudachiPy's normalised
forms, resumably, and the index is then the same as one built in a single pass."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from core.textsearch import (
    index_forms,
    index_rows_many,
    index_tokens_long,
    tsvector_literal,
)
from tests.test_ledger_cmds import chatgpt_export, one_conversation

JA = "引っ越しの見積もりを三社から取って、結局サーバを安い方に決めました。"
TEXTS = [
    JA,
    "We decided to keep the raw transcripts byte-exact; the laptops were compared.",
    "ｻｰﾊﾞの設定を変えた。 And the English part, with decisions.",
    "only ascii",
    "",
    (JA + " Some English in between. " + "データベースの移行を見直しました。\n")
    * 800,  # > 20k chars
]


def test_the_import_pass_and_the_later_forms_make_the_one_pass_tokens() -> None:
    for text in TEXTS:
        full = set(index_tokens_long(text))
        quick = set(index_tokens_long(text, forms=False))
        assert quick | set(index_forms(text)) == full
    assert "決める" in index_forms(JA) and "決める" not in index_tokens_long(JA, forms=False)
    rows = index_rows_many(TEXTS[:4], 200, forms=False)
    assert [ja for _, ja in rows] == [True, False, True, False]  # half-width katakana is Japanese
    # the fast literal is the escaped one whenever no token needs escaping
    assert tsvector_literal(["a", "決め"]) == "'a' '決め'" and tsvector_literal([]) == ""
    assert tsvector_literal(["it's", "a\\b"]) == "'it''s' 'a\\\\b'"


def _export(tmp_path: Path) -> Path:
    convs = [
        one_conversation("c1", "移行", [("user", JA), ("assistant", "見積もりを比べました。")]),
        one_conversation(
            "c2", "english", [("user", "Which laptops did I compare?"), ("assistant", "Three.")]
        ),
        one_conversation(
            "c3", "混在", [("user", "ｻｰﾊﾞを決めた"), ("assistant", "はい、決めました。")]
        ),
    ]
    return chatgpt_export(tmp_path / "conversations.json", convs)


def _tokens(db) -> dict[str, set[str]]:
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT message_key, text, tsvector_to_array(tokens) FROM message_search"
        ).fetchall()
    return {k: set(toks) for k, _, toks in rows} | {f"text:{k}": {t} for k, t, _ in rows}


def test_forms_are_a_resumable_later_stage(db, tmp_path: Path) -> None:
    from flows.importing import run_import
    from search.reader import SearchStore
    from store.index_backlog import backlog
    from store.ledger import Ledger

    stats = run_import(Ledger(db), "chatgpt", str(_export(tmp_path)), index_messages=True)
    assert stats["conversations_new"] == 3 and stats["indexed_messages"] == 6
    left = backlog(db)
    assert left.unindexed_messages == 0 and left.messages == 6
    assert left.messages_without_forms == 4  # the Japanese messages; the English ones need none
    before = _tokens(db)
    assert not any("決める" in toks for key, toks in before.items() if not key.startswith("text:"))
    index = SearchStore(db)
    hits = index.recall("見積もり", embedder=None).hits  # the bigrams answer meanwhile
    assert {h.conversation_key for h in hits} >= {"chatgpt:c1"}

    class Stop(Exception):
        pass

    def stop(n: int) -> None:
        raise Stop

    with pytest.raises(Stop):  # cut off after its first batch: that batch is done, the rest waits
        index.sync_forms(batch=1, workers=0, progress=stop)
    assert backlog(db).messages_without_forms == 3
    assert index.sync_forms(workers=0) == 3  # the next run finishes the rest
    assert backlog(db).messages_without_forms == 0 and index.sync_forms(workers=0) == 0
    after = _tokens(db)
    for key, toks in after.items():
        if not key.startswith("text:"):
            (text,) = after[f"text:{key}"]
            assert toks == set(index_tokens_long(text)), key  # as one pass would have made them
    assert any("決める" in toks for toks in after.values())


def test_no_embed_leaves_the_forms_and_the_default_import_adds_them(
    pmem_env, tmp_path: Path, monkeypatch
) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    path = _export(tmp_path)
    result = CliRunner().invoke(app, ["import", str(path), "--no-embed", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["indexed"]["messages_without_forms"] == 4 and out["indexed"]["formed_messages"] == 0
    assert "Japanese normal forms pending for 4 messages" in result.stderr
    again = CliRunner().invoke(app, ["import", str(path), "--json"])  # unchanged: the stage runs
    assert again.exit_code == 0, again.output
    out = json.loads(again.stdout.strip().splitlines()[-1])
    assert out["conversations"]["unchanged"] == 3
    assert out["indexed"]["formed_messages"] == 4 and out["indexed"]["messages_without_forms"] == 0


@pytest.mark.needs_shared
def test_a_batch_stores_its_index_rows_in_its_own_transaction(db, monkeypatch) -> None:
    """The new conversations' index rows are written with the batch (not read back from the
    queue): a crash mid-batch leaves whole conversations with their index rows, or none; the
    re-run finishes both, and nothing is left queued."""
    import store.ledger as sl
    from flows.importing import run_import
    from store.ledger import Ledger
    from tests.test_import_contract import SUBSET

    monkeypatch.setenv("PMEM_INDEX_WORKERS", "0")
    real = sl._copy_index
    calls = {"n": 0}

    lock = threading.Lock()  # the commit stage runs batches in two threads

    def die_on_the_second(*args, **kwargs):
        with lock:
            calls["n"] += 1
            mine = calls["n"]
        n = real(*args, **kwargs)
        if mine == 2:
            raise RuntimeError("power cut")
        return n

    monkeypatch.setattr(sl, "_copy_index", die_on_the_second)
    with pytest.raises(RuntimeError):
        run_import(Ledger(db), "chatgpt", str(SUBSET), batch_conversations=2, index_messages=True)

    def counts() -> tuple[int, int, int, int]:
        with db.connection() as conn:
            return conn.execute(
                """SELECT (SELECT count(*) FROM source_conversations),
                          (SELECT count(*) FROM source_messages WHERE channel IN ('person', 'assistant')),
                          (SELECT count(*) FROM message_search),
                          (SELECT count(*) FROM message_search_pending)"""
            ).fetchone()

    convs, first, indexed, queued = counts()
    # whole batches but the failed one (the commit threads store batches at once: the one after
    # it may have committed too), each with its index rows
    assert convs in (2, 4) and indexed == first > 0 and queued == 0
    monkeypatch.setattr(sl, "_copy_index", real)
    stats = run_import(
        Ledger(db), "chatgpt", str(SUBSET), batch_conversations=2, index_messages=True
    )
    assert (stats["conversations_unchanged"], stats["conversations_new"]) == (convs, 6 - convs)
    convs, messages, indexed, queued = counts()
    assert convs == 6 and indexed == messages > 50 and queued == 0
    assert stats["indexed_messages"] == messages - first  # all of them stored with their batches


def test_a_huge_clean_text_is_copied_into_the_index_by_the_server(
    db, tmp_path: Path, monkeypatch
) -> None:
    """A huge message's text is not sent twice: the server copies it from the ledger's body when
    it is clean (valid UTF-8, no NUL); one with a NUL or a lone surrogate goes through the client,
    sanitized. Either way the index holds what recall shows."""
    import store.ledger_rows as sl
    from flows.importing import run_import
    from store.ledger import Ledger

    monkeypatch.setattr(sl, "_SERVER_COPY", 10)
    monkeypatch.setenv("PMEM_INDEX_WORKERS", "0")
    clean, odd = "長い本文です。" * 5 + " and more", "NUL\x00 here and a lone \ud800 surrogate too"
    path = tmp_path / "conversations.json"
    path.write_text(
        json.dumps([one_conversation("h1", "huge", [("user", clean), ("assistant", odd)])])
    )
    stats = run_import(Ledger(db), "chatgpt", str(path), index_messages=True)
    assert stats["indexed_messages"] == 2
    with db.connection() as conn:
        texts = dict(conn.execute("SELECT role, text FROM message_search").fetchall())
        queued = conn.execute("SELECT count(*) FROM message_search_pending").fetchone()[0]
    assert texts == {"user": clean, "assistant": "NUL\ufffd here and a lone \ufffd surrogate too"}
    assert queued == 0


def test_the_batch_queues_only_what_it_did_not_index(db) -> None:
    """The queue's trigger is off while a batch copies its new messages (migration 0030): the
    batch's own index rows are not queued (and taken off again), but every message it has no
    row for (missing tokens, another speaker's) is queued, as the trigger would have done, and
    the index step then indexes it. Writes outside the import's batch still queue by trigger."""
    from core.models import Channel, Conversation, Message, PrefilterDecision, Provenance
    from search.reader import SearchStore
    from store.ledger import BatchIndex, Ledger

    def msg(conv: str, n: int, role: str, channel: Channel, text: str) -> Message:
        return Message(
            key=f"line:{conv}:{n}",
            node_id=str(n),
            role=role,
            channel=channel,
            content_type="text",
            text=text,
            position=n,
        )

    conv = Conversation(
        key="line:c1",
        source="line",
        external_id="c1",
        title="t",
        messages=[
            msg("c1", 0, "user", Channel.PERSON, "tokens given"),
            msg("c1", 1, "assistant", Channel.ASSISTANT, "no tokens for this one"),
            msg("c1", 2, "friend", Channel.OTHER, "another speaker"),
            msg("c1", 3, "tool", Channel.TOOL, "never indexed"),
        ],
        provenance=Provenance(file="x", position=0),
    )
    index = BatchIndex(lambda: {"line:c1:0": (tsvector_literal(["tokens", "given"]), False)})
    ledger = Ledger(db)
    ledger.write_batch(
        [conv],
        ledger.start_import("line", "x"),
        lambda c: PrefilterDecision(
            conversation_key=c.key, content_hash="h", keep=True, reason="keep", rule_version="r"
        ),
        "r",
        index=index,
    )
    assert index.written == 1
    with db.connection() as conn:
        indexed = {r[0] for r in conn.execute("SELECT message_key FROM message_search")}
        queued = {r[0] for r in conn.execute("SELECT message_key FROM message_search_pending")}
        # outside the import's batch the trigger queues as before
        conn.execute(
            """INSERT INTO source_messages (message_key, conversation_key, node_id, role, channel,
                   content_type, body, content_hash, position, on_active_path, import_id)
               SELECT 'line:c1:9', conversation_key, '9', 'user', 'person', 'text', 'late'::bytea,
                      'h9', 9, true, import_id FROM source_messages WHERE message_key = 'line:c1:0'"""
        )
        late = conn.execute(
            "SELECT count(*) FROM message_search_pending WHERE message_key = 'line:c1:9'"
        ).fetchone()
    assert indexed == {"line:c1:0"}
    assert queued == {"line:c1:1", "line:c1:2"}
    assert late == (1,)
    SearchStore(db).sync_messages(workers=0)
    with db.connection() as conn:
        indexed = {r[0] for r in conn.execute("SELECT message_key FROM message_search")}
        left = conn.execute("SELECT count(*) FROM message_search_pending").fetchone()
    assert indexed == {"line:c1:0", "line:c1:1", "line:c1:2", "line:c1:9"} and left == (0,)
