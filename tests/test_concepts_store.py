"""The concept store (migration 0021) against the real PostgreSQL: one strengthening per (link,
experience), 0.5 → 0.55, a withdrawn experience recomputes from the remaining supporters and the
log explains every weight, erasure leaves no row naming the memory, the guard drops a flagged
name."""

from __future__ import annotations

import psycopg
import pytest

from core.concepts import Concept, FoundConcept, ResolvedExperience, concept_id, link_id, weight_for
from core.models import CommitRequest, EvidenceIn

SECRET = "sk-proj-" + "Zq8Lm2Nv5Xc7Bt1Rw4Ys" + "6Ud9Ae3Gh5Jk7Mp0Qs2T" + "_vW-4x"


def memory(store, key: str, text: str) -> str:
    r = store.commit(
        CommitRequest(
            kind="episode",
            title=text[:20],
            canonical_summary=text,
            index_summary=text,
            evidence=[EvidenceIn(source_key=f"chatgpt:c-{key}:n1", text=text)],
            idempotency_key=key,
        )
    )
    return r.memory_id


def resolved(
    mid: str,
    names: list[str],
    links: list[tuple[str, str, str]],
    *,
    existing: set[str] = frozenset(),
    revision: int = 1,
    topic: bool = True,
) -> ResolvedExperience:
    exp = ResolvedExperience(
        memory_id=mid,
        revision=revision,
        inputs_hash=f"h-{mid}-{revision}",
        extractor="test",
        prompt_version="t1",
    )
    for n in names:
        cid = concept_id(n)
        exp.concepts[cid] = FoundConcept(surface=n, source_key=f"k:{mid}", topic=topic)
        if n not in existing:
            exp.new_concepts[cid] = Concept(id=cid, name=n, language="ja")
    for a, b, rel in links:
        s, t = concept_id(a), concept_id(b)
        exp.links[link_id(s, t, rel, True)] = (s, t, rel, True, (f"k:{mid}",))
    return exp


def test_learning_idempotent_withdraw_and_log(db, store) -> None:
    from store.concepts import ConceptStore

    cs = ConceptStore(db)
    e1, e2 = memory(store, "e1", "友人と登山した"), memory(store, "e2", "また友人と登山した")
    cs.apply(resolved(e1, ["登山", "友人"], [("友人", "登山", "with")]))
    lid = link_id(concept_id("友人"), concept_id("登山"), "with", True)
    [link] = cs.links_of(concept_id("登山"))
    assert (link.id, link.weight, link.experiences, link.other.name) == (lid, 0.5, (e1,), "友人")
    before = cs.counts()
    cs.apply(resolved(e1, ["登山", "友人"], [("友人", "登山", "with")], existing={"登山", "友人"}))
    assert (
        cs.counts() == before and cs.links_of(concept_id("友人"))[0].weight == 0.5
    )  # once per experience

    cs.apply(resolved(e2, ["登山", "友人"], [("登山", "友人", "with")], existing={"登山", "友人"}))
    [link] = cs.links_of(concept_id("友人"))
    assert link.weight == pytest.approx(0.55) and link.experiences == tuple(sorted((e1, e2)))
    assert [
        (u.action, u.weight_before, round(u.weight_after, 4)) for u in cs.updates(link_id=lid)
    ] == [("strengthen", 0.0, 0.5), ("strengthen", 0.5, 0.55)]
    assert cs.replayed_weights() == {lid: pytest.approx(0.55)}
    assert cs.find("登山").id == concept_id("登山") and cs.experiences_of(
        concept_id("登山")
    ) == sorted((e1, e2))
    assert cs.evidence_keys([e1])[e1] == [f"k:{e1}", "chatgpt:c-e1:n1"]

    # a correction of e2 no longer states the relation: back to one supporter (0.5), logged
    cs.apply(resolved(e2, ["登山"], [], existing={"登山"}, revision=2))
    assert cs.links_of(concept_id("登山"))[0].weight == 0.5
    assert cs.updates(memory_id=e2)[-1].action == "withdraw"
    assert cs.replayed_weights() == {lid: 0.5}
    # e1 withdrawn (deleted): no supporter left, the link goes; 友人 is shown by nothing any more
    cs.withdraw(e1)
    assert cs.links() == [] and cs.find("友人") is None and cs.find("登山") is not None
    assert cs.replayed_weights() == {}


