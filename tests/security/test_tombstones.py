"""Point 5 of issue 10: a deleted memory is not re-created by any later draft that rests on any
message of its source conversations, grown or not, unless the owner restores it. (Before, the
tombstone blocked only a draft whose every evidence key was tombstoned, and a conversation that
grew by one message brought the memory back.) The real backfill, store and CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.errors import TombstonedMemory
from core.models import CommitRequest, EvidenceIn
from core.settings import Settings
from flows import pipeline as pl
from providers.fake import ScriptedDrafter
from store.records import MemoryStore
from tests.security.injection_corpus import chatgpt_conversation, write_export
from tests.security.trust_support import seed_conversation

PLAN = (
    "ノートPCの買い替え",
    [
        ("user", "ノートPCは ThinkPad X1 Carbon に買い替えることに決めた。予算は25万円まで。"),
        ("assistant", "X1 Carbon は軽くてキーボードも良いので、持ち運びが多いなら良い選択です。"),
    ],
)
T0 = 1740000000.0


@pytest.fixture(autouse=True)
def _no_vectors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMEM_EMBEDDER", "none")


def backfill(export) -> dict:
    p = pl.Pipeline.open(Settings(batch_max_conversations=1))
    p.drafter = ScriptedDrafter([])  # drafts like the offline extractive drafter
    try:
        return pl.run_backfill(p, "chatgpt", str(export))
    finally:
        p.close()


def active(db) -> list[tuple[str, int]]:
    with db.connection() as conn:
        return conn.execute(
            "SELECT id, current_revision FROM memories WHERE status = 'active' ORDER BY id"
        ).fetchall()


def test_a_grown_conversation_does_not_bring_a_deleted_memory_back(pmem_env, db, tmp_path):
    first = backfill(write_export(tmp_path / "one.json", [chatgpt_conversation("pc", *PLAN, T0)]))
    assert first["memories_created"] == 1
    [(memory_id, rev)] = active(db)
    store = MemoryStore(db)
    store.delete(memory_id, expected_revision=rev, reason="owner deleted it")

    # the same export again: nothing is drafted; the export grown by one message: drafted again
    assert backfill(tmp_path / "one.json")["drafter_calls"] == 0
    grown = PLAN[1] + [("user", "結局 X1 Carbon を注文した。届くのは来週の金曜日。")]
    again = backfill(
        write_export(tmp_path / "two.json", [chatgpt_conversation("pc", PLAN[0], grown, T0)])
    )
    assert again["drafter_calls"] == 1 and again["memories_created"] == 0 and again["commits"] == 0
    assert [c["reason"] for c in again["conflict_drafts"]] == ["TombstonedMemory"]
    assert active(db) == []

    # any writer, any message of that conversation: the new one alone, or mixed with another chat
    new_key = "chatgpt:pc:pc-m2"
    other = seed_conversation(
        db, "chatgpt:other", [("user", "週末は山に登ることにした。天気が良ければ。")]
    )
    for i, evidence in enumerate(
        [
            [EvidenceIn(source_key=new_key, text="結局 X1 Carbon を注文した")],
            [
                EvidenceIn(source_key=other[0], text="週末は山に登ることにした"),
                EvidenceIn(source_key=new_key, text="届くのは来週の金曜日"),
            ],
        ]
    ):
        with pytest.raises(TombstonedMemory) as err:
            store.commit(
                CommitRequest(
                    kind="plan",
                    title="PC",
                    canonical_summary="X1 Carbon",
                    index_summary="PC",
                    evidence=evidence,
                    idempotency_key=f"again-{i}",
                )
            )
        assert err.value.memory_id == memory_id
    # an unrelated conversation is not blocked
    ok = store.commit(
        CommitRequest(
            kind="plan",
            title="登山",
            canonical_summary="山に登る",
            index_summary="登山",
            evidence=[EvidenceIn(source_key=other[0], text="週末は山に登ることにした")],
            idempotency_key="other",
        )
    )
    assert ok.created


def test_the_owner_restore_brings_it_back(pmem_env, db, tmp_path):
    backfill(write_export(tmp_path / "one.json", [chatgpt_conversation("pc", *PLAN, T0)]))
    [(memory_id, rev)] = active(db)
    MemoryStore(db).delete(memory_id, expected_revision=rev)
    runner = CliRunner()
    refused = runner.invoke(app, ["restore", memory_id, str(rev)], input="n\n")
    assert refused.exit_code == 1 and active(db) == []
    done = runner.invoke(app, ["restore", memory_id, str(rev), "--yes", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout.strip().splitlines()[-1])["revision"] == rev + 1
    assert active(db) == [(memory_id, rev + 1)]
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) FROM tombstones").fetchone()[0] == 0
    # restored: the grown conversation is drafted against it again (offered, appended)
    grown = PLAN[1] + [("user", "結局 X1 Carbon を注文した。届くのは来週の金曜日。")]
    again = backfill(
        write_export(tmp_path / "two.json", [chatgpt_conversation("pc", PLAN[0], grown, T0)])
    )
    assert again["conflicts"] == 0 and again["memories_created"] == 0 and again["commits"] == 1
    assert active(db) == [(memory_id, rev + 2)]
