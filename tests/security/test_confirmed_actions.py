"""Point 6 of issue 10: correction, merge, delete and publish need the owner's confirmation.
Neither MCP nor the HTTP API performs them: they queue a pending request in the one queue that
holds proposals, and the owner handles it with `pmem proposals list|show|accept|reject ID`
(`pmem confirm ID` = accept), each with `--json` and documented exit codes (0 done, 1 error,
3 conflict). Creation and append stay under standing approval. Real PostgreSQL, real CLI app."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli.main import app
from core.models import CommitRequest, EvidenceIn
from mcp_server.server import build_server
from mcp_server.service import MemoryService
from memory_api.app import create_app
from store.records import MemoryStore
from tests.security.trust_support import ToolError, call_tool, seed_conversation

runner = CliRunner()


def pmem(*args: str) -> tuple[int, dict]:
    out = runner.invoke(app, list(args))
    lines = out.stdout.strip().splitlines()
    return out.exit_code, (json.loads(lines[-1]) if lines else {})


@pytest.fixture
def world(pmem_env, db):
    keys = seed_conversation(
        db,
        "chatgpt:cars",
        [
            ("user", "車は手放すことに決めた。駐車場代が月2万円かかるから。"),
            ("assistant", "カーシェアを併用すれば不便は少ないでしょう。"),
            ("user", "カーシェアは近所のステーションを使うことにした。"),
        ],
    )
    store = MemoryStore(db)
    a = store.commit(
        CommitRequest(
            kind="decision",
            title="車を手放す",
            canonical_summary="車を手放すことにした。",
            index_summary="車を手放す",
            idempotency_key="a",
            evidence=[EvidenceIn(source_key=keys[0], text="車は手放すことに決めた")],
        )
    )
    b = store.commit(
        CommitRequest(
            kind="decision",
            title="カーシェア",
            canonical_summary="カーシェアを使う。",
            index_summary="カーシェア",
            idempotency_key="b",
            evidence=[EvidenceIn(source_key=keys[2], text="カーシェアは近所のステーションを使う")],
        )
    )
    from store.tokens import SCOPES, TokenStore

    token = TokenStore(db).create("phone", SCOPES).token  # delete/publish need their scopes
    api = TestClient(
        create_app(db), base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}
    )
    mcp = build_server(lambda: MemoryService(db, embedder=None, tz="UTC"))
    return store, a.memory_id, b.memory_id, keys, api, mcp


def state(store: MemoryStore, memory_id: str) -> tuple[int, str, str, str]:
    v = store.get(memory_id)
    return v.current_revision, v.status, v.visibility, v.canonical_summary


def test_clients_only_queue_confirmed_actions_and_the_owner_decides(world):
    store, a, b, keys, api, mcp = world
    before = {a: state(store, a), b: state(store, b)}

    # the HTTP API: a correction through /v1/commits is queued (202), not performed
    corr = api.post(
        "/v1/commits",
        json={
            "memory_id": a,
            "expected_revision": 1,
            "reason": "correction",
            "kind": "decision",
            "title": "車を手放す",
            "canonical_summary": "車は来年まで持つことにした。",
            "index_summary": "車",
            "idempotency_key": "c1",
        },
    )
    assert corr.status_code == 202 and corr.json()["status"] == "pending"
    publish = api.post(
        "/v1/requests", json={"action": "publish", "memory_id": b, "expected_revision": 1}
    )
    assert publish.status_code == 202
    assert (
        api.post(
            "/v1/commits",
            json={
                "memory_id": a,
                "expected_revision": 1,
                "reason": "restore",
                "kind": "d",
                "title": "t",
                "canonical_summary": "s",
                "index_summary": "i",
                "idempotency_key": "r",
            },
        ).status_code
        == 422
    )
    # MCP: propose_memory with a confirmed action is queued; commit_memory cannot express one
    out = call_tool(
        mcp,
        "propose_memory",
        {"action": "delete", "memory_id": a, "expectedRevision": 1, "note": "もう要らない"},
    )
    assert "queued for the owner's confirmation" in out
    delete_id = out.split()[1]
    created = call_tool(
        mcp,
        "propose_memory",
        {
            "title": "駐車場の解約",
            "kind": "project",
            "canonical_summary": "駐車場を解約する。",
            "index_summary": "駐車場",
        },
    )
    create_id = created.split()[1]
    with pytest.raises(ToolError):
        call_tool(mcp, "propose_memory", {"action": "drop-everything", "memory_id": a})
    assert {a: state(store, a), b: state(store, b)} == before  # nothing was performed

    code, listed = pmem("proposals", "list", "--json")
    assert code == 0 and listed["count"] == 4
    assert sorted(p["action"] for p in listed["proposals"]) == [
        "correction",
        "create",
        "delete",
        "publish",
    ]
    assert {p["client"] for p in listed["proposals"]} == {"phone", "mcp"}
    corr_id = corr.json()["proposal_id"]
    code, shown = pmem("proposals", "show", corr_id, "--json")
    assert (
        code == 0
        and shown["payload"]["record"]["canonical_summary"] == "車は来年まで持つことにした。"
    )
    assert shown["memory"]["current_revision"] == 1
    human = runner.invoke(app, ["proposals", "show", corr_id])
    assert (
        human.exit_code == 0
        and "車は来年まで持つことにした。" in human.stdout
        and "revision 1" in human.stdout
    )
    human = runner.invoke(app, ["proposals", "list"])
    assert human.exit_code == 0 and corr_id in human.stdout and "correction" in human.stdout

    # the owner accepts the correction: a new revision, reason correction, by the owner
    code, done = pmem("proposals", "accept", corr_id, "--json")
    assert code == 0 and done["status"] == "accepted" and done["result"]["revision"] == 2
    view = store.get(a, history=True)
    assert view.canonical_summary == "車は来年まで持つことにした。"
    assert (
        view.revisions[-1]["reason"] == "correction"
        and view.revisions[-1]["client"] == "owner:phone"
    )
    assert pmem("proposals", "accept", corr_id, "--json") == (0, {**done, "already": True})
    assert pmem("proposals", "reject", corr_id, "--json")[0] == 1  # decided the other way before

    # the delete was asked against revision 1: a conflict, it stays pending until rejected
    code, conflict = pmem("proposals", "accept", delete_id, "--json")
    assert code == 3 and conflict["error"] == "conflict" and conflict["current"] == 2
    assert store.get(a).status == "active" and store.proposal(delete_id)["status"] == "pending"
    code, rejected = pmem("proposals", "reject", delete_id, "--json")
    assert code == 0 and rejected["status"] == "rejected" and store.get(a).status == "active"

    code, _ = pmem("confirm", publish.json()["proposal_id"], "--json")  # the alias of accept
    assert code == 0 and store.get(b).visibility == "public"
    code, _ = pmem("confirm", create_id, "--json")
    assert code == 0 and store.counts()["memories"] == 3

    # a merge, asked for at the current revision, then confirmed: a's record and evidence move
    # into b, a is deleted (tombstone)
    merge = call_tool(
        mcp,
        "propose_memory",
        {"action": "merge", "memory_id": a, "expectedRevision": 2, "merge_into": b},
    )
    code, merged = pmem("proposals", "accept", merge.split()[1], "--json")
    assert code == 0 and merged["result"]["merged_from"] == a
    vb = store.get(b, history=True)
    assert vb.revisions[-1]["reason"] == "merge" and "車は来年まで持つ" in vb.canonical_summary
    assert {e["source_key"] for e in vb.evidence} == {keys[0], keys[2]}
    assert store.get(a).status == "deleted"

    assert pmem("proposals", "list", "--json")[1]["count"] == 0
    assert pmem("proposals", "list", "--all", "--json")[1]["count"] == 5
    code, missing = pmem("proposals", "accept", "req:nope", "--json")
    assert code == 1 and missing["error"] == "error"


def test_standing_approval_still_creates_and_appends(world):
    store, a, _b, keys, api, mcp = world
    out = call_tool(
        mcp,
        "commit_memory",
        {
            "memory_id": a,
            "expectedRevision": 1,
            "title": "車を手放す",
            "kind": "decision",
            "canonical_summary": "駐車場代が月2万円かかる。",
            "index_summary": "車を手放す",
            "evidence": [{"source_key": keys[0], "text": "駐車場代が月2万円かかるから"}],
        },
    )
    assert out.startswith("appended:") and store.get(a).current_revision == 2
    ok = api.post(
        "/v1/commits",
        json={
            "kind": "note",
            "title": "カーシェアの会員登録",
            "canonical_summary": "会員登録する",
            "index_summary": "会員登録",
            "idempotency_key": "n1",
        },
    )
    assert ok.status_code == 200 and ok.json()["created"]
    # the append added its evidence; its summary change is the owner's (issue 29, item 2)
    listed = pmem("proposals", "list", "--json")[1]
    assert listed["count"] == 1 and listed["proposals"][0]["action"] == "correction"
    assert "駐車場代" not in store.get(a).canonical_summary
    # a request without expectedRevision is made against the revision current when it is queued
    pid = call_tool(mcp, "propose_memory", {"action": "publish", "memory_id": a}).split()[1]
    assert store.proposal(pid)["expected_revision"] == 2
    assert pmem("confirm", pid, "--json")[0] == 0 and store.get(a).visibility == "public"
