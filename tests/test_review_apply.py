"""Dry run → review → apply on the demo export: apply makes no drafter call, respects rejected
drafts, and lists drafts whose target moved on as conflicts instead of forcing them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg

from core.models import CommitRequest
from core.settings import Settings
from flows import pipeline as pl
from providers.fake import ScriptedDrafter
from reports.review import build_review, write_review
from search.reader import SearchStore
from store.records import MemoryStore
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"


class NoDrafter(ScriptedDrafter):
    """Any drafting call fails the test."""

    def draft(self, conversations, context):  # type: ignore[override]
        raise AssertionError("apply must not call the drafter")


def open_pipeline(drafter=None) -> pl.Pipeline:
    p = pl.Pipeline.open(Settings())
    if drafter is not None:
        p.drafter = drafter
    return p


def test_dry_run_review_then_apply_without_llm(pmem_env, db_url):
    p = open_pipeline()
    try:
        dry = pl.run_backfill(p, "chatgpt", str(DEMO), dry_run=True)
    finally:
        p.close()
    assert dry["commits"] == 0 and dry["drafter_calls"] >= 1
    run_id = dry["run_id"]
    settings = Settings()

    p = open_pipeline(NoDrafter(model="extractive:v1"))
    try:
        rv = build_review(p.runs, p.store, settings.runs_dir, run_id)
        assert rv.counts["new"] == 7 and rv.counts["appends"] == 0
        rejected_id = next(d.draft_id for d in rv.drafts if d.action == "create")
        p.runs.set_decision(run_id, rejected_id, "reject")
        rv = build_review(p.runs, p.store, settings.runs_dir, run_id)
        md, page = write_review(rv, settings.runs_dir)
        assert "Review of run" in md.read_text() and "rejected" in md.read_text()
        html = page.read_text()
        assert (
            html.startswith("<!doctype html>")
            and "<script" not in html
            and "http" not in html.split("<body>")[0]
        )

        summary = pl.apply_run(p, run_id, p.runs.rejected_drafts(run_id))
        assert (
            summary["commits"] == 6 and summary["conflicts"] == 0 and summary["drafter_calls"] == 0
        )
        for key in (
            "run_id",
            "conversations",
            "batches_total",
            "batches_skipped_complete",
            "drafter_calls",
            "commits",
            "rejected_evidence",
        ):
            assert key in summary
        again = pl.apply_run(p, run_id, p.runs.rejected_drafts(run_id))
        assert again["commits"] == 0  # nothing twice
    finally:
        p.close()
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 6


def test_apply_lists_conflicts_when_the_target_moved(pmem_env, db_url, tmp_path):
    p = open_pipeline()
    try:
        pl.run_backfill(p, "chatgpt", str(DEMO))
    finally:
        p.close()
    # the person continued one conversation: a later export has one more message in it
    data = json.loads(DEMO.read_text())
    conv = next(c for c in data if "引っ越し" in (c.get("title") or ""))
    leaf = conv["current_node"]
    new_id = "aaa20000-0000-4000-8000-000000000001"
    conv["mapping"][leaf]["children"].append(new_id)
    conv["mapping"][new_id] = {
        "id": new_id,
        "parent": leaf,
        "children": [],
        "message": {
            "id": new_id,
            "author": {"role": "user"},
            "create_time": 1735000000.0,
            "content": {
                "content_type": "text",
                "parts": ["結局、駅から徒歩五分の部屋に決めました。家賃は予算内に収まりました。"],
            },
            "recipient": "all",
            "status": "finished_successfully",
        },
    }
    conv["current_node"] = new_id
    grown = tmp_path / "grown.json"
    grown.write_text(json.dumps(data))

    p = open_pipeline()
    try:
        dry = pl.run_backfill(p, "chatgpt", str(grown), dry_run=True)
        assert dry["drafter_calls"] == 1  # only the conversation that grew
        rv = build_review(p.runs, p.store, Settings().runs_dir, dry["run_id"])
        append = next(d for d in rv.drafts if d.action == "append")
        assert any(line.startswith("+") and "徒歩五分" in line for line in append.diff)
        # meanwhile, someone else updates that memory
        target = next(m for m in SearchStore(p.db).search("引っ越し"))
        p.store.commit(
            CommitRequest(
                memory_id=target.id,
                expected_revision=1,
                kind="decision",
                title=target.title,
                canonical_summary="手で直した",
                index_summary="",
                reason="append",
                idempotency_key="manual-edit",
            )
        )
        summary = pl.apply_run(p, dry["run_id"], frozenset())
        assert summary["conflicts"] == 1 and summary["commits"] == 0
        assert summary["conflict_drafts"][0]["reason"] == "StaleRevision"
        assert p.store.get(target.id).current_revision == 2  # not forced
    finally:
        p.close()


def test_cli_review_writes_files_and_apply_json(cli_env):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "backfill",
            "--export",
            str(DEMO),
            "--dry-run",
            "--json",
        ],
        env=cli_env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    run_id = json.loads(run.stdout.strip().splitlines()[-1])["run_id"]
    rv = subprocess.run(
        [sys.executable, "-m", "cli.main", "review", run_id, "--json"],
        env=cli_env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rv.returncode == 0, rv.stderr[-2000:]
    out = json.loads(rv.stdout.strip().splitlines()[-1])
    assert (
        Path(out["markdown"]).exists() and Path(out["html"]).exists() and out["counts"]["new"] == 7
    )
    ap = subprocess.run(
        [sys.executable, "-m", "cli.main", "apply", run_id, "--json"],
        env=cli_env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ap.returncode == 0, ap.stderr[-2000:]
    assert json.loads(ap.stdout.strip().splitlines()[-1])["commits"] == 7


def test_cli_restore_is_confirmed_and_makes_a_new_revision(cli_env, db_url):
    from core.models import EvidenceIn
    from store.db import Database

    db = Database(db_url)
    store = MemoryStore(db, ledger_evidence=False)  # made-up evidence key
    first = store.commit(
        CommitRequest(
            kind="decision",
            title="t",
            canonical_summary="v1",
            index_summary="v1",
            evidence=[EvidenceIn(source_key="chatgpt:c:n", text="v1 text")],
            idempotency_key="r1",
        )
    )
    store.commit(
        CommitRequest(
            memory_id=first.memory_id,
            expected_revision=1,
            kind="decision",
            title="t",
            canonical_summary="v2",
            index_summary="v2",
            reason="correction",
            idempotency_key="r2",
        )
    )
    cmd = [sys.executable, "-m", "cli.main", "restore", first.memory_id, "1"]
    refused = subprocess.run(
        cmd, env=cli_env, cwd=PROJECT, input="n\n", capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 1 and store.get(first.memory_id).current_revision == 2
    done = subprocess.run(
        [*cmd, "--yes", "--json"],
        env=cli_env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["revision"] == 3
    view = store.get(first.memory_id, history=True)
    assert view.canonical_summary == "v1" and [r["reason"] for r in view.revisions] == [
        "create",
        "correction",
        "restore",
    ]
    db.close()
