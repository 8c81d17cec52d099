"""Point 1 and the MCP / API findings of issue 10: whatever writes (MCP `commit_memory`, the HTTP
memory API, a restore), no secret is stored in a memory, revision, alias, tag, stated fact,
search projection, proposal or idempotency response, and evidence is a verbatim excerpt of a
ledger message or it is refused. The real PostgreSQL; every derived text column is scanned."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from psycopg.types.json import Jsonb

from core.errors import EvidenceRefused
from core.models import CommitRequest, EvidenceIn
from core.secrets import contains_secret
from mcp_server.server import build_server
from mcp_server.service import MemoryService
from memory_api.app import create_app
from store.records import MemoryStore
from tests.security.trust_support import (
    ToolError,
    call_tool,
    derived_text,
    pieces_left,
    seed_conversation,
)

OPENAI = "sk-proj-Abc123XyZ987Def456Ghi789Jkl012Mno345PqR"
GITHUB = "ghp_4f9Kx2LmQ8rT1vW7yZ3bN6cH0dJ5sA9eP2gU"
PASSWORD = "Tr0ub4dor&3xYz"
SECRETS = [OPENAI, GITHUB, PASSWORD]

CONV = "chatgpt:boundary-1"
TEXTS = [
    ("user", f"来週から新しいサーバーに移行します。APIキーは {OPENAI} です。"),
    ("assistant", "移行手順を整理しましょう。まずバックアップを取り、次に DNS を切り替えます。"),
    ("user", f"CI には {GITHUB} を入れてある。パスワードは {PASSWORD} です。"),
    ("assistant", "トークンは環境変数に置き、リポジトリには入れないでください。"),
]


@pytest.fixture
def keys(db) -> list[str]:
    assert all(contains_secret(f"key {s}") or contains_secret(f"パスワードは {s}") for s in SECRETS)
    return seed_conversation(db, CONV, TEXTS)


@pytest.fixture
def mcp(db):
    service = MemoryService(db, embedder=None, tz="UTC")
    return build_server(lambda: service)


def assert_no_secret_stored(db) -> None:
    blob = derived_text(db)
    for s in SECRETS:
        assert s not in blob
        assert not pieces_left(blob, s), (
            f"a piece of a planted secret was stored: {pieces_left(blob, s)}"
        )


def test_mcp_commit_never_stores_a_secret(db, keys, mcp):
    out = call_tool(
        mcp,
        "commit_memory",
        {
            "title": f"サーバー移行 {OPENAI}",
            "kind": "project",
            "canonical_summary": f"移行する。鍵 {OPENAI}、CI トークン {GITHUB}、パスワードは {PASSWORD}。",
            "index_summary": f"移行計画 {GITHUB}",
            # the pieces an alias / tag cutter makes: prefix lost, lower-cased
            "aliases": ["server migration", OPENAI[3:], OPENAI.split("-")[-1]],
            "tags": ["migration", GITHUB.lower(), OPENAI[8:].lower()],
            "stated_facts": [f"the password is {PASSWORD}"],
            "evidence": [{"source_key": keys[1], "text": "まずバックアップを取り"}],
        },
    )
    assert out.startswith("created: memory mem_") and "secret guard redacted" in out
    mid = out.split("memory ")[1].split(" ")[0]
    view = MemoryStore(db).get(mid)
    assert view.aliases == ["server migration"] and view.tags == ["migration"]
    assert view.title.startswith("サーバー移行 [REDACTED:")
    assert len(view.stated_facts) == 1 and view.evidence[0]["text"] == "まずバックアップを取り"
    # an append with more secrets: its summary waits as a correction (issue 29, item 2), and
    # accepting it, the merged, final text is guarded too
    call_tool(
        mcp,
        "commit_memory",
        {
            "memory_id": mid,
            "expectedRevision": 1,
            "title": view.title,
            "kind": "project",
            "canonical_summary": f"追記: 新しいキー {OPENAI} を発行",
            "index_summary": "移行計画",
            "aliases": [OPENAI.upper()[8:]],
            "evidence": [{"source_key": keys[1], "text": "まずバックアップを取り"}],
        },
    )
    queued = [q for q in MemoryStore(db).proposals() if q["memory_id"] == mid]
    assert [q["action"] for q in queued] == ["correction"]
    assert_no_secret_stored(db)
    MemoryStore(db).decide(queued[0]["proposal_id"], accept=True)
    view = MemoryStore(db).get(mid)
    assert view.current_revision == 2 and "新しいキー" in view.canonical_summary
    assert_no_secret_stored(db)


def test_mcp_evidence_must_be_verbatim_and_secret_free(db, keys, mcp):
    base = {
        "title": "移行",
        "kind": "project",
        "canonical_summary": "移行する",
        "index_summary": "移行",
    }
    cases = {
        "secret": {"source_key": keys[0], "text": f"APIキーは {OPENAI} です"},
        "secret-neighbour": {"source_key": keys[0], "text": OPENAI[8:30]},  # a piece: overlaps it
        "not-verbatim": {"source_key": keys[1], "text": "移行は来月に延期します"},
        "unknown-message": {
            "source_key": "chatgpt:boundary-1:n99",
            "text": "まずバックアップを取り",
        },
    }
    for reason, ev in cases.items():
        with pytest.raises(ToolError) as err:
            call_tool(mcp, "commit_memory", {**base, "evidence": [ev]})
        want = "secret" if reason.startswith("secret") else reason
        assert f"refused: {want}" in str(err.value), reason
        assert "stated_facts" in str(err.value)  # the hint says where a statement goes
    assert MemoryStore(db).counts()["memories"] == 0
    # the client's own statement is a stated fact, not evidence
    out = call_tool(mcp, "commit_memory", {**base, "stated_facts": ["移行は来月に延期します"]})
    mid = out.split("memory ")[1].split(" ")[0]
    view = MemoryStore(db).get(mid)
    assert view.stated_facts == ["移行は来月に延期します"] and view.evidence == []
    assert "stated by a client (not evidence)" in call_tool(mcp, "get_memory", {"memory_id": mid})
    assert_no_secret_stored(db)


def test_http_api_guards_secrets_and_evidence(db, keys):
    from store.tokens import TokenStore

    token = TokenStore(db).create("t").token
    client = TestClient(
        create_app(db), base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}
    )
    body = {
        "kind": "plan",
        "title": f"CI の設定 {GITHUB}",
        "canonical_summary": f"パスワードは {PASSWORD} にした",
        "index_summary": "CI",
        "aliases": [GITHUB[4:]],
        "tags": [PASSWORD.lower()],
        "stated_facts": [f"token {GITHUB}"],
        "idempotency_key": "api-1",
        "evidence": [{"source_key": keys[3], "text": "トークンは環境変数に置き"}],
    }
    ok = client.post("/v1/commits", json=body, headers={"X-Pmem-Client": "t"})
    assert ok.status_code == 200, ok.text
    assert set(ok.json()["redacted_fields"]) >= {
        "title",
        "canonical_summary",
        "aliases",
        "tags",
        "stated_facts",
    }
    bad = client.post(
        "/v1/commits",
        json={
            **body,
            "idempotency_key": "api-2",
            "evidence": [{"source_key": keys[1], "text": "DNS を先に切り替えます"}],
        },
    )
    assert bad.status_code == 422 and bad.json()["error"] == "evidence_refused"
    assert bad.json()["reason"] == "not-verbatim" and bad.json()["source_key"] == keys[1]
    leak = client.post(
        "/v1/commits",
        json={
            **body,
            "idempotency_key": "api-3",
            "evidence": [{"source_key": keys[2], "text": f"CI には {GITHUB} を入れてある"}],
        },
    )
    assert leak.status_code == 422 and leak.json()["reason"] == "secret"
    queued = client.post(
        "/v1/requests",
        json={
            "action": "create",
            "record": {
                "kind": "note",
                "title": f"鍵 {OPENAI}",
                "canonical_summary": f"{OPENAI}",
                "index_summary": "鍵",
            },
            "note": f"the password is {PASSWORD}",
        },
    )
    assert queued.status_code == 202
    assert MemoryStore(db).counts()["memories"] == 1
    assert_no_secret_stored(db)


def test_restore_of_an_old_revision_is_guarded_again(db, keys):
    store = MemoryStore(db)
    first = store.commit(
        CommitRequest(
            kind="plan",
            title="移行",
            canonical_summary="移行する",
            index_summary="移行",
            evidence=[EvidenceIn(source_key=keys[1], text="まずバックアップを取り")],
            idempotency_key="r1",
        )
    )
    # a revision written by an older version, before the guard knew this format
    with db.connection() as conn:
        old = {
            "kind": "plan",
            "title": f"移行 {OPENAI}",
            "canonical_summary": f"鍵は {OPENAI}",
            "index_summary": "移行",
            "aliases": [OPENAI[3:]],
            "tags": [],
            "occurred_at": None,
            "valid_from": None,
        }
        conn.execute(
            """INSERT INTO memory_revisions (memory_id, revision, record, record_hash, reason, client)
               VALUES (%s, 2, %s, 'old', 'append', 'old-version')""",
            (first.memory_id, Jsonb(old)),
        )
        conn.execute("UPDATE memories SET current_revision = 2 WHERE id = %s", (first.memory_id,))
    res = store.restore(first.memory_id, 2, expected_revision=2, idempotency_key="restore-2")
    assert res.revision == 3 and set(res.redacted_fields) >= {
        "title",
        "canonical_summary",
        "aliases",
    }
    view = store.get(first.memory_id, history=True)
    assert OPENAI not in view.title + view.canonical_summary and view.aliases == []
    latest = view.revisions[-1]["record"]
    assert OPENAI not in str(latest) and not pieces_left(str(latest), OPENAI)


def test_store_refuses_evidence_that_is_not_in_the_ledger(db, keys):
    store = MemoryStore(db)  # the default: ledger evidence only
    with pytest.raises(EvidenceRefused) as err:
        store.commit(
            CommitRequest(
                kind="plan",
                title="x",
                canonical_summary="x",
                index_summary="x",
                idempotency_key="e1",
                evidence=[EvidenceIn(source_key=keys[1], text="バックアップは不要です")],
            )
        )
    assert err.value.reason == "not-verbatim" and "バックアップ" not in str(err.value)


def test_a_backup_brought_back_is_guarded(pmem_env, db, keys, tmp_path):
    """A `pmem export` written before the guard knew these formats (secrets in every field, a
    revision, an alias piece and an evidence excerpt) comes back through `pmem backup load`
    with none of them."""
    from typer.testing import CliRunner

    from cli.main import app
    from store.export import EXPORT_SCHEMA

    record = {
        "kind": "plan",
        "title": f"移行 {OPENAI}",
        "canonical_summary": f"鍵は {OPENAI}、CI は {GITHUB}",
        "index_summary": "移行",
        "aliases": [OPENAI[3:], "migration"],
        "tags": [GITHUB.lower()],
        "occurred_at": "2025-03-01T09:00:00+00:00",
        "valid_from": None,
    }
    rows = [
        {"type": "header", "schema_version": EXPORT_SCHEMA},
        {
            "type": "memory",
            "id": "mem_backup0000000000001",
            **record,
            "visibility": "private",
            "status": "active",
            "current_revision": 1,
        },
        {
            "type": "revision",
            "memory_id": "mem_backup0000000000001",
            "revision": 1,
            "record": record,
            "record_hash": "rec:old",
            "reason": "create",
            "restored_from": None,
            "client": "old",
            "model": None,
            "prompt_version": None,
        },
        {
            "type": "evidence",
            "memory_id": "mem_backup0000000000001",
            "source_key": keys[0],
            "text": f"APIキーは {OPENAI} です",
            "text_hash": "ev:old",
            "language": None,
            "revision_added": 1,
        },
        {
            "type": "evidence",
            "memory_id": "mem_backup0000000000001",
            "source_key": keys[1],
            "text": "まずバックアップを取り",
            "text_hash": "ev:old2",
            "language": None,
            "revision_added": 1,
        },
    ]
    path = tmp_path / "backup.jsonl"
    path.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8"
    )
    out = CliRunner().invoke(app, ["backup", "load", str(path), "--json"])
    assert out.exit_code == 0, out.output
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    assert counts["memories"] == 1 and counts["evidence"] == 1 and counts["evidence_refused"] == 1
    view = MemoryStore(db).get("mem_backup0000000000001", history=True)
    assert (
        view.aliases == ["migration"]
        and view.tags == []
        and view.revisions[0]["record_hash"] != "rec:old"
    )
    assert_no_secret_stored(db)
    again = CliRunner().invoke(app, ["backup", "load", str(path), "--json"])
    assert json.loads(again.stdout.strip().splitlines()[-1])["skipped_existing"] == 1
    path.write_text('{"type": "memory"}\n', encoding="utf-8")
    bad = CliRunner().invoke(app, ["backup", "load", str(path)])
    assert bad.exit_code == 1 and "line 1" in bad.stderr
