"""`pmem import PATH [--source S] [--no-embed] [--json]`: the summary object, the exit codes
(0 / 3 / 1), the `error:` lines, skipped files by reason, and whole-conversation batches, on the
real PostgreSQL with the real samples (read in place)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from cli.main import app
from tests.conftest import REAL
from tests.test_ledger_cmds import chatgpt_export, one_conversation

SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
CODEX = REAL / "codex"


def pmem_import(*args: str, code: int) -> tuple[dict[str, Any], str]:
    result = CliRunner().invoke(app, ["import", *args, "--no-embed", "--json"])
    assert result.exit_code == code, (result.output, result.exception)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, "--json prints one object and nothing else on stdout"
    return json.loads(lines[-1]), result.stderr


def assert_contract(out: dict[str, Any]) -> None:
    assert set(out["conversations"]) >= {"new", "changed", "unchanged", "quarantined"}
    assert all(isinstance(v, int) for v in out["conversations"].values())
    assert set(out["messages"]) >= {"new"}
    assert isinstance(out["skipped"], dict) and all(
        isinstance(v, int) for v in out["skipped"].values()
    )
    assert isinstance(out["errors"], list)
    for e in out["errors"]:
        assert set(e) >= {"file", "record", "reason"}


@pytest.mark.needs_shared
def test_success_then_reimport_is_a_noop(pmem_env) -> None:
    out, err = pmem_import(str(SUBSET), "--source", "chatgpt", code=0)
    assert_contract(out)
    assert out["conversations"] == {"new": 6, "changed": 0, "unchanged": 0, "quarantined": 0}
    assert out["messages"]["new"] > 50 and out["errors"] == [] and out["skipped"] == {}
    assert "imported 6 conversations: 6 new" in err and "error:" not in err
    again, _ = pmem_import(str(SUBSET), code=0)  # the format is detected
    assert again["conversations"] == {"new": 0, "changed": 0, "unchanged": 6, "quarantined": 0}
    assert again["messages"] == {"new": 0}


def test_an_import_needs_no_model_key_even_when_a_vendor_model_is_configured(
    pmem_env, monkeypatch, tmp_path: Path
) -> None:
    # importing never drafts: a person who configured a cloud model imports before giving a key
    monkeypatch.setenv("PMEM_LLM", "openai:gpt-4.1-mini")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    conv = one_conversation("k1", "t", [("user", "hello"), ("assistant", "hi")])
    out, _ = pmem_import(str(chatgpt_export(tmp_path / "e.json", [conv])), code=0)
    assert out["conversations"]["new"] == 1


def test_quarantined_records_exit_3_and_name_file_and_record(pmem_env, tmp_path: Path) -> None:
    good = [
        one_conversation(f"c{i}", f"t{i}", [("user", "hello"), ("assistant", "hi")])
        for i in range(3)
    ]
    path = chatgpt_export(
        tmp_path / "export.json", [good[0], {"title": "no id"}, good[1], 42, good[2]]
    )
    out, err = pmem_import(str(path), "--source", "chatgpt", code=3)
    assert_contract(out)
    assert out["conversations"]["new"] == 3 and out["conversations"]["quarantined"] == 2
    assert {(Path(e["file"]).name, e["record"], e["reason"]) for e in out["errors"]} == {
        ("export.json", 1, "missing-id"),
        ("export.json", 3, "not-an-object"),
    }
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert "error: export.json record 1: missing-id" in lines
    assert "error: export.json record 3: not-an-object" in lines
    assert str(tmp_path) not in "\n".join(lines)  # the base name, not the whole path


def test_input_error_still_prints_the_object_and_exits_1(pmem_env, tmp_path: Path) -> None:
    good = one_conversation("kept", "t", [("user", "hello"), ("assistant", "hi")])
    text = json.dumps([good, good | {"id": "cut"}])
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) - 40], encoding="utf-8")  # cut off inside record 1
    out, err = pmem_import(str(path), "--source", "chatgpt", code=1)
    assert_contract(out)
    assert out["conversations"]["new"] == 1  # what was read before the damage is kept
    [e] = out["errors"]
    assert Path(e["file"]).name == "cut.json" and e["record"] == 1
    assert any(line.startswith("error: cut.json record 1:") for line in err.splitlines())
    assert "Traceback" not in err

    missing, err = pmem_import(str(tmp_path / "nope.json"), code=1)
    assert_contract(missing)
    assert missing["errors"][0]["reason"] == "not-found" and "error: nope.json" in err
    unknown = tmp_path / "notes.txt"
    unknown.write_text("just text", encoding="utf-8")
    out, err = pmem_import(str(unknown), code=1)
    assert out["errors"][0]["reason"] == "unknown-format" and "error: notes.txt" in err


def test_a_source_the_file_contradicts_is_refused_before_reading(pmem_env, tmp_path: Path) -> None:
    """Issue 28, item 2: `pmem import chatgpt-export --source claude` is refused as backfill
    refuses it (importers.check_source), not read as 'bad' Claude records (exit 3 before)."""
    convs = [
        one_conversation(f"w{i}", "t", [("user", "hello"), ("assistant", "hi")]) for i in range(3)
    ]
    path = chatgpt_export(tmp_path / "conversations.json", convs)
    out, err = pmem_import(str(path), "--source", "claude", code=1)
    assert_contract(out)
    assert out["conversations"] == {"new": 0, "changed": 0, "unchanged": 0, "quarantined": 0}
    assert [e["reason"] for e in out["errors"]] == ["wrong-source"]
    assert out["error"] == "error" and out["exit_code"] == 1
    assert "ChatGPT" in out["message"] and "--source chatgpt" in out["message"]
    assert "Claude.ai" in out["hint"] and "--source chatgpt" in err
    # quarantined records: exit 3, and the object says so in the same four keys
    mixed = chatgpt_export(tmp_path / "mixed.json", [convs[0], 42])
    out, _ = pmem_import(str(mixed), "--source", "chatgpt", code=3)
    assert (out["error"], out["exit_code"]) == ("quarantined", 3) and "quarantine" in out["hint"]


@pytest.mark.needs_shared
def test_skipped_files_are_counted_by_reason(pmem_env, tmp_path: Path) -> None:
    out, _ = pmem_import(str(CODEX), "--source", "codex", code=0)
    others = [p for p in CODEX.rglob("*") if p.is_file() and not p.name.startswith("rollout-")]
    assert out["skipped"] == {"not-a-rollout-file": len(others)} and len(others) >= 3
    assert out["conversations"]["new"] == 3

    folder = tmp_path / "chatgpt-export"
    folder.mkdir()
    shutil.copy(SUBSET, folder / "conversations.json")  # a copy in tmp, not in the repo
    for name in ("chat.html", "user.json", "message_feedback.json"):
        (folder / name).write_text("{}", encoding="utf-8")
    out, err = pmem_import(str(folder), "--source", "chatgpt", code=0)
    assert out["skipped"] == {"not-a-conversations-file": 3}
    assert "skipped 3 not-a-conversations-file" in err

    tree = tmp_path / "claude-projects" / "-tmp-x"
    tree.mkdir(parents=True)
    shutil.copy(REAL / "claude-code" / "session-9eda1058.jsonl", tree / "9eda1058.jsonl")
    (tree / "notes.md").write_text("x", encoding="utf-8")
    (tree / "history.jsonl").write_text("{}\n", encoding="utf-8")
    out, _ = pmem_import(str(tmp_path / "claude-projects"), "--source", "claude-code", code=0)
    assert out["skipped"] == {"not-a-transcript-file": 1, "prompt-history-file": 1}


@pytest.mark.needs_shared
def test_progress_counts_bytes_and_conversations(db) -> None:
    from flows.importing import run_import
    from store.ledger import Ledger

    seen = []
    stats = run_import(
        Ledger(db),
        "chatgpt",
        str(SUBSET),
        on_progress=lambda p: seen.append((p.bytes_read, p.bytes_total, p.conversations)),
    )
    size = SUBSET.stat().st_size
    assert seen[-1] == (size, size, 6)
    assert [c for _, _, c in seen] == sorted(c for _, _, c in seen)
    assert stats["bytes_read"] == size


@pytest.mark.needs_shared
def test_a_failed_batch_leaves_whole_conversations_and_a_rerun_finishes(
    db, db_url, monkeypatch
) -> None:
    from flows.importing import run_import
    from store.ledger import Ledger

    ledger = Ledger(db)
    calls = {"n": 0}
    lock = threading.Lock()
    real = Ledger.write_batch

    def failing(self, *args, **kwargs):  # the second batch dies mid-way (after its COPY)
        with lock:  # the commit stage runs batches in two threads
            calls["n"] += 1
            mine = calls["n"]
        if mine == 2:
            import store.ledger as sl

            original = sl._copy_new
            dying = threading.get_ident()  # the commit stage runs batches in two threads

            def copy_then_die(*a, **k):
                original(*a, **k)
                if threading.get_ident() == dying:
                    raise RuntimeError("power cut")

            monkeypatch.setattr(sl, "_copy_new", copy_then_die)
            try:
                return real(self, *args, **kwargs)
            finally:
                monkeypatch.setattr(sl, "_copy_new", original)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, "write_batch", failing)
    with pytest.raises(RuntimeError):
        run_import(ledger, "chatgpt", str(SUBSET), batch_conversations=2)
    with psycopg.connect(db_url) as conn:
        convs = conn.execute("SELECT count(*) FROM source_conversations").fetchone()[0]
        orphans = conn.execute(
            """SELECT count(*) FROM source_messages m WHERE NOT EXISTS
               (SELECT 1 FROM prefilter_decisions d WHERE d.conversation_key = m.conversation_key)"""
        ).fetchone()[0]
    # whole batches only: the first, and the third when the other commit thread had taken it
    # before the second died; nothing of the second
    assert convs in (2, 4) and orphans == 0
    monkeypatch.setattr(Ledger, "write_batch", real)
    stats = run_import(ledger, "chatgpt", str(SUBSET), batch_conversations=2)
    assert (stats["conversations_unchanged"], stats["conversations_new"]) == (convs, 6 - convs)


@pytest.mark.needs_shared
def test_the_recall_index_is_built_alongside_in_worker_processes(db, monkeypatch) -> None:
    """`pmem import` indexes the messages while it stores the ledger, tokens computed in worker
    processes: every person and assistant message ends in the index with the tokens this process
    would compute, and nothing is left in the queue for the index step after."""
    from core.textsearch import index_tokens_many, tsvector_literal
    from flows.importing import run_import
    from store.ledger import Ledger

    monkeypatch.setenv("PMEM_INDEX_WORKERS", "2")
    stats = run_import(
        Ledger(db), "chatgpt", str(SUBSET), batch_conversations=2, index_messages=True
    )
    with db.connection() as conn:
        want = conn.execute(
            "SELECT count(*) FROM source_messages WHERE channel IN ('person', 'assistant')"
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT text, tokens::text FROM message_search ORDER BY message_key"
        ).fetchall()
        pending = conn.execute("SELECT count(*) FROM message_search_pending").fetchone()[0]
        sample = [t for t, _ in rows[:: max(1, len(rows) // 8)]]
        expected = [
            conn.execute("SELECT array_to_tsvector(%s::text[])::text", (toks,)).fetchone()[0]
            for toks in index_tokens_many(sample)
        ]
    assert stats["indexed_messages"] == want == len(rows) > 50 and pending == 0
    stored = dict(rows)
    assert [stored[t] for t in sample] == expected and any("'" in e for e in expected)
    odd = ["it's", "a\\b", "'", "x y", "決める", "a:1", "b:2A"]  # what the workers send as text
    with db.connection() as conn:
        same = conn.execute(
            "SELECT %s::tsvector = array_to_tsvector(%s::text[])", (tsvector_literal(odd), odd)
        ).fetchone()[0]
    assert same


@pytest.mark.needs_shared
def test_a_failure_of_the_index_alongside_never_fails_the_import(db, monkeypatch) -> None:
    from flows.importing import run_import
    from search.reader import SearchStore
    from store.ledger import Ledger

    def broken(self, *args, **kwargs):
        raise RuntimeError("index down")

    monkeypatch.setattr(SearchStore, "sync_messages", broken)
    monkeypatch.setattr("flows.importing._index_rows", broken)  # the rows stored with the batch
    monkeypatch.setenv("PMEM_INDEX_WORKERS", "0")
    stats = run_import(Ledger(db), "chatgpt", str(SUBSET), index_messages=True)
    assert stats["conversations_new"] == 6 and stats["indexed_messages"] == 0
    with db.connection() as conn:  # the queue keeps them for the index step after the import
        assert conn.execute("SELECT count(*) FROM message_search_pending").fetchone()[0] > 50


@pytest.mark.needs_shared
def test_a_reimport_starts_no_index_workers(db, monkeypatch) -> None:
    """Nothing new to index: the import starts no worker processes (a re-import stays cheap)."""
    import store.index as upkeep
    from flows.importing import run_import
    from store.ledger import Ledger

    monkeypatch.setenv("PMEM_INDEX_WORKERS", "2")
    started: list[int] = []
    real = upkeep.token_pool
    monkeypatch.setattr(upkeep, "token_pool", lambda n: started.append(n) or real(n))
    first = run_import(Ledger(db), "chatgpt", str(SUBSET), index_messages=True)
    assert first["indexed_messages"] > 50 and started == [2]
    stats = run_import(Ledger(db), "chatgpt", str(SUBSET), index_messages=True)
    assert (
        stats["conversations_unchanged"] == 6 and stats["indexed_messages"] == 0 and started == [2]
    )
