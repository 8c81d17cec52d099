"""Oversize conversations: split at message boundaries, drafted chunk by chunk (each chunk's
answer kept for resume), merged deterministically into one record per topic."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg
from hypothesis import given
from hypothesis import strategies as st

from core.errors import TransientDraftError
from core.models import Channel, DraftRecord, EvidencePointer, Message
from core.settings import Settings
from flows import pipeline as pl
from providers.fake import ScriptedDrafter
from stages.chunking import merge_chunk_drafts, split_messages


def msg(i: int, text: str) -> Message:
    return Message(
        key=f"chatgpt:c:{i}",
        node_id=str(i),
        role="user",
        channel=Channel.PERSON,
        content_type="text",
        text=text,
        position=i,
    )


@given(
    st.lists(st.integers(min_value=0, max_value=3000), max_size=30),
    st.integers(min_value=1000, max_value=5000),
)
def test_split_keeps_every_message_in_order_under_the_cap(sizes, cap):
    messages = [msg(i, "x" * n) for i, n in enumerate(sizes)]
    chunks = split_messages(messages, cap)
    assert [m for c in chunks for m in c] == messages
    for c in chunks:
        assert len(c) == 1 or sum(len(m.text) for m in c) <= cap


def rec(title: str, summary: str, kind: str = "episode", **kw) -> DraftRecord:
    return DraftRecord(
        action="create",
        title=title,
        memory_kind=kind,
        canonical_summary=summary,
        index_summary=summary[:20],
        **kw,
    )


def test_merge_is_one_record_per_topic_and_never_shortens():
    t1, t2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC)
    merged = merge_chunk_drafts(
        [
            [
                rec(
                    "引っ越し",
                    "前半: 候補を比べた",
                    aliases=["move"],
                    occurred_at=t2,
                    valid_from=t1,
                    evidence=[EvidencePointer(message_key="k1", quote_hint="候補")],
                )
            ],
            [
                rec(
                    "引っ越し ",
                    "後半: 川沿いに決めた",
                    kind="decision",
                    aliases=["move", "引越"],
                    occurred_at=t1,
                    valid_from=t2,
                    evidence=[EvidencePointer(message_key="k2", quote_hint="決めた")],
                ),
                rec("Budget", "rent limit"),
            ],
        ]
    )
    assert [r.title for r in merged] == ["引っ越し", "Budget"]
    m = merged[0]
    assert m.canonical_summary == "前半: 候補を比べた\n\n後半: 川沿いに決めた"
    assert m.memory_kind == "decision" and m.aliases == ["move", "引越"]
    assert m.occurred_at == t1 and m.valid_from == t2
    assert [p.message_key for p in m.evidence] == ["k1", "k2"]
    assert merge_chunk_drafts([[rec("a", "x")], [rec("a", "x")]])[0].canonical_summary == "x"


def long_export(path, n_messages=24) -> None:
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}}
    for i in range(n_messages):
        role = "user" if i % 2 == 0 else "assistant"
        text = (
            f"{i}番目の検討です。"
            + "長い説明が続きます。" * 30
            + ("結局、この案に決めた。" if i == 22 else "")
        )
        mapping[f"m{i}"] = {
            "id": f"m{i}",
            "parent": "root" if i == 0 else f"m{i - 1}",
            "children": [f"m{i + 1}"] if i + 1 < n_messages else [],
            "message": {
                "id": f"m{i}",
                "author": {"role": role},
                "create_time": 1717000000.0 + i,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
    conv = {
        "id": "long-1",
        "title": "長い相談",
        "create_time": 1717000000.0,
        "current_node": f"m{n_messages - 1}",
        "mapping": mapping,
    }
    path.write_text(json.dumps([conv]))


def test_an_oversize_conversation_is_drafted_in_chunks_and_resumes_per_chunk(
    pmem_env, db_url, tmp_path, monkeypatch
):
    monkeypatch.setenv("PMEM_BATCH_MAX_CHARS", "2000")
    export = tmp_path / "long.json"
    long_export(export)
    calls = {"n": 0}
    fallback = ScriptedDrafter([])

    def flaky(conversations, context):
        calls["n"] += 1
        if calls["n"] == 3:
            raise TransientDraftError("provider hiccup")
        return fallback.draft(conversations, context)

    drafter = ScriptedDrafter([])
    drafter.draft = flaky  # type: ignore[method-assign]
    p = pl.Pipeline.open(Settings())
    p.drafter = drafter
    try:
        first = pl.run_backfill(p, "chatgpt", str(export))
    finally:
        p.close()
    assert first["batches_failed"] == 1 and first["commits"] == 0
    chunks_done = calls["n"] - 1  # two chunks drafted before the failure

    retry = ScriptedDrafter([])
    p = pl.Pipeline.open(Settings())
    p.drafter = retry
    try:
        second = pl.run_backfill(p, "chatgpt", str(export))
    finally:
        p.close()
    total_chunks = chunks_done + len(retry.history)
    assert second["status"] == "complete" and second["commits"] == 1
    assert (
        second["drafter_calls"] == len(retry.history) == total_chunks - 2
    )  # finished chunks not redrafted
    assert total_chunks >= 4
    with psycopg.connect(db_url) as conn:
        ((summary, kind),) = conn.execute("SELECT canonical_summary, kind FROM memories").fetchall()
        n_evidence = conn.execute("SELECT count(*) FROM evidence").fetchone()[0]
    assert kind == "decision" and "この案に決めた" in summary and n_evidence >= 2


SPLIT_HEAD, SPLIT_TAIL = (
    "ghp_Ab12Cd34Ef56",
    "Gh78Ij90Kl12Mn34Op56Qr78St",
)  # one GitHub token, pasted in two


def test_a_secret_split_at_a_chunk_boundary_reaches_no_chunk(
    pmem_env, db_url, tmp_path, monkeypatch
):
    """The guard reads the whole conversation before it is cut into chunks: the head of a token
    that closes one chunk and its tail that opens the next are both redacted."""
    cap = 2000
    monkeypatch.setenv("PMEM_BATCH_MAX_CHARS", str(cap))
    export = tmp_path / "long.json"
    long_export(export)
    doc = json.loads(export.read_text())
    mapping = doc[0]["mapping"]
    texts = [mapping[f"m{i}"]["message"]["content"]["parts"][0] for i in range(24)]
    # find the first chunk boundary, then move the head to the end of the chunk's last message
    # and the tail into the next one, keeping every length as it was
    bounds, size = [], 0
    for i, t in enumerate(texts):
        if i and size + len(t) > cap:
            bounds.append(i)
            size = 0
        size += len(t)
    last = bounds[0] - 1
    texts[last] = texts[last][: -len(SPLIT_HEAD) - 8] + "トークンは " + SPLIT_HEAD
    texts[last + 1] = SPLIT_TAIL + "\n" + texts[last + 1][len(SPLIT_TAIL) + 1 :]
    for i, t in enumerate(texts):
        mapping[f"m{i}"]["message"]["content"]["parts"] = [t]
    export.write_text(json.dumps(doc))

    seen: list[str] = []
    fallback = ScriptedDrafter([])

    def recording(conversations, context):
        seen.extend(m.text for c in conversations for m in c.messages)
        seen.extend(c.title or "" for c in conversations)
        return fallback.draft(conversations, context)

    drafter = ScriptedDrafter([])
    drafter.draft = recording  # type: ignore[method-assign]
    p = pl.Pipeline.open(Settings())
    p.drafter = drafter
    try:
        summary = pl.run_backfill(p, "chatgpt", str(export))
    finally:
        p.close()
    assert summary["drafter_calls"] >= 2 and seen
    joined = "\n".join(seen)
    token = SPLIT_HEAD + SPLIT_TAIL
    pieces = {token[i : i + 8] for i in range(len(token) - 7)}
    assert not [piece for piece in pieces if piece in joined]