def test_alias_keys_guard_and_erasure(db, store) -> None:
    from store.concepts import ConceptStore
    from store.forget import Forgetter

    cs = ConceptStore(db)
    e1, e2 = memory(store, "e1", "丹沢に登った"), memory(store, "e2", "Tanzawa again")
    exp = resolved(e1, ["丹沢", "登山"], [("登山", "丹沢", "part_of")])
    exp.concepts[concept_id("丹沢")] = FoundConcept(
        surface="丹沢", kind="proper", reading="tanzawa", topic=True
    )
    cs.apply(exp)
    assert cs.find("Ｔａｎｚａｗａ").name == "丹沢"  # the reading is a key, NFKC + case folded
    exp2 = resolved(e2, ["丹沢", "登山"], [("登山", "丹沢", "part_of")], existing={"丹沢", "登山"})
    exp2.concepts[concept_id("丹沢")] = FoundConcept(surface="Tanzawa", source_key="k2")
    bad = concept_id(SECRET)
    exp2.concepts[bad] = FoundConcept(surface=SECRET)
    exp2.new_concepts[bad] = Concept(id=bad, name=SECRET)
    exp2.links[link_id(bad, concept_id("登山"), "with", True)] = (
        bad,
        concept_id("登山"),
        "with",
        True,
        (),
    )
    cs.apply(exp2)
    assert cs.get(concept_id("丹沢")).aliases == ("Tanzawa",)
    assert cs.get(bad) is None and len(cs.links()) == 1  # the flagged name never reached a row
    assert cs.links()[0].weight == pytest.approx(0.55)

    Forgetter(db, b"k" * 32).forget_memory(e2)
    assert cs.links()[0].weight == 0.5 and cs.get(concept_id("丹沢")).aliases == ()
    with psycopg.connect(db.url) as conn:
        for table, col in (
            ("concept_link_updates", "memory_id"),
            ("experience_links", "memory_id"),
            ("experiences", "memory_id"),
        ):
            assert (
                conn.execute(f"SELECT count(*) FROM {table} WHERE {col} = %s", (e2,)).fetchone()[0]
                == 0
            )
        assert (
            conn.execute(
                "SELECT count(*) FROM concept_links WHERE %s = ANY(experiences)", (e2,)
            ).fetchone()[0]
            == 0
        )
    assert weight_for(2) == pytest.approx(0.55) and weight_for(0) == 0.0


def test_a_name_becomes_a_concept_when_it_recurs_or_relates(db, store) -> None:
    """Issue 27: a name one experience shows (not as its topic) is stored but is no concept; a
    second experience makes it one, and a stated relation to it makes its partner one too;
    withdrawing the second experience takes both back (the standing rests on what is stored)."""
    from store.concepts import ConceptStore

    cs = ConceptStore(db)
    e1, e2 = memory(store, "r1", "一つ目の山の記録"), memory(store, "r2", "二つ目の山の記録")
    cs.apply(resolved(e1, ["登山", "気分転換"], [("登山", "気分転換", "led_to")], topic=False))
    assert cs.find("登山") is None and cs.links() == []  # one experience, no topic
    assert cs.counts()["names"] == 2 and cs.counts()["relations"] == 1
    cs.apply(resolved(e2, ["登山"], [], existing={"登山"}, topic=False))
    # 登山 recurs; 気分転換 is joined to it by E1's stated relation
    assert {c.name for c in cs.concepts()} == {"登山", "気分転換"}
    assert [(link.relation, link.experiences) for link in cs.links()] == [("led_to", (e1,))]
    cs.withdraw(e2)
    assert cs.concepts() == [] and cs.links() == []
    assert cs.counts()["names"] == 2  # still stored: the next experience finds them
