"""Seed 003's own example as a fixture (E101 登山 with a friend, enjoyable; E102 the mountains when
tired from work, a good change of pace; E103 dinner with a friend, full), through the offline
rules and through a model behind the adapters' ``complete_json`` (a scripted fake): the five
links with the right experience ids, the same log read twice changes no weight, a second
independent experience moves 0.5 to 0.55, a co-occurrence makes no link, a correction and a
deleted memory lower or remove a link, `pmem concepts rebuild` equals the incremental result,
`pmem concepts show --json` has the issue's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.models import CommitRequest, EvidenceIn

SEED = {
    "E101": (
        "友人と登山",
        "友人と登山して、とても楽しかった。",
        "友人と登山した。とても楽しかった!",
    ),
    "E102": (
        "仕事の疲れと山",
        "仕事で疲れたので山へ行き、登山で良い気分転換になった。",
        "仕事で疲れたので山へ行った。",
    ),
    "E103": (
        "友人と食事",
        "友人と食事した。食事で満腹感を得た。",
        "友人と食事した。お腹いっぱいになった。",
    ),
}
LINKS = {  # (source, target, relation) -> experiences
    ("友人", "登山", "with"): ["E101"],
    ("登山", "楽しい", "felt"): ["E101"],
    ("登山", "気分転換", "led_to"): ["E102"],
    ("友人", "食事", "with"): ["E103"],
    ("食事", "満腹感", "led_to"): ["E103"],
}
# the offline rules also read E102's title: 仕事の疲れ, the genitive states it
OFFLINE_LINKS = {**LINKS, ("疲れ", "仕事", "part_of"): ["E102"]}


def commit(store: Any, label: str, title: str, summary: str, quote: str) -> str:
    r = store.commit(
        CommitRequest(
            kind="episode",
            title=title,
            canonical_summary=summary,
            index_summary=summary,
            evidence=[EvidenceIn(source_key=f"diary:{label}:m1", text=quote)],
            idempotency_key=label,
        )
    )
    return r.memory_id


def seed(store: Any) -> dict[str, str]:
    return {label: commit(store, label, *texts) for label, texts in SEED.items()}


def link_table(cs: Any, ids: dict[str, str]) -> dict[tuple[str, str, str], list[str]]:
    label = {v: k for k, v in ids.items()}
    names = {c.id: c.name for c in cs.concepts()}
    out = {}
    for link in cs.links():
        a, b = names[link.source_id], names[link.target_id]
        if link.relation == "with":
            a, b = sorted((a, b))
        out[(a, b, link.relation)] = sorted(label[m] for m in link.experiences)
    return out


def offline(db: Any, runs: Path, **kw: Any) -> dict[str, Any]:
    from flows.concepts import extract_concepts
    from providers.concepts import OfflineConceptExtractor

    return extract_concepts(db, runs, extractor=OfflineConceptExtractor(), **kw)


def test_seed_example_offline(db, store, tmp_path: Path) -> None:
    from store.concepts import ConceptStore

    ids = seed(store)
    cs = ConceptStore(db)
    first = offline(db, tmp_path)
    assert first["experiences_read"] == 3
    assert link_table(cs, ids) == {
        tuple(sorted(k[:2])) + (k[2],) if k[2] == "with" else k: v for k, v in OFFLINE_LINKS.items()
    }
    assert all(link.weight == 0.5 and link.stated for link in cs.links())
    # 仕事 and 登山 are concepts of E102, yet nothing states a relation between them: no link;
    # 山 is one character, no concept (a fragment or a word of many senses)
    e102 = {c.name for c in cs.concepts_of(ids["E102"])}
    assert {"仕事", "登山", "気分転換"} <= e102 and "山" not in e102
    # the experiences lead back to the raw record: the evidence message keys
    assert cs.evidence_keys([ids["E102"]])[ids["E102"]] == ["diary:E102:m1"]

    # the same log processed twice: nothing read again, no weight moves, nothing logged
    log = cs.updates()
    again = offline(db, tmp_path)
    assert again["experiences_read"] == 0 and cs.updates() == log
    # even when every memory is read again (the result files reused), no weight moves
    from store.concepts import ConceptStore as _CS

    with db.connection() as conn:
        conn.execute("UPDATE experiences SET revision = 0")
    third = offline(db, tmp_path)
    assert (
        third["experiences_read"] == 3
        and third["results_reused"] == 3
        and third["links_strengthened"] == 0
    )
    assert cs.updates() == log and [(x.id, x.weight) for x in _CS(db).links()] == [
        (x.id, x.weight) for x in cs.links()
    ]

    # a second, independent experience of 登山 → 気分転換: 0.5 → 0.55
    ids["E104"] = commit(
        store,
        "E104",
        "週末の登山",
        "週末に登山で気分転換になった。",
        "週末に登山で気分転換になった。",
    )
    # and a co-occurrence without a stated relation: no link between 登山 and 読書
    ids["E105"] = commit(store, "E105", "週末", "週末は登山と読書。", "週末は登山と読書。")
    offline(db, tmp_path)
    table = link_table(cs, ids)
    assert table[("登山", "気分転換", "led_to")] == ["E102", "E104"]
    [w] = [x.weight for x in cs.links_of(cs.find("気分転換").id)]
    assert w == pytest.approx(0.55)
    assert not any("読書" in k[:2] for k in table)
    assert cs.replayed_weights() == {x.id: pytest.approx(x.weight) for x in cs.links()}

    # a correction of E104 takes the relation back: 0.55 → 0.5 (E102 remains), logged
    store.commit(
        CommitRequest(
            memory_id=ids["E104"],
            expected_revision=1,
            kind="episode",
            title="週末の登山",
            canonical_summary="週末に登山した。気分転換にはならなかった。",
            index_summary="週末に登山した",
            evidence=[EvidenceIn(source_key="diary:E104:m2", text="気分転換にはならなかった。")],
            reason="correction",
            idempotency_key="E104-fix",
        )
    )
    offline(db, tmp_path)
    link = cs.links_of(cs.find("気分転換").id)[0]
    assert link.weight == 0.5 and link.experiences == (ids["E102"],)
    assert [u.action for u in cs.updates(memory_id=ids["E104"])] == ["strengthen", "withdraw"]
    # E102 deleted: no experience states it any more, the link goes at once (the delete
    # re-evaluates its experience's links in its own transaction, before any stage runs)
    store.delete(ids["E102"], expected_revision=1)
    assert ("登山", "気分転換", "led_to") not in link_table(cs, ids)
    assert not any(ids["E102"] in x.experiences for x in cs.links())
    assert cs.concepts_of(ids["E102"]) == [] and ids["E102"] not in cs.experience_state()
    assert [u.action for u in cs.updates(memory_id=ids["E102"])][-1] == "withdraw"
    assert offline(db, tmp_path)["experiences_withdrawn"] == 0  # nothing left for the stage
    assert ("登山", "気分転換", "led_to") not in link_table(cs, ids)
    assert cs.replayed_weights() == {x.id: pytest.approx(x.weight) for x in cs.links()}


def _cli(*args: str, code: int = 0) -> Any:
    import click.testing
    from typer.main import get_command

    from cli.main import app

    global _COMMAND
    if _COMMAND is None:  # typer builds the click command in ~1 s: once
        _COMMAND = get_command(app)
    r = click.testing.CliRunner().invoke(_COMMAND, list(args))
    assert r.exit_code == code, (r.output, r.exception)
    return r


_COMMAND: Any = None


def test_rebuild_equals_incremental_and_show(
    db, store, pmem_env: dict[str, str], tmp_path: Path
) -> None:
    from cli.concept_cmds import show_body
    from store.concepts import ConceptStore

    ids = seed(store)
    offline(db, tmp_path / "runs")
    ids["E104"] = commit(
        store,
        "E104",
        "週末の登山",
        "週末に登山で気分転換になった。",
        "週末に登山で気分転換になった。",
    )
    offline(db, tmp_path / "runs")
    body = json.loads(_cli("concepts", "show", "登山", "--json").stdout.strip().splitlines()[-1])
    assert set(body) == {"concept", "links", "experiences"} and set(body["concept"]) == {
        "id",
        "name",
        "aliases",
    }
    assert body["concept"]["name"] == "登山" and body["experiences"] == sorted(
        (ids["E101"], ids["E102"], ids["E104"])
    )
    top = body["links"][0]
    assert {"to", "relation", "weight", "stated", "experiences"} <= set(top)
    assert (top["to"], top["relation"], top["weight"], top["stated"], top["experiences"]) == (
        "気分転換",
        "led_to",
        0.55,
        True,
        sorted((ids["E102"], ids["E104"])),
    )
    cs = ConceptStore(db)
    everything = {c.name: show_body(cs, c.name) for c in cs.concepts()}
    assert everything["登山"] == body

    out = json.loads(
        _cli("concepts", "rebuild", "--no-embed", "--json").stdout.strip().splitlines()[-1]
    )
    # the five of the seed and 仕事の疲れ (part_of)
    assert out["experiences"] == 4 and out["concept_links"] == 6 and out["results_reused"] == 0
    assert {c.name: show_body(cs, c.name) for c in cs.concepts()} == everything

    listed = json.loads(_cli("concepts", "list", "--json").stdout.strip().splitlines()[-1])
    assert {c["name"]: (c["experiences"], c["links"]) for c in listed["concepts"]}["登山"] == (3, 3)
    assert listed["counts"]["concept_links"] == 6
    text = _cli("concepts", "show", "登山").stdout
    assert "気分転換" in text and "0.550" in text

    r = _cli("concepts", "show", "ない概念", "--json", code=1)
    assert "ない概念" in r.output


class FakeAdapter:
    """A model behind ``complete_json`` answering like the seed's JSON (concept names, stated
    relations), reusing an offered id when it is shown one."""

    model = "fake:concepts"

    def __init__(self, answers: dict[str, dict[str, Any]]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def complete_json(
        self, static: str, dynamic: str, name: str, schema: dict[str, Any]
    ) -> tuple[dict, tuple[int, int]]:
        assert name == "concepts" and "relations" in schema["properties"]
        label = next(k for k in self.answers if f"diary:{k}:m1" in dynamic)
        self.calls.append(label)
        answer = json.loads(json.dumps(self.answers[label]))
        for c in answer["concepts"]:  # reuse the id of an offered concept of the same name
            for line in dynamic.splitlines():
                if (
                    line.startswith("- concept:")
                    and line.split(" ", 2)[2].split(" (")[0] == c["name"]
                ):
                    c["id"] = line.split(" ")[1]
        return answer, (10, 5)


def test_seed_example_through_a_model(db, store, tmp_path: Path) -> None:
    from flows.concepts import extract_concepts
    from providers.concepts_llm import LlmConceptExtractor
    from store.concepts import ConceptStore

    def answer(concepts: list[str], rels: list[tuple[str, str, str, bool]]) -> dict[str, Any]:
        return {
            "concepts": [{"name": c, "id": "", "kind": "noun", "messageKey": ""} for c in concepts],
            "relations": [
                {"source": a, "target": b, "relation": r, "stated": s, "messageKey": ""}
                for a, b, r, s in rels
            ],
        }

    fake = FakeAdapter(
        {
            "E101": answer(
                ["登山", "友人", "楽しい"],
                [("登山", "友人", "with", True), ("登山", "楽しい", "felt", True)],
            ),
            "E102": answer(
                ["仕事", "疲れ", "登山", "気分転換"],
                [("登山", "気分転換", "led_to", True), ("仕事", "疲れ", "led_to", False)],
            ),
            "E103": answer(
                ["食事", "友人", "満腹感"],
                [("食事", "満腹感", "led_to", True), ("食事", "友人", "with", True)],
            ),
        }
    )
    ids = seed(store)
    ext = LlmConceptExtractor("fake:concepts", adapter=fake)
    extract_concepts(db, tmp_path, extractor=ext)
    cs = ConceptStore(db)
    table = link_table(cs, ids)
    for (a, b, rel), exps in LINKS.items():
        key = (*sorted((a, b)), rel) if rel == "with" else (a, b, rel)
        assert table[key] == exps
    inferred = [x for x in cs.links() if not x.stated]
    assert len(inferred) == 1 and inferred[0].weight == 0.25  # a guess is kept apart, weaker
    assert (
        len(cs.find_many(["登山"])) == 1 and len(cs.concepts()) == 8
    )  # 登山 and 友人 reused, not doubled
    # resumable: a second pass asks the model nothing (nothing new), a rebuild reuses the files
    calls = list(fake.calls)
    extract_concepts(db, tmp_path, extractor=ext)
    extract_concepts(db, tmp_path, extractor=ext, rebuild=True)
    assert fake.calls == calls and link_table(cs, ids) == table


def test_a_vendor_model_in_the_backfill_needs_consent(
    db, store, pmem_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PMEM_CONCEPTS_LLM naming a vendor model without the owner's consent: nothing is read or
    sent, the backfill's counts say why (and the run goes on). With it, the OpenAI adapter behind
    the local fake server: the versioned prompt, the schema by name, a made-up id and message key
    dropped, the seed's links."""
    from core.settings import get_settings
    from flows import consent as cs
    from flows.concepts import backfill_stage
    from store.concepts import ConceptStore
    from tests.fakeservers import FakeServer, Reply, openai_chat

    ids = seed(store)
    answers = [
        {
            "concepts": [
                {
                    "name": "登山",
                    "id": "concept:made-up",
                    "kind": "noun",
                    "messageKey": "diary:E101:m1",
                },
                {"name": "友人", "id": "", "kind": "noun", "messageKey": "chatgpt:nope:nope"},
            ],
            "relations": [
                {
                    "source": "友人",
                    "target": "登山",
                    "relation": "with",
                    "stated": True,
                    "messageKey": "",
                }
            ],
        },
        {
            "concepts": [
                {"name": "登山", "id": "", "kind": "noun", "messageKey": ""},
                {"name": "気分転換", "id": "", "kind": "noun", "messageKey": ""},
            ],
            "relations": [
                {
                    "source": "登山",
                    "target": "気分転換",
                    "relation": "led_to",
                    "stated": True,
                    "messageKey": "",
                }
            ],
        },
        {
            "concepts": [{"name": "食事", "id": "", "kind": "noun", "messageKey": ""}],
            "relations": [],
        },
    ]
    with FakeServer(
        *(Reply(200, openai_chat(json.dumps(a, ensure_ascii=False))) for a in answers)
    ) as server:
        monkeypatch.setenv("PMEM_OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("PMEM_CONCEPTS_LLM", "openai:gpt-test")
        assert backfill_stage(db, tmp_path, run_id=None, embed=False) == {
            "error": "ConsentRequired"
        }
        assert server.requests == [] and ConceptStore(db).counts()["experiences"] == 0
        cs.grant(get_settings(), cs.drafting_target("openai:gpt-test", "concepts"), [], {})
        out = backfill_stage(db, tmp_path, run_id=None, embed=False)
        bodies = [r.json() for r in server.requests]
    assert out["experiences_read"] == 3 and out["extractor"] == "openai:gpt-test"
    assert [b["response_format"]["json_schema"]["name"] for b in bodies] == ["concepts"] * 3
    assert "diary:E101:m1" in bodies[0]["messages"][1]["content"]
    # the second record was shown 登山 (stored by the first) to reuse its id
    tozan = ConceptStore(db).find("登山")
    assert tozan is not None and tozan.id in bodies[1]["messages"][1]["content"]
    store_ = ConceptStore(db)
    assert store_.get("concept:made-up") is None
    assert [k for k in store_.evidence_keys([ids["E101"]])[ids["E101"]] if "nope" in k] == []
    assert link_table(store_, ids) == {
        ("友人", "登山", "with"): ["E101"],
        ("登山", "気分転換", "led_to"): ["E102"],
    }


@pytest.mark.parametrize(
    ("text", "relations"),
    [
        (
            "友人と登山して、とても楽しかった。",
            {("友人", "登山", "with"), ("登山", "楽しい", "felt")},
        ),
        ("登山で良い気分転換になった。", {("登山", "気分転換", "led_to")}),
        ("健康のためにストレッチを始めた。", {("ストレッチ", "健康", "for")}),
        (
            "ポールのおかげで足首は大丈夫だった。",
            {("ポール", "足首", "led_to"), ("足首", "大丈夫", "felt")},
        ),
        ("引っ越しは大変だった。", {("引っ越し", "大変", "felt")}),
        ("Hiking really helped with my stress.", {("hiking", "stress", "led_to")}),
        ("週末は登山と読書。仕事と家族。", set()),  # side by side: no relation stated
        # a compound says what AのB says, an apposition A(B) what BのA says: the same
        # relation whichever way a record words it, so that it recurs across experiences
        ("冬用手袋を買う。", {("手袋", "冬用", "part_of")}),
        ("冬用の手袋を買う。", {("手袋", "冬用", "part_of")}),
        ("来週、実家(静岡)に帰省する。", {("実家", "静岡", "part_of")}),
        ("静岡の実家に帰る。", {("実家", "静岡", "part_of")}),
        (
            "陽菜の小学校入学まであと3週間。",
            {
                ("小学校", "陽菜", "part_of"),
                ("入学", "陽菜", "part_of"),
                ("入学", "小学校", "part_of"),
            },
        ),
        ('Get "https://api.example.com/v1/routes?area=tanzawa": context deadline exceeded', set()),
    ],
)
def test_offline_cues(text: str, relations: set[tuple[str, str, str]]) -> None:
    from core.concepts import ExperienceInput
    from stages.concepts import extract

    ex = extract(ExperienceInput("m", 1, "", text))
    assert {(r.source, r.target, r.relation) for r in ex.relations} == relations
    assert all(r.stated for r in ex.relations)
    if "tanzawa" in text:
        assert ex.concepts == ()


def test_a_records_section_headings_are_no_concepts() -> None:
    from core.concepts import ExperienceInput
    from stages.concepts import extract

    summary = "## 背景\n週末に丹沢へ行く計画。\n## 決定\n日帰りにする。\n## Open points\n雨の場合"
    names = {c.surface for c in extract(ExperienceInput("m", 1, "丹沢", summary)).concepts}
    assert "丹沢" in names and not names & {"背景", "決定", "Open", "points"}
