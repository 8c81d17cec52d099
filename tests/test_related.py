"""`pmem related` and the MCP tool `related_memories` (issue 16, point 4) against the real
PostgreSQL: the seed's own example (E101 hiking with a friend, enjoyable; E102 the mountains
when tired from work, a good change of pace; E103 dinner with a friend, full) goes through the
offline concept extraction, then 「最近、気分転換できていない」 recalls E102 first along
気分転換 → 登山, each hit saying why it came up; and the path rules on a hand-built graph: the
weight threshold, two hops, a name written in the text, an English alias, a deleted memory."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from core.models import CommitRequest, EvidenceIn
from tests.security.trust_support import call_tool

UTTERANCE = "最近、気分転換できていない"
SEED = {  # the seed article's three experiences, as a person would write them in a chat
    "E101": "友人と登山した。登山はとても楽しかった。",
    "E102": "仕事で疲れたので山へ登山に行った。登山で良い気分転換になった。",
    "E103": "友人と食事した。食事でお腹いっぱいになり満腹感を得た。",
}


def commit(store: Any, key: str, text: str, when: str) -> str:
    return store.commit(
        CommitRequest(
            kind="episode",
            title=text.split("。")[0],
            canonical_summary=text,
            index_summary=text.split("。")[0],
            evidence=[EvidenceIn(source_key=f"chatgpt:seed-{key}:m1", text=text)],
            idempotency_key=f"seed-{key}",
            occurred_at=when,
        )
    ).memory_id


def run(*args: str) -> Any:
    from cli.main import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_seed_example_related(db, store, pmem_env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from flows.concepts import extract_concepts

    ids = {
        k: commit(store, k, t, f"2024-0{i + 4}-10T09:00:00+09:00")
        for i, (k, t) in enumerate(SEED.items())
    }
    extract_concepts(db, tmp_path / "runs")
    names = {v: k for k, v in ids.items()}

    out = json.loads(
        run(
            "related", UTTERANCE, "--json", "--now", "2026-12-01T12:00:00+09:00"
        ).stdout.splitlines()[-1]
    )
    hits = out["hits"]
    assert out["attention"] == ["気分転換"]
    assert names[hits[0]["memory_id"]] == "E102" and hits[0]["path"] == ["気分転換", "登山"]
    assert hits[0]["why"] == "states" and set(hits[0]) >= {
        "memory_id",
        "path",
        "concepts",
        "evidence",
    }
    assert hits[0]["concepts"][:2] == ["気分転換", "登山"]
    assert hits[0]["evidence"][0]["message_key"] == "chatgpt:seed-E102:m1"
    assert "気分転換" in hits[0]["evidence"][0]["quote"]
    # E101 is reached through 登山 (it does not state the change of pace); E103 only two hops
    # away through 友人, if at all, and last
    order = [names[h["memory_id"]] for h in hits]
    assert order[:2] == ["E102", "E101"], order
    assert hits[1]["why"] == "through" and hits[1]["path"][:2] == ["気分転換", "登山"]
    assert "E103" not in order or order[-1] == "E103"

    text = run("related", UTTERANCE)
    first = text.stdout.splitlines()[:2]
    assert "仕事で疲れたので山へ登山に行った" in first[0]
    assert "気分転換 → 登山: it is where you said 登山 —led_to→ 気分転換 (weight 0.50)" in first[1]
    assert "attention: 気分転換" in text.stderr

    # the same through MCP (the tool a client calls), and the hint for load_context
    from mcp_server.server import build_server
    from mcp_server.service import MemoryService

    svc = MemoryService(db)
    body = call_tool(build_server(lambda: svc), "related_memories", {"text": UTTERANCE})
    assert body.index(ids["E102"]) < body.index(ids["E101"])
    assert "path: 気分転換 → 登山; this experience states 登山 —led_to→ 気分転換" in body
    assert "evidence [chatgpt:seed-E102:m1]" in body
    hint = svc.related_context(UTTERANCE)
    assert hint.splitlines()[1].startswith(f"{ids['E102']} | 気分転換 → 登山 |")
    # load_context with what the owner just said: the index first, the related experiences last
    ctx = call_tool(build_server(lambda: svc), "load_context", {"utterance": UTTERANCE})
    tail = ctx[ctx.index("# related to what was just said") :].splitlines()
    assert tail[1].startswith(f"{ids['E102']} | 気分転換 → 登山 |") and ctx.index(
        "# memory index"
    ) < ctx.index(tail[0])
    assert "# related to what was just said" not in svc.load_context()

    # the graph page of the same store, through the CLI: the seed's concepts and links, 0600
    page = tmp_path / "graph.html"
    made = json.loads(run("graph", "--out", str(page), "--json").stdout.splitlines()[-1])
    assert made["concepts"] >= 6 and made["links"] >= 5 and made["experiences"] == 3
    assert oct(page.stat().st_mode & 0o777) == "0o600" and "気分転換" in page.read_text()
    from cli.main import app

    bad = CliRunner().invoke(
        app, ["graph", "--out", str(tmp_path / "missing" / "g.html"), "--json"]
    )
    assert bad.exit_code == 1 and json.loads(bad.stdout.splitlines()[-1])["message"].startswith(
        "cannot write "
    )

    # a memory deleted later never comes back, whatever the concept tables still say
    with db.connection() as conn:
        conn.execute("UPDATE memories SET status = 'deleted' WHERE id = %s", (ids["E102"],))
    again = json.loads(run("related", UTTERANCE, "--json").stdout.splitlines()[-1])
    assert ids["E102"] not in [h["memory_id"] for h in again["hits"]]


def test_paths_threshold_hops_and_attention(db, store) -> None:  # type: ignore[no-untyped-def]
    """A hand-built graph: 気分転換 —0.55— 登山 —0.5— 丹沢 (E1 states both), 登山 —0.25
    (inferred)— 写真 (E2; E4 shows 写真 alone): the weak link is not followed unless asked; two hops reach 丹沢;
    a name written in the text (丹沢) and an English alias (hiking) are attention concepts."""
    from core.concepts import Concept, FoundConcept, ResolvedExperience, concept_id, link_id
    from search.related import ConceptRecall, QueryVectors
    from store.concepts import ConceptStore

    cs = ConceptStore(db)
    e1 = commit(store, "x1", "丹沢で登山をして気分転換になった。", "2024-05-01T09:00:00+09:00")
    e2 = commit(store, "x2", "登山の写真を撮った。", "2024-06-01T09:00:00+09:00")
    e3 = commit(store, "x3", "気分転換に散歩した。", "2024-07-01T09:00:00+09:00")
    e4 = commit(store, "x4", "写真を整理した。", "2024-08-01T09:00:00+09:00")

    def apply(
        mid: str, names: list[str], links: list[tuple[str, str, str, bool]], rounds: int = 1
    ) -> None:
        exp = ResolvedExperience(
            memory_id=mid, revision=1, inputs_hash=f"h-{mid}", extractor="test", prompt_version="t1"
        )
        for n in names:
            exp.concepts[concept_id(n)] = FoundConcept(
                surface=n, source_key=f"chatgpt:seed-{mid}:m1", topic=True
            )
            exp.new_concepts[concept_id(n)] = Concept(id=concept_id(n), name=n, language="ja")
        for a, b, rel, stated in links:
            s, t = concept_id(a), concept_id(b)
            exp.links[link_id(s, t, rel, stated)] = (s, t, rel, stated, ())
        cs.apply(exp)

    apply(
        e1,
        ["登山", "気分転換", "丹沢"],
        [("登山", "気分転換", "led_to", True), ("登山", "丹沢", "part_of", True)],
    )
    apply(e2, ["登山", "写真"], [("登山", "写真", "related", False)])
    apply(e3, ["気分転換", "散歩"], [])
    apply(e4, ["写真"], [])
    with db.connection() as conn:  # an English alias, as the cross-language match records it
        conn.execute(
            "UPDATE concepts SET aliases = aliases || '{hiking}', keys = keys || '{hiking}' WHERE name = '登山'"
        )
    cr = ConceptRecall(db)

    r = cr.related(["気分転換"], "気分転換したい")
    got = {h.memory_id: h for h in r.hits}
    assert (
        r.hits[0].memory_id == e1
        and r.hits[0].path == ["気分転換", "登山"]
        and r.hits[0].why == "states"
    )
    assert got[e3].why == "mentions" and got[e3].path == ["気分転換"]
    assert got[e2].why == "through" and got[e2].path == ["気分転換", "登山"]  # it shows 登山
    assert e4 not in got  # 登山 — 写真 is an inference of weight 0.25: below the threshold
    low = cr.related(["気分転換"], "気分転換したい", min_weight=0.2)
    assert [h.path for h in low.hits if h.memory_id == e4] == [["気分転換", "登山", "写真"]]
    assert cr.related(["気分転換"], "気分転換したい", hops=0).hits[0].memory_id in (e1, e3)

    # two hops: from 丹沢 (written in the text, not a content word here) to 気分転換's experience
    r = cr.related([], "また丹沢に行きたい")
    assert (
        r.attention == ["丹沢"]
        and r.hits[0].memory_id == e1
        and r.hits[0].why in ("states", "mentions")
    )
    # an English alias names the concept; a word inside another name (山 in 登山) does not
    r = cr.related(["hiking"], "hiking again soon")
    assert r.attention == ["登山"] and {h.memory_id for h in r.hits} >= {e1}
    assert cr.attention([], "山に行きたい") == []

    # across languages by the local embedder's vectors of the concept names: a word no concept
    # is named by finds the nearest concept of the other language, if near enough
    class Fake:
        model, dim, local = "fake-local", 3, True
        space = {"登山": [1.0, 0.1, 0.0], "trekking": [0.95, 0.2, 0.0], "taxes": [0.0, 0.0, 1.0]}

        def embed(self, texts: list[str]) -> list[list[float]]:
            return [self.space.get(t, [0.0, 1.0, 0.0]) for t in texts]

    cs.set_embeddings("fake-local", {concept_id("登山"): Fake.space["登山"]})
    vec = QueryVectors(Fake(), ("trekking", "taxes"))
    r = cr.related(["trekking", "taxes"], "trekking and taxes", vectors=vec)
    assert (
        r.attention == ["登山"]
        and r.hits[0].memory_id == e1
        and r.across_languages == {"登山": "trekking"}
    )
    assert (
        len(cs.embeddings("fake-local")) == 5
    )  # the Japanese names lacking a vector got theirs, once
    assert cr.related(["taxes"], "taxes", vectors=QueryVectors(Fake(), ("taxes",))).attention == []
