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
