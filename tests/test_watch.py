"""The incremental re-index (issue 17, item 3; seed 004): `pmem watch`, `pmem reindex --changed`.

- a pass re-imports only the file that changed: counted by the ledger's writes (``write_batch``
  calls and ``import_runs`` rows), on the real PostgreSQL;
- an unchanged folder is a no-op: no file is read, nothing is written;
- a file whose mtime moved but whose bytes did not is not imported; a rewritten one is read whole;
- a pass holds the data dir's run lock;
- the CLI: `pmem watch --once --json` and `pmem reindex --changed --json` print one object.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from core.settings import get_settings
from store.db import Database
from store.ledger import Ledger
from tests.conftest import PROJECT

SID = "5e551017-0000-4000-8000-00000000000"


# ---------------------------------------------------------------- helpers


def cc_line(sid: str, i: int, text: str) -> dict[str, Any]:
    """One Claude Code transcript line (a user or an assistant turn, chained by parentUuid)."""
    kind = "user" if i % 2 == 0 else "assistant"
    content: Any = text if kind == "user" else [{"type": "text", "text": text}]
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=f"msg_{sid}_{i}", type="message", model="claude-x")
    return {
        "parentUuid": f"{sid}-u{i - 1}" if i else None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "sessionId": sid,
        "version": "2.1.30",
        "type": kind,
        "uuid": f"{sid}-u{i}",
        "timestamp": f"2026-02-01T10:{i:02d}:00.000Z",
        "message": message,
    }


def write_lines(path: Path, lines: list[dict[str, Any]], *, append: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab" if append else "wb") as fp:
        fp.write(b"".join(json.dumps(x, ensure_ascii=False).encode() + b"\n" for x in lines))
    return path


def transcript(folder: Path, n: int, turns: int = 4) -> Path:
    sid = f"{SID}{n}"
    return write_lines(
        folder / f"session-{n}.jsonl",
        [cc_line(sid, i, f"turn {i} of session {n}: 引っ越しの相談") for i in range(turns)],
    )


def bump_mtime(path: Path, seconds: float = 5.0) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + int(seconds * 1e9)))


class WriteCounter:
    """Counts the ledger's batch writes (and the conversations in them) of a pass."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.keys: list[str] = []
        original = Ledger.write_batch

        def counted(ledger: Ledger, convs: list[Any], *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.keys += [c.key for c in convs]
            return original(ledger, convs, *args, **kwargs)

        monkeypatch.setattr(Ledger, "write_batch", counted)


def passes(env: dict[str, str], paths: list[str] | None, **opts: Any) -> dict[str, Any]:
    from flows.watch import PassOptions, run_pass

    return run_pass(get_settings(), paths, PassOptions(embed=False, **opts))


def snapshot(db_url: str) -> dict[str, Any]:
    """What a pass may write: ledger rows, import runs, the watch state."""
    db = Database(db_url)
    try:
        with db.connection() as conn:
            return {
                "import_runs": conn.execute("SELECT count(*) FROM import_runs").fetchone()[0],
                "messages": conn.execute("SELECT count(*) FROM source_messages").fetchone()[0],
                "conversations": conn.execute(
                    "SELECT conversation_key, content_hash, message_count, last_import_id FROM source_conversations "
                    "ORDER BY 1"
                ).fetchall(),
                "watched": conn.execute(
                    "SELECT path, size, mtime_ns, content_hash, read_to, imports, changed_at FROM watched_files "
                    "ORDER BY 1"
                ).fetchall(),
                "pending": conn.execute("SELECT count(*) FROM message_search_pending").fetchone()[
                    0
                ],
            }
    finally:
        db.close()


def imports_of(db_url: str) -> list[str]:
    db = Database(db_url)
    try:
        with db.connection() as conn:
            return [
                r[0]
                for r in conn.execute("SELECT file FROM import_runs ORDER BY started_at").fetchall()
            ]
    finally:
        db.close()


@contextlib.contextmanager
def held_elsewhere(data_dir: Path) -> Iterator[int]:
    """Another process (a backfill, say) holds the data dir's run lock for the block."""
    code = (
        "import pathlib, time\nfrom state.runlock import hold\n"
        f"with hold(pathlib.Path({str(data_dir)!r}), 'pmem backfill'):\n"
        "    print('held', flush=True)\n    time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=PROJECT
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def env(pmem_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.delenv("PMEM_WATCH_PATHS", raising=False)
    return pmem_env


# ---------------------------------------------------------------- the pass


def test_a_pass_reimports_only_the_changed_file_and_an_unchanged_folder_is_a_no_op(
    env: dict[str, str], db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "logs"
    files = [transcript(folder, n) for n in range(3)]
    (folder / "notes.txt").write_text("not an export")
    (folder / ".hidden.jsonl").write_text("{}\n")

    first = passes(env, [str(folder)])
    assert first["status"] == "complete"
    assert first["files"]["new"] == 3 and first["files"]["unknown-format"] == 1
    assert first["files_checked"] == 4  # the hidden file is not looked at
    assert first["messages_new"] == 12 and first["indexed_messages"] == 12
    assert sorted(imports_of(db_url)) == sorted(str(f) for f in files)

    # one transcript grows by two turns: only it is read and written
    grown = files[1]
    write_lines(grown, [cc_line(f"{SID}1", i, f"turn {i}: 追記") for i in (4, 5)], append=True)
    bump_mtime(grown)
    before = snapshot(db_url)
    writes = WriteCounter(monkeypatch)
    second = passes(env, None)  # no PATH: the one the first pass watched
    assert second["paths"] == [str(folder.resolve())]
    assert second["files"]["grown"] == 1 and second["files"]["unchanged"] == 3
    assert second["files_imported"] == 1 and second["files_hashed"] == 1
    assert writes.calls == 1 and writes.keys == [f"claude-code:{SID}1"]
    assert imports_of(db_url)[len(files) :] == [str(grown)]
    assert second["messages_new"] == 2 and second["indexed_messages"] == 2
    after = snapshot(db_url)
    assert after["messages"] == before["messages"] + 2 and after["pending"] == 0
    changed = [
        a for a, b in zip(after["conversations"], before["conversations"], strict=True) if a != b
    ]
    assert [c[0] for c in changed] == [f"claude-code:{SID}1"]
    assert changed[0][2] == 6  # the whole conversation, not just the two new turns

    # nothing changed: nothing is read, nothing is written
    writes.calls = 0
    third = passes(env, [str(folder)])
    assert third["files"]["unchanged"] == 4 and third["files_imported"] == 0
    assert third["files_hashed"] == 0 and third["bytes_read"] == 0
    assert writes.calls == 0
    assert snapshot(db_url) == after


def test_a_touched_file_is_hashed_not_imported_and_a_rewritten_one_is_read_whole(
    env: dict[str, str], db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "logs"
    a, b = transcript(folder, 1), transcript(folder, 2)
    passes(env, [str(folder)])
    bump_mtime(a)  # same bytes, a new mtime (a backup tool, `touch`)
    write_lines(
        b, [cc_line(f"{SID}9", i, f"rewritten {i}") for i in range(2)]
    )  # shorter: rewritten
    writes = WriteCounter(monkeypatch)
    s = passes(env, [str(folder)])
    assert s["files"]["touched"] == 1 and s["files"]["changed"] == 1 and s["files_imported"] == 1
    assert writes.keys == [f"claude-code:{SID}9"]
    assert [i["read_from"] for i in s["imported"]] == [0]
    again = passes(env, [str(folder)])  # the touched file's new mtime was recorded
    assert again["files"]["unchanged"] == 2 and again["files_hashed"] == 0


def test_verify_hashes_unchanged_files_and_catches_a_rewrite_that_kept_size_and_mtime(
    env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    path = transcript(tmp_path / "logs", 1)
    passes(env, [str(path)])
    st = path.stat()
    data = path.read_bytes().replace(b"turn 3 of", b"TURN 3 of")  # same length
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert passes(env, [str(path)])["files"]["unchanged"] == 1  # size and mtime say nothing moved
    s = passes(env, [str(path)], verify=True)
    assert s["files"]["changed"] == 1 and s["files_imported"] == 1
    assert s["conversations_changed"] == 1  # read again (a stored message is never rewritten)


def test_a_pass_holds_the_run_lock_and_is_refused_while_another_run_holds_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    from flows.watch import PassOptions, run_pass
    from state import runlock
    from state.runlock import RunLocked

    path = transcript(tmp_path / "logs", 1)
    settings = get_settings()
    seen: list[Any] = []
    opts = PassOptions(
        embed=False, on_event=lambda kind, _d: seen.append(runlock.read_holder(settings.data_dir))
    )
    run_pass(settings, [str(path)], opts, command="pmem watch logs")
    assert seen and all(
        h is not None and h.pid == os.getpid() and h.command == "pmem watch logs" for h in seen
    )
    assert runlock.read_holder(settings.data_dir) is None  # released after the pass

    with held_elsewhere(settings.data_dir) as pid:
        with pytest.raises(RunLocked) as err:
            passes(env, [str(path)])
        assert err.value.holder is not None and err.value.holder.pid == pid


def test_named_path_must_exist_and_something_must_be_watched(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from core.errors import ConfigError, InputError

    with pytest.raises(InputError, match="not found"):
        passes(env, [str(tmp_path / "nowhere")])
    with pytest.raises(ConfigError, match="nothing to watch"):
        passes(env, None)
    # a pass drafts nothing: a vendor model without its key (a cron or schedule environment) is no obstacle
    monkeypatch.setenv("PMEM_LLM", "openai:gpt-4o-mini")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert passes(env, [str(transcript(tmp_path / "logs", 1))])["messages_new"] == 4


# ---------------------------------------------------------------- the CLI


def test_cli_watch_once_and_reindex_changed_print_one_json_object(
    env: dict[str, str], tmp_path: Path
) -> None:
    from cli.main import app

    folder = tmp_path / "logs"
    transcript(folder, 1)
    runner = CliRunner()
    result = runner.invoke(app, ["watch", "--once", "--json", "--no-embed", str(folder)])
    assert result.exit_code == 0, (result.output, result.exception)
    body = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(result.stdout.strip().splitlines()) == 1
    assert body["files"]["new"] == 1 and body["messages_new"] == 4 and body["trigger"] == "watch"
    assert {
        "pass_id",
        "status",
        "paths",
        "files_checked",
        "files_imported",
        "indexed_messages",
        "embedded_messages",
        "imported",
        "errors",
        "elapsed_seconds",
    } <= body.keys()

    write_lines(folder / "session-1.jsonl", [cc_line(f"{SID}1", 4, "もう一つ")], append=True)
    result = runner.invoke(app, ["reindex", "--changed", "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    body = json.loads(result.stdout.strip().splitlines()[-1])
    assert (
        body["trigger"] == "reindex" and body["files"]["grown"] == 1 and body["messages_new"] == 1
    )
    result = runner.invoke(app, ["reindex", "--changed", "--json"])
    body = json.loads(result.stdout.strip().splitlines()[-1])
    assert body["files_imported"] == 0 and body["files"]["unchanged"] == 1

    result = runner.invoke(app, ["watch", "--once", str(tmp_path / "missing")])
    assert result.exit_code == 1 and "not found" in result.output


# ---------------------------------------------------------------- the Prefect deployment


def test_the_deployment_passes_every_10_minutes_and_a_locked_pass_is_skipped(
    env: dict[str, str], tmp_path: Path
) -> None:
    from flows.watch_flow import build_deployment, deployment_name, watch
    from state import runlock

    path = transcript(tmp_path / "logs", 1)
    settings = get_settings()
    dep = build_deployment(settings, [str(path)])
    assert dep.name == "every-10-minutes" == deployment_name(600)
    assert dep.schedules[0].schedule.interval.total_seconds() == 600
    assert dep.parameters == {"paths": [str(path)], "embed": True}
    assert deployment_name(90) == "every-90-seconds"

    # the flow's body: one pass holding the run lock; with the lock held elsewhere, skipped
    out = watch.fn(paths=[str(path)], embed=False)
    assert out["status"] == "complete" and out["trigger"] == "schedule" and out["files"]["new"] == 1
    with runlock.hold(settings.data_dir, "pmem backfill"):
        assert (
            watch.fn(paths=[str(path)], embed=False)["files"]["unchanged"] == 1
        )  # held by this process
    with held_elsewhere(settings.data_dir) as pid:
        skipped = watch.fn(paths=[str(path)], embed=False)
    assert skipped == {"status": "skipped", "reason": "run-locked", "holder_pid": pid}


# ---------------------------------------------------------------- seed 004's daily logs (jsonl-log)


def log_line(ts: str, role: str, text: str, session: str, kind: str = "text") -> dict[str, Any]:
    """Seed 004's seven fields."""
    rec = {
        "ts": ts,
        "actor": "me" if role == "user" else "claude",
        "role": role,
        "type": kind,
        "text": text,
        "model": "claude-x" if role == "assistant" else None,
        "session": session,
    }
    return rec


def daily(folder: Path, day: str, n: int = 4) -> Path:
    lines = [
        log_line(
            f"{day}T0{i}:00:00Z",
            "user" if i % 2 == 0 else "assistant",
            f"{day} の {i} 行目: ゼミ発表の準備",
            "s1" if i < 3 else "s2",
        )
        for i in range(n)
    ]
    return write_lines(folder / f"{day}.jsonl", lines)


def ledger_view(db_url: str, keys: list[str]) -> list[Any]:
    """The conversations' rows and messages as a full read would have to leave them."""
    db = Database(db_url)
    try:
        with db.connection() as conn:
            convs = conn.execute(
                "SELECT conversation_key, content_hash, message_count, drafting_chars, created_at, updated_at "
                "FROM source_conversations WHERE conversation_key = ANY(%s) ORDER BY 1",
                (keys,),
            ).fetchall()
            msgs = conn.execute(
                "SELECT message_key, conversation_key, position, role, channel, content_hash, created_at "
                "FROM source_messages WHERE conversation_key = ANY(%s) ORDER BY 1",
                (keys,),
            ).fetchall()
        return [convs, msgs]
    finally:
        db.close()


def test_a_daily_log_appended_to_while_watched_imports_only_the_new_lines(
    env: dict[str, str],
    db_url: str,
    db_factory: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.importing import run_import

    folder = tmp_path / "logs"
    days = [daily(folder, f"2026-03-0{d}") for d in (1, 2, 3)]
    first = passes(env, [str(folder)])
    assert first["files"]["new"] == 3 and first["messages_new"] == 12
    today = days[1]
    size = today.stat().st_size

    # the day goes on: two turns in session s1, one in a new session, and a line still being written
    more = [
        log_line("2026-03-02T10:00:00Z", "user", "追記: 発表は金曜日に決めた", "s1"),
        log_line("2026-03-02T10:01:00Z", "assistant", "了解です", "s1"),
        log_line("2026-03-02T11:00:00Z", "user", "new session", "s3", kind="meta"),
    ]
    write_lines(today, more, append=True)
    appended = today.stat().st_size - size
    with today.open("ab") as fp:
        fp.write(b'{"ts": "2026-03-02T12:00:00Z", "role": "user", "session": "s3", "text": "half')
    writes = WriteCounter(monkeypatch)
    runs_before = len(imports_of(db_url))
    s = passes(env, None)
    assert s["files"]["grown"] == 1 and s["files"]["unchanged"] == 2 and s["files_imported"] == 1
    assert writes.calls == 1
    assert sorted(writes.keys) == ["jsonl-log:s1:2026-03-02", "jsonl-log:s3:2026-03-02"]
    assert imports_of(db_url)[runs_before:] == [str(today)]
    (item,) = s["imported"]
    assert item["read_from"] == size and item["read_to"] == size + appended  # the half line waits
    assert s["bytes_read"] == appended
    assert s["messages_new"] == 3 and s["quarantined"] == 0
    assert s["indexed_messages"] == 2  # the meta line is machinery: in the ledger, not in recall
    assert s["conversations_changed"] == 1 and s["conversations_new"] == 1

    # the line is finished: the next pass reads from where this one stopped
    with today.open("ab") as fp:
        fp.write(b'"}\n')
    s = passes(env, None)
    assert s["files"]["grown"] == 1 and s["imported"][0]["read_from"] == size + appended
    assert s["messages_new"] == 1 and s["quarantined"] == 0

    # the ledger holds exactly what a full read of the grown file gives
    other = db_factory()
    fresh = Database(other)
    try:
        stats = run_import(Ledger(fresh), "jsonl-log", str(today))
        assert stats["quarantined"] == 0
    finally:
        fresh.close()
    keys = ["jsonl-log:s1:2026-03-02", "jsonl-log:s2:2026-03-02", "jsonl-log:s3:2026-03-02"]
    watched, full = ledger_view(db_url, keys), ledger_view(other, keys)
    assert len(watched[1]) == 8 and watched == full
