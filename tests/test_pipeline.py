"""The backfill spine end to end on the real PostgreSQL: resume, no repeated work, exactly once.

The sequencing is the same function the Prefect flow runs (flows.pipeline.run_backfill); here
the steps run plainly so that a scripted drafter can be injected. tests/test_flow.py runs the
Prefect flow itself and the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from core.errors import TransientDraftError
from core.hashing import bytes_text
from core.settings import Settings
from flows import pipeline as pl
from providers.fake import ScriptedDrafter
from state import batch as batch_state
from tests.conftest import REAL

SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo" / "conversations.json"


def make_pipeline(pmem_env, drafter=None, **settings) -> pl.Pipeline:
    p = pl.Pipeline.open(Settings(**settings))
    if drafter is not None:
        p.drafter = drafter
    return p


def run(pmem_env, export: Path, drafter=None, dry_run=False, **settings) -> dict:
    p = make_pipeline(pmem_env, drafter, **settings)
    try:
        return pl.run_backfill(p, "chatgpt", str(export), dry_run=dry_run)
    finally:
        p.close()


def store_dump(db_url: str) -> dict[str, list]:
    with psycopg.connect(db_url) as conn:
        return {
            "memories": conn.execute(
                "SELECT id, title, current_revision FROM memories ORDER BY id"
            ).fetchall(),
            "revisions": conn.execute(
                "SELECT memory_id, revision, record_hash FROM memory_revisions ORDER BY 1, 2"
            ).fetchall(),
            "evidence": conn.execute(
                "SELECT memory_id, source_key, text_hash FROM evidence ORDER BY 1, 2, 3"
            ).fetchall(),
        }


@pytest.mark.needs_shared
def test_real_export_backfill_and_rerun(pmem_env, db_url):
    first = run(pmem_env, SUBSET)
    assert first["status"] == "complete"
    assert first["conversations"] == 6
    assert first["commits"] >= 3 and first["memories_created"] == first["commits"]
    assert first["drafter_calls"] == first["batches_total"] >= 2  # 6 conversations, 4 per batch
    again = run(pmem_env, SUBSET)
    assert (
        again["run_id"] == first["run_id"] and again["resumed"]
    )  # the same run: nothing left to do
    assert again["drafter_calls"] == 0 and again["commits"] == 0 and again["batches_total"] == 0


def test_every_stored_evidence_is_verbatim_in_its_source(pmem_env, db_url):
    run(pmem_env, DEMO)
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            """SELECT e.text, m.body FROM evidence e JOIN source_messages m ON m.message_key = e.source_key"""
        ).fetchall()
        orphans = conn.execute(
            "SELECT count(*) FROM evidence e LEFT JOIN source_messages m ON m.message_key = e.source_key WHERE m.message_key IS NULL"
        ).fetchone()[0]
    assert rows and orphans == 0
    for text, body in rows:
        assert text in bytes_text(bytes(body))


def test_prefilter_records_a_reason_for_every_drop(pmem_env, db_url):
    summary = run(pmem_env, DEMO)
    assert summary["dropped"] >= 1
    with psycopg.connect(db_url) as conn:
        drops = conn.execute("SELECT reason FROM prefilter_decisions WHERE NOT keep").fetchall()
    assert drops and all(r[0].startswith("drop:") for r in drops)
    assert sum(summary["drop_reasons"].values()) == summary["dropped"]


def test_failed_batch_resumes_without_redoing_finished_work(pmem_env, db_url, tmp_path):
    # batches of 2: the demo's 7 kept conversations make 4 batches; the 2nd draft call fails
    drafter = ScriptedDrafter([])
    calls = {"n": 0}
    original = drafter.draft

    def flaky(conversations, context):
        calls["n"] += 1
        if calls["n"] == 2:
            drafter.history.append([c.key for c in conversations])
            raise TransientDraftError(
                "timed out"
            )  # no Retry-After: the batch fails, the run goes on
        return original(conversations, context)

    drafter.draft = flaky  # type: ignore[method-assign]
    first = run(pmem_env, DEMO, drafter, batch_max_conversations=2)
    assert first["status"] == "failed" and first["batches_failed"] == 1
    assert first["batches_total"] == 4 and first["drafter_calls"] == 3
    done_after_first = store_dump(db_url)

    retry = ScriptedDrafter([])
    second = run(pmem_env, DEMO, retry, batch_max_conversations=2)
    assert second["run_id"] == first["run_id"] and second["resumed"]
    assert second["status"] == "complete"
    assert second["drafter_calls"] == 1 and len(retry.history) == 1  # only the failed batch
    assert retry.history[0] == drafter.history[1]
    assert second["batches_skipped_complete"] == 0  # committed batches are not even planned again
    after = store_dump(db_url)
    assert set(done_after_first["memories"]) <= set(after["memories"])
    assert len(after["memories"]) == 7

    third = run(pmem_env, DEMO, ScriptedDrafter([]), batch_max_conversations=2)
    assert third["drafter_calls"] == 0 and third["commits"] == 0
    assert store_dump(db_url) == after


def test_crash_between_commit_and_bookkeeping_commits_once(
    pmem_env, db_url, db_factory, monkeypatch
):
    real_save = batch_state.save_state
    state = {"commits_seen": 0}

    def crashing_save(path, st, stage, **changes):
        if stage == "committing" and st.get("commits"):
            state["commits_seen"] += 1
            if (
                state["commits_seen"] == 2
            ):  # the second commit reached the store, its bookkeeping did not
                raise KeyboardInterrupt("simulated kill")
        return real_save(path, st, stage, **changes)

    monkeypatch.setattr(batch_state, "save_state", crashing_save)
    with pytest.raises(KeyboardInterrupt):
        run(pmem_env, DEMO)
    monkeypatch.setattr(batch_state, "save_state", real_save)
    resumed = run(pmem_env, DEMO)
    assert resumed["resumed"] and resumed["status"] == "complete"
    # batches are drafted and committed wave by wave: the waves drafted before the kill are not
    # drafted again (their result.json files were complete), the later ones are drafted now
    assert resumed["batches_skipped_complete"] >= 1
    assert (
        resumed["drafter_calls"] == resumed["batches_total"] - resumed["batches_skipped_complete"]
    )
    assert resumed["commits_replayed"] >= 1  # the commit whose bookkeeping was lost
    dump = store_dump(db_url)
    titles = [m[1] for m in dump["memories"]]
    assert len(titles) == len(set(titles)) == 7
    assert all(rev == 1 for _, _, rev in dump["memories"])

    # an uninterrupted run into a fresh database ends with the identical store
    clean_url = db_factory()
    monkeypatch.setenv("DATABASE_URL", clean_url)
    monkeypatch.setenv("PMEM_DATA_DIR", pmem_env["PMEM_DATA_DIR"] + "-clean")
    run(pmem_env, DEMO)
    assert store_dump(clean_url) == dump


def test_dry_run_commits_nothing_and_a_later_run_reuses_its_drafts(pmem_env, db_url):
    dry = run(pmem_env, DEMO, dry_run=True)
    assert dry["dry_run"] and dry["commits"] == 0 and dry["drafter_calls"] >= 1
    assert store_dump(db_url)["memories"] == []
    real = run(pmem_env, DEMO)
    assert real["drafter_calls"] == 0 and real["batches_skipped_complete"] == dry["batches_total"]
    assert real["commits"] == 7


def test_new_conversation_does_not_shift_finished_batches(pmem_env, db_url, tmp_path):
    full = json.loads(DEMO.read_text())
    part = tmp_path / "part.json"
    part.write_text(json.dumps(full[:-1]))
    first = run(pmem_env, part)
    with psycopg.connect(db_url) as conn:
        batches_before = conn.execute("SELECT batch_id, status FROM batches ORDER BY 1").fetchall()
    whole = tmp_path / "whole.json"
    whole.write_text(json.dumps(full))
    second = run(pmem_env, whole)
    with psycopg.connect(db_url) as conn:
        batches_after = conn.execute("SELECT batch_id, status FROM batches ORDER BY 1").fetchall()
    assert set(batches_before) <= set(batches_after)
    new_kept = second["kept"] - first["kept"]
    assert second["drafter_calls"] == (1 if new_kept else 0)
    assert second["conversations_new"] == 1


def test_result_files_are_complete_and_checked(pmem_env, tmp_path):
    summary = run(pmem_env, DEMO)
    runs_dir = Path(pmem_env["PMEM_DATA_DIR"]) / "runs" / summary["run_id"] / "batches"
    results = sorted(runs_dir.glob("*/result.json"))
    states = sorted(runs_dir.glob("*/run-state.json"))
    assert len(results) == len(states) == summary["batches_total"]
    from state.files import RESULT_SCHEMA, STATE_SCHEMA, read_checked

    for r, s in zip(results, states, strict=True):
        assert read_checked(r, RESULT_SCHEMA)["complete"] is True
        assert read_checked(s, STATE_SCHEMA)["stage"] == "committed"


def test_no_secret_reaches_a_memory_evidence_or_index_row(pmem_env, db_url, tmp_path):
    secrets = ["sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678", "hunter2hunter2"]
    conv = {
        "id": "c-secret",
        "title": "API キーの管理方法を決めた",
        "create_time": 1717000000.0,
        "current_node": "n2",
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["n1"]},
            "n1": {
                "id": "n1",
                "parent": "root",
                "children": ["n2"],
                "message": {
                    "id": "n1",
                    "author": {"role": "user"},
                    "create_time": 1717000000.0,
                    "content": {
                        "content_type": "text",
                        "parts": [
                            f"キーは {secrets[0]} です。パスワードは {secrets[1]} です。"
                            "結局、キーは 1Password に保管することに決めた。理由は共有が楽だから。"
                        ],
                    },
                },
            },
            "n2": {
                "id": "n2",
                "parent": "n1",
                "children": [],
                "message": {
                    "id": "n2",
                    "author": {"role": "assistant"},
                    "create_time": 1717000100.0,
                    "content": {"content_type": "text", "parts": ["良い判断です。"]},
                },
            },
        },
    }
    export = tmp_path / "secret.json"
    export.write_text(json.dumps([conv]))
    summary = run(pmem_env, export)
    assert summary["commits"] == 1
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            """SELECT m.title || m.canonical_summary || m.index_summary || array_to_string(m.aliases, ' ')
                      || array_to_string(m.tags, ' ') FROM memories m
               UNION ALL SELECT record::text FROM memory_revisions
               UNION ALL SELECT text FROM evidence
               UNION ALL SELECT index_text FROM search_projections"""
        ).fetchall()
    blob = "\n".join(r[0] for r in rows)
    assert "1Password" in blob  # the decision itself is kept
    for s in secrets:
        assert s not in blob
    for f in (Path(pmem_env["PMEM_DATA_DIR"]) / "runs").rglob("result.json"):
        assert not any(s in f.read_text() for s in secrets)


def test_no_private_text_in_log_records(pmem_env, db_url, caplog):
    """Invariant 9: log lines carry ids and counts, never what the person wrote."""
    import logging

    caplog.set_level(logging.DEBUG)
    run(pmem_env, DEMO, batch_max_conversations=2)
    data = json.loads(DEMO.read_text())
    texts = [
        part
        for conv in data
        for node in conv["mapping"].values()
        if node.get("message")
        for part in node["message"]["content"].get("parts", [])
        if isinstance(part, str) and len(part) >= 12
    ]
    # distinctive fragments of every message: 12 characters from its middle
    fragments = {t[len(t) // 2 : len(t) // 2 + 12] for t in texts}
    assert len(fragments) > 20
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert caplog.records  # the run did log
    leaked = [f for f in fragments if f in logged]
    assert leaked == []
