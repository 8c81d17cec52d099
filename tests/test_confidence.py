"""Whether the answer is there (search.confidence, ADR 0039): the features read off the hits,
the fitted weights' direction (a question about one speaker whose words only the other speaker
said is less likely answered), and recall's answer through the real store: ``answerable`` and
``confidence`` beside the hits, every hit kept in its place (a flag, not a filter)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.models import Channel, Conversation, Message, Provenance
from mcp_server.render import render_recall
from mcp_server.service import MemoryService
from search import confidence as cf
from search.understand import understand
from store.ledger import Ledger


def _hit(text: str, speaker: str, score: float = 0.05) -> cf.HitView:
    return cf.HitView(text, score, None, 2, frozenset({speaker}))


def _content(question: str, speakers: set[str]) -> tuple[list, set[str]]:
    q = understand(question, datetime.fromisoformat("2023-06-01T00:00:00+00:00"), "UTC")
    return cf.content_terms(q.terms, speakers)


def test_the_speaker_named_saying_it_is_likelier_than_the_other() -> None:
    content, asked = _content("What did Maria realise after the charity race?", {"maria", "john"})
    assert asked == {"maria"} and [t.text for t in content] == ["realise", "charity", "race"]
    said = "The charity race made me realise how much I love running"
    filler = [_hit(f"Nice weather today, number {n}", "john", 0.04) for n in range(4)]
    by_named = cf.assess(content, asked, [_hit(said, "maria"), *filler], 4, 20)
    by_other = cf.assess(content, asked, [_hit(said, "john"), *filler], 4, 20)
    assert by_named.confidence > by_other.confidence
    # per hit: one each, 0-1, the covering hit above the filler
    assert len(by_named.per_hit) == 5 and all(0 <= c <= 1 for c in by_named.per_hit)
    assert by_named.per_hit[0] > max(by_named.per_hit[1:])
    nothing = cf.assess(content, asked, [], 4, 20)
    assert nothing == cf.Assessment(False, 0.0, ())


def test_answer_features_read_coverage_and_speakers() -> None:
    content, asked = _content("What did Maria realise after the charity race?", {"maria", "john"})
    hits = [_hit("charity race", "john"), _hit("I realise it now", "maria")]
    feats, cov = cf.answer_features(content, asked, hits, 4, 20)
    f = dict(zip(cf.ANSWER_FEATURES, feats, strict=True))
    assert cov == pytest.approx([2 / 3, 1 / 3])
    assert f["named_coverage"] == pytest.approx(1 / 3) and f["other_coverage"] == pytest.approx(
        2 / 3
    )
    assert f["other_leads"] == 1.0 and f["names_speaker"] == 1.0 and f["top_coverage"] == cov[0]
    assert len(cf.ANSWER_WEIGHTS) == len(cf.ANSWER_FEATURES) + 1
    assert len(cf.HIT_WEIGHTS) == len(cf.HIT_FEATURES) + 1


def _chat(lines: list[tuple[str, str]], day: str) -> Conversation:
    when = datetime.fromisoformat(f"{day}T10:00:00+00:00")
    key = f"telegram:9:{day}"
    return Conversation(
        key=key,
        source="telegram",
        external_id=f"9:{day}",
        title=f"Maria {day}",
        created_at=when,
        messages=[
            Message(
                key=f"{key}:{n}",
                node_id=str(n),
                role=who,
                channel=Channel.PERSON if who == "user" else Channel.OTHER,
                content_type="text",
                text=text,
                created_at=when + timedelta(seconds=6 * n),
                position=n,
            )
            for n, (who, text) in enumerate(lines)
        ],
        provenance=Provenance(file="synthetic", position=0),
    )


def test_recall_says_how_likely_the_answer_is_there_and_keeps_every_hit(
    db, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMEM_ME", "John")
    ledger = Ledger(db)
    imp = ledger.start_import("telegram", "synthetic")
    days = ["2023-01-05", "2023-02-09", "2023-03-14"]
    talk = [
        [
            ("Maria", "I ran the charity race for mental health last weekend!"),
            ("user", "Wow, Maria, that is amazing. How did it feel?"),
            ("Maria", "The charity race made me realise how much running means to me."),
        ],
        [("user", "I painted a sunset over the lake yesterday."), ("Maria", "Lovely, John!")],
        [("user", "My dog learned a new trick."), ("Maria", "Ha, that dog is so smart.")],
    ]
    for day, lines in zip(days, talk, strict=True):
        ledger.upsert(_chat(lines, day), imp)
    svc = MemoryService(db, embedder=None, tz="UTC")
    now = svc.now("2023-04-01T12:00:00+00:00")
    right = svc.recall("What did Maria realise after the charity race?", now=now)
    wrong = svc.recall("What did John realise after the charity race?", now=now)
    assert right.hits and right.hits[0].message_key == "telegram:9:2023-01-05:2"
    assert right.answerable and right.confidence > wrong.confidence
    # a flag, not a filter: the store's own ranking, every hit in its place
    q = understand("What did John realise after the charity race?", now, "UTC")
    store_keys = [h.message_key for h in svc.index.recall(q, None, None, limit=20).hits]
    assert [h.message_key for h in wrong.hits] == store_keys
    js = right.as_json()
    assert isinstance(js["answerable"], bool) and 0 < js["confidence"] < 1
    assert all(0 <= h["confidence"] <= 1 for h in js["hits"])
    assert f"confidence that the answer is among them: {right.confidence:.2f}" in render_recall(
        right
    )
