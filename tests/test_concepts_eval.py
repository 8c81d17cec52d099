"""Concept identity on ../shared/eval/: every conversation of the corpus becomes one experience
(its title, its first message as the summary, each of the person's messages as evidence), the
offline stage reads them all, and then: no two concepts share a name after NFKC case folding,
concepts are reused across conversations (one 丹沢 for every trip), and "Tanzawa" written in
English is the same concept as 丹沢 (by its reading, no rule keyed to the word). The Japanese ↔
English match by name vectors is checked on the Resolver with a table embedder."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from core.concepts import Concept, FoundConcept, norm
from core.models import CommitRequest, EvidenceIn
from core.secrets import contains_secret
from tests.conftest import SHARED

EVAL = SHARED / "eval" / "conversations.json"


def _experiences(store: Any) -> dict[str, str]:
    """conversation id → memory id."""
    data = json.loads(EVAL.read_text(encoding="utf-8"))
    out = {}
    for conv in data["conversations"]:
        # the planted fake credentials stay out (the store refuses them as evidence)
        mine = [
            m for m in conv["messages"] if m["role"] == "user" and not contains_secret(m["text"])
        ]
        if not mine:
            continue
        r = store.commit(
            CommitRequest(
                kind=conv["kind"]
                if conv["kind"] in ("decision", "episode", "learning")
                else "episode",
                title=conv["title"],
                canonical_summary=mine[0]["text"][:400],
                index_summary=conv["title"],
                evidence=[
                    EvidenceIn(source_key=f"eval:{conv['id']}:{m['index']}", text=m["text"])
                    for m in mine
                ],
                idempotency_key=conv["id"],
            )
        )
        out[conv["id"]] = r.memory_id
    return out


@pytest.mark.needs_shared
def test_concepts_are_one_per_name_and_reused_across_conversations(
    db, store, tmp_path: Path
) -> None:
    from flows.concepts import Resolver, extract_concepts
    from providers.concepts import OfflineConceptExtractor
    from store.concepts import ConceptStore

    ids = _experiences(store)
    counts = extract_concepts(db, tmp_path, extractor=OfflineConceptExtractor())
    assert counts["experiences_read"] == len(ids) > 50
    cs = ConceptStore(db)
    concepts = cs.concepts()
    folded = [unicodedata.normalize("NFKC", c.name).casefold() for c in concepts]
    assert len(set(folded)) == len(folded) > 300  # no two concepts share a name

    tanzawa = cs.find("丹沢")
    assert tanzawa is not None
    trips = {mid for mid in cs.experiences_of(tanzawa.id)}
    assert {ids["c1-015"], ids["c1-016"], ids["c1-017"]} <= trips  # one concept, reused
    assert cs.find("Tanzawa") == tanzawa and cs.find("ＴＡＮＺＡＷＡ") == tanzawa

    # written in English later, it is the same concept (no new one named Tanzawa)
    r = store.commit(
        CommitRequest(
            kind="episode",
            title="Hiking again",
            canonical_summary="Went back to Tanzawa with my colleagues.",
            index_summary="Tanzawa again",
            evidence=[EvidenceIn(source_key="eval:en:1", text="Went back to Tanzawa.")],
            idempotency_key="en-1",
        )
    )
    extract_concepts(db, tmp_path, extractor=OfflineConceptExtractor())
    assert r.memory_id in cs.experiences_of(tanzawa.id)
    one = cs.get(tanzawa.id)
    assert {norm(one.name), *map(norm, one.aliases)} >= {"丹沢", "tanzawa"}
    assert len(cs.concepts()) == len(concepts)
    assert Resolver(cs).resolve(FoundConcept("tanzawa")) == cs.get(tanzawa.id)


class TableEmbedder:
    """Name vectors from a small fixed table (a stand-in for the local model in a unit test of
    the matching logic: the model itself is measured in bench/concepts_bench.py)."""

    model = "table:test"
    local = True
    dim = 3
    TABLE = {
        "登山": (1.0, 0.1, 0.0),
        "hiking": (0.9, 0.2, 0.0),
        "下山": (0.95, 0.15, 0.0),
        "piano": (0.0, 0.0, 1.0),
        "ピアノ": (0.05, 0.0, 1.0),
        "mountain": (0.3, 1.0, 0.0),
    }

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [list(self.TABLE.get(t, (0.0, 0.0, 0.0))) for t in texts]


def test_japanese_and_english_names_meet_by_vector_only_across_languages(db) -> None:
    from flows.concepts import Resolver
    from store.concepts import ConceptStore

    emb = TableEmbedder()
    r = Resolver(ConceptStore(db), emb)
    tozan, piano = Concept("concept:t", "登山", (), "ja"), Concept("concept:p", "ピアノ", (), "ja")
    r.add(tozan, [norm("登山")])
    # 下山 is close to 登山, but of one language: never compared (two concepts; no model loaded)
    assert r.resolve(FoundConcept("下山")) is None and emb.calls == []
    r.add(piano, [norm("ピアノ")])
    assert r.resolve(FoundConcept("hiking")) == tozan  # 登山 ↔ hiking
    assert sorted(emb.calls[0]) == [
        "ピアノ",
        "登山",
    ]  # the Japanese names embedded once, when needed
    assert r.resolve(FoundConcept("piano")) == piano and r.resolve(FoundConcept("mountain")) is None
    assert sum(len(c) for c in emb.calls) == 5  # each name once
    # a Latin name inside a Japanese sentence is a name as written, never matched by meaning
    from core.concepts import ExperienceInput
    from stages.concepts import extract

    found = {
        c.surface: c.language
        for c in extract(
            ExperienceInput("m", 1, "", "ThinkPadで作業した。I like Hiking with Tanzawa.")
        ).concepts
    }
    assert found["ThinkPad"] == "ja" and found["Tanzawa"] == "en"
    with pytest.raises(KeyError):
        _ = r.by_key["mountain"]
