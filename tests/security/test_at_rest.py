"""Issue 29, item 6 (finding 20), the parts at rest that are not the database roles: redaction
replaces the secret only (a word the secret happens to hold stays: "Home lab passwords"),
review.md escapes the HTML a conversation holds, and `pmem review` of a run that does not exist
is an error that writes no decision row."""

from __future__ import annotations

import psycopg
from typer.testing import CliRunner

from cli.main import app
from core.models import DraftRecord
from core.secrets import redact_draft
from reports.review import DraftReview, Review, to_markdown
from store.revisions import guard_record

TITLE = "Home lab passwords"


def test_redaction_keeps_the_word_a_secret_holds() -> None:
    draft = DraftRecord(
        action="create",
        title=TITLE,
        memory_kind="note",
        canonical_summary=f"{TITLE}: the NAS one is password2024x, in the vault.",
        index_summary=TITLE,
        aliases=["home lab passwords"],
        source_conversation_keys=["chatgpt:c"],
    )
    out, _ = redact_draft(draft, {"password2024x"})
    assert out.title == TITLE and out.aliases == ["home lab passwords"]
    assert "password2024x" not in out.canonical_summary
    record = {
        "kind": "note",
        "title": TITLE,
        "canonical_summary": "パスワードはpasswordです。Home lab passwords.",
        "index_summary": TITLE,
        "aliases": [],
        "tags": [],
    }
    guarded, _ = guard_record(record, {"password"})  # a weak password that is a word
    assert guarded["title"] == TITLE
    assert guarded["canonical_summary"] == "パスワードは[REDACTED:secret]です。Home lab passwords."


def test_review_md_escapes_html() -> None:
    evil = '<img src=x onerror="alert(1)"><script>fetch("//evil")</script>'
    rv = Review(
        run_id="run_x",
        drafts=[
            DraftReview(
                batch_id="b1",
                draft_id="d00",
                title=f"旅行 {evil}",
                action="create",
                rejected=False,
                reason=evil,
                summary=f"summary {evil}",
                aliases_added=[evil],
                evidence_added=[("chatgpt:c:n1", evil)],
            )
        ],
        counts={
            k: 0
            for k in ("drafts", "new", "appends", "uncommittable", "target_not_offered", "rejected")
        }
        | {"evidence": 1},
        tokens={"input": 0, "output": 0},
        cost_usd=None,
        model="extractive",
    )
    md = to_markdown(rv)
    assert "<img" not in md and "<script" not in md and "&lt;img" in md


def test_review_of_a_missing_run_is_an_error(pmem_env, db_url) -> None:
    res = CliRunner().invoke(app, ["review", "run_nope", "--reject", "d00", "--json"])
    assert res.exit_code != 0
    assert "no run run_nope" in res.stderr
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT count(*) FROM draft_decisions WHERE run_id = 'run_nope'"
        ).fetchone()
    assert rows is not None and rows[0] == 0


def test_a_deleted_memory_is_not_read_by_id_except_by_the_owner(pmem_env, db) -> None:
    """Over MCP and /v1 a deleted memory reads as a memory that does not exist; `pmem show`
    says so too, and shows it with --deleted."""
    from fastapi.testclient import TestClient

    from core.models import CommitRequest, EvidenceIn
    from mcp_server.server import build_server
    from mcp_server.service import MemoryService
    from memory_api.app import create_app
    from store.records import MemoryStore
    from store.tokens import TokenStore
    from tests.security.trust_support import ToolError, call_tool, seed_conversation

    keys = seed_conversation(
        db, "chatgpt:lab", [("user", "自宅ラボのNASは来月に買い替えることにした。")]
    )
    store = MemoryStore(db)
    mid = store.commit(
        CommitRequest(
            kind="decision",
            title="NAS の買い替え",
            canonical_summary="NAS を買い替える。",
            index_summary="NAS の買い替え",
            idempotency_key="lab-1",
            evidence=[EvidenceIn(source_key=keys[0], text="NASは来月に買い替える")],
        )
    ).memory_id
    store.delete(mid, expected_revision=1)

    mcp = build_server(lambda: MemoryService(db, embedder=None, tz="UTC"))
    for tool in ("get_memory", "memory_history"):
        try:
            out = call_tool(mcp, tool, {"memory_id": mid})
        except ToolError as err:
            out = str(err)
        assert "NAS の" not in out and "does not exist" in out, (tool, out)
    token = TokenStore(db).create("t").token
    api = TestClient(
        create_app(db), base_url="http://127.0.0.1", headers={"Authorization": f"Bearer {token}"}
    )
    res = api.get(f"/v1/memories/{mid}")
    assert res.status_code == 404 and "NAS の" not in res.text
    hidden = CliRunner().invoke(app, ["show", mid, "--json"])
    assert hidden.exit_code != 0 and "NAS の" not in hidden.stdout
    shown = CliRunner().invoke(app, ["show", mid, "--deleted", "--json"])
    assert shown.exit_code == 0 and '"status": "deleted"' in shown.stdout.replace('":"', '": "')
