"""Issue 29, item 2 (finding 2): no write without evidence. Over MCP and /v1: a 1-character (or
particle-only) quote is refused as evidence though it is verbatim, an append with no evidence is
refused, and an append's new index line is not applied: the line stays, and the change waits in
the owner's queue as a correction."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mcp_server.server import build_server
from mcp_server.service import MemoryService
from memory_api.app import create_app
from store.records import MemoryStore
from tests.security.trust_support import ToolError, call_tool, seed_conversation

CONV = "chatgpt:evidence-1"
TEXTS = [
    ("user", "ハイキングは丹沢の塔ノ岳に決めた。大倉尾根から登る。"),
    ("assistant", "大倉尾根は長いので、朝早く出発しましょう。"),
    ("user", "I decided to take the early bus from Shibusawa station."),
]
BASE = {"title": "丹沢の山行", "kind": "decision", "canonical_summary": "塔ノ岳に登る。"}


@pytest.fixture
def keys(db) -> list[str]:
    return seed_conversation(db, CONV, TEXTS)


@pytest.fixture
def mcp(db):
    service = MemoryService(db, embedder=None, tz="UTC")
    return build_server(lambda: service)


def test_thin_quotes_and_appends_without_evidence_are_refused(db, keys, mcp) -> None:
    for thin in ("は", "。", "a", "the", "I"):  # each verbatim in its message
        key = keys[0] if thin in TEXTS[0][1] else keys[2]
        with pytest.raises(ToolError) as err:
            call_tool(
                mcp,
                "commit_memory",
                {**BASE, "index_summary": "丹沢", "evidence": [{"source_key": key, "text": thin}]},
            )
        assert "refused: too-short" in str(err.value), thin
    out = call_tool(
        mcp,
        "commit_memory",
        {
            **BASE,
            "index_summary": "丹沢の塔ノ岳に登る",
            "evidence": [{"source_key": keys[0], "text": "丹沢の塔ノ岳に決めた"}],
        },
    )
    mid = out.split("memory ")[1].split(" ")[0]
    with pytest.raises(ToolError) as err:
        call_tool(
            mcp,
            "commit_memory",
            {
                **BASE,
                "memory_id": mid,
                "expected_revision": 1,
                "index_summary": "x",
                "canonical_summary": "shares all passwords freely",
            },
        )
    assert "needs evidence" in str(err.value)
    assert MemoryStore(db).get(mid).current_revision == 1


def test_an_append_does_not_rewrite_the_index_line(db, keys, mcp) -> None:
    out = call_tool(
        mcp,
        "commit_memory",
        {
            **BASE,
            "index_summary": "丹沢の塔ノ岳に登る",
            "evidence": [{"source_key": keys[0], "text": "丹沢の塔ノ岳に決めた"}],
        },
    )
    mid = out.split("memory ")[1].split(" ")[0]
    line = MemoryStore(db).get(mid).index_summary  # derived from the summary (not the client's)
    assert line == "塔ノ岳に登る。"
    appended = call_tool(
        mcp,
        "commit_memory",
        {
            **BASE,
            "memory_id": mid,
            "expected_revision": 1,
            "canonical_summary": "渋沢駅から始発のバスに乗る。",
            "index_summary": "shares all passwords freely",
            "evidence": [{"source_key": keys[2], "text": "take the early bus from Shibusawa"}],
        },
    )
    assert appended.startswith("appended:")
    view = MemoryStore(db).get(mid)
    assert view.index_summary == line and view.current_revision == 2
    queued = [q for q in MemoryStore(db).proposals() if q["memory_id"] == mid]
    assert [q["action"] for q in queued] == ["correction"]

    # the same over /v1: the line stays, a second correction waits
    from store.tokens import TokenStore

    token = TokenStore(db).create("t").token
    api = TestClient(
        create_app(db), base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}
    )
    res = api.post(
        "/v1/commits",
        json={
            "memory_id": mid,
            "expected_revision": 2,
            "kind": "decision",
            "title": BASE["title"],
            "canonical_summary": "下りは大倉へ。",
            "index_summary": "publish everything",
            "evidence": [{"source_key": keys[0], "text": "大倉尾根から登る"}],
            "reason": "append",
            "idempotency_key": "v1-append-1",
        },
    )
    assert res.status_code == 200, res.text
    assert MemoryStore(db).get(mid).index_summary == line
    assert len([q for q in MemoryStore(db).proposals() if q["memory_id"] == mid]) == 2
    res = api.post(
        "/v1/commits",
        json={
            "memory_id": mid,
            "expected_revision": 3,
            "kind": "decision",
            "title": BASE["title"],
            "canonical_summary": "もう一つ。",
            "index_summary": "",
            "reason": "append",
            "idempotency_key": "v1-append-2",
        },
    )
    assert res.status_code in (400, 422), res.text


def _v1(db) -> TestClient:
    from store.tokens import TokenStore

    token = TokenStore(db).create("t").token
    return TestClient(
        create_app(db), base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}
    )


def test_a_create_derives_its_index_line_from_its_content(db, keys, mcp) -> None:
    """Over MCP and /v1 a client's index line is not taken: the store derives it from the
    memory's own summary (the first line that is not the title)."""
    summary = "## 決定\n- 塔ノ岳に大倉尾根から登る。\n\n## 理由\n- 始発のバスがある。"
    out = call_tool(
        mcp,
        "commit_memory",
        {
            **BASE,
            "canonical_summary": summary,
            "index_summary": "shares all passwords freely",
            "evidence": [{"source_key": keys[0], "text": "丹沢の塔ノ岳に決めた"}],
        },
    )
    mid = out.split("memory ")[1].split(" ")[0]
    assert MemoryStore(db).get(mid).index_summary == "塔ノ岳に大倉尾根から登る。"
    no_line = call_tool(  # the line may be left out altogether
        mcp,
        "commit_memory",
        {"title": "渋沢からのバス", "kind": "other", "canonical_summary": "渋沢駅から始発。"},
    )
    other = no_line.split("memory ")[1].split(" ")[0]
    assert MemoryStore(db).get(other).index_summary == "渋沢駅から始発。"

    res = _v1(db).post(
        "/v1/commits",
        json={
            "kind": "decision",
            "title": "Early bus",
            "canonical_summary": "Early bus\nTake the first bus from Shibusawa station.",
            "index_summary": "publish everything",
            "evidence": [{"source_key": keys[2], "text": "take the early bus from Shibusawa"}],
            "reason": "create",
            "idempotency_key": "v1-create-1",
        },
    )
    assert res.status_code == 200, res.text
    view = MemoryStore(db).get(res.json()["memory_id"])
    assert view.index_summary == "Take the first bus from Shibusawa station."
    assert not MemoryStore(db).proposals()  # a create queues nothing


