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
    assert view.index_summary == "丹沢の塔ノ岳に登る" and view.current_revision == 2
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
    assert MemoryStore(db).get(mid).index_summary == "丹沢の塔ノ岳に登る"
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