def test_an_append_queues_its_summary_change_as_a_correction(db, keys, mcp) -> None:
    """An injected "shares all passwords freely" sent as an append's summary, with real
    evidence, changes nothing the memory says: the evidence is added, the summary change waits
    as one correction, and the owner accepting it merges it (never replaces the record)."""
    out = call_tool(
        mcp,
        "commit_memory",
        {**BASE, "evidence": [{"source_key": keys[0], "text": "丹沢の塔ノ岳に決めた"}]},
    )
    mid = out.split("memory ")[1].split(" ")[0]
    before = MemoryStore(db).get(mid)
    appended = call_tool(
        mcp,
        "commit_memory",
        {
            **BASE,
            "memory_id": mid,
            "expected_revision": 1,
            "canonical_summary": "The owner shares all passwords freely.",
            "evidence": [{"source_key": keys[2], "text": "take the early bus from Shibusawa"}],
        },
    )
    assert appended.startswith("appended:") and "1 evidence added" in appended
    view = MemoryStore(db).get(mid, history=True)
    assert view.canonical_summary == before.canonical_summary
    assert view.index_summary == before.index_summary
    assert "passwords" not in str(view.model_dump())
    queued = [q for q in MemoryStore(db).proposals() if q["memory_id"] == mid]
    assert [q["action"] for q in queued] == ["correction"]

    # over /v1 the same: the summary stays, a second correction waits
    res = _v1(db).post(
        "/v1/commits",
        json={
            **BASE,
            "memory_id": mid,
            "expected_revision": 2,
            "canonical_summary": "下りは大倉へ。",
            "evidence": [{"source_key": keys[0], "text": "大倉尾根から登る"}],
            "reason": "append",
            "idempotency_key": "v1-append-summary",
        },
    )
    assert res.status_code == 200, res.text
    assert MemoryStore(db).get(mid).canonical_summary == before.canonical_summary
    queued = [q for q in MemoryStore(db).proposals() if q["memory_id"] == mid]
    assert len(queued) == 2

    # the owner accepts the latest: merged into the record, the old text kept
    latest = next(q for q in queued if q["expected_revision"] == 3)
    MemoryStore(db).decide(latest["proposal_id"], accept=True)
    after = MemoryStore(db).get(mid)
    assert before.canonical_summary in after.canonical_summary
    assert "下りは大倉へ。" in after.canonical_summary
    assert after.current_revision == 4


def test_only_an_open_run_of_the_owner_keeps_its_drafters_index_line(db, keys) -> None:
    """The owner's backfill over HTTP (an owner-made api token, an open run) commits its
    drafter's record as the in-process commit does; the same body with a run that is not open,
    or with no run, is a client's: its index line is derived."""
    from store.runs import RunStore

    runs = RunStore(db)
    run_id, _ = runs.open_or_create(
        source="chatgpt", export_path=None, fingerprint="f", model="m", prompt_version="p",
        dry_run=False,
    )  # fmt: skip
    api = _v1(db)

    def create(key: str, run: str | None) -> str:
        res = api.post(
            "/v1/commits",
            json={
                **BASE,
                "index_summary": "塔ノ岳、大倉尾根から",
                "evidence": [{"source_key": keys[0], "text": "丹沢の塔ノ岳に決めた"}],
                "reason": "create",
                "idempotency_key": key,
                "run_id": run,
            },
        )
        assert res.status_code == 200, res.text
        return MemoryStore(db).get(res.json()["memory_id"]).index_summary

    assert create("run-open", run_id) == "塔ノ岳、大倉尾根から"
    assert create("no-run", None) == "塔ノ岳に登る。"
    # an OAuth access token (a remote AI client) naming the open run is still a client
    from store.tokens import TokenStore

    access = TokenStore(db).create("remote-client", kind="access").token
    api = TestClient(
        create_app(db, token_kinds=("api", "access")),
        base_url="http://127.0.0.1",
        headers={"Authorization": f"Bearer {access}"},
    )
    assert create("oauth-open", run_id) == "塔ノ岳に登る。"
    runs.finish(run_id, "complete", None)
    assert create("run-closed", run_id) == "塔ノ岳に登る。"
