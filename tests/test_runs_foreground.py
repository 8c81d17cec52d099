"""A run in the foreground: one at a time per data dir (state/runlock.py), waits said out loud
(core/waits.py), the budget only where it belongs (HTTP committers), Ctrl-C as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import pytest

from core import waits
from core.errors import RateLimitStop
from core.settings import Settings
from state import runlock
from state.budget import MemoryWindow, SlidingWindowLimiter, Unlimited
from state.concurrency import AdaptiveConcurrency
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"

HOLD = """
import sys, time
from pathlib import Path
from state import runlock
with runlock.hold(Path(sys.argv[1]), "pmem backfill --source chatgpt --export big.zip") as lock:
    lock.note_run("run-held-1")
    print("HELD", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def lines() -> list[str]:
    got: list[str] = []
    waits.set_wait_hook(got.append)
    yield got
    waits.set_wait_hook(None)


def _holder(data_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(data_dir)], cwd=PROJECT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "HELD"
    return proc


# ---------------------------------------------------------------- the run lock


def test_second_run_is_refused_naming_the_holder_and_a_dead_holder_is_taken_over(tmp_path: Path):
    proc = _holder(tmp_path)
    try:
        with pytest.raises(runlock.RunLocked) as err:
            runlock.RunLock(tmp_path, "pmem demo").acquire()
        text = f"{err.value} {err.value.hint}"
        assert (
            f"pid {proc.pid}" in text and "pmem backfill --source chatgpt --export big.zip" in text
        )
        assert "run run-held-1" in text and "pmem status run-held-1" in text
        assert runlock.read_holder(tmp_path).pid == proc.pid
    finally:
        proc.kill()  # a kill -9: the holder cannot clean up; its pid stays in the file
        proc.wait()
    assert json.loads((tmp_path / runlock.LOCK_FILE).read_text())["pid"] == proc.pid
    assert runlock.read_holder(tmp_path) is None  # its process is gone
    with runlock.hold(tmp_path, "pmem demo") as lock:
        assert lock.took_over is not None and lock.took_over.pid == proc.pid
        assert runlock.read_holder(tmp_path).command == "pmem demo"
    assert (tmp_path / runlock.LOCK_FILE).read_text() == ""  # released: the holder is cleared
    with runlock.hold(tmp_path, "pmem demo") as lock:
        assert lock.took_over is None


def test_cli_backfill_refuses_a_second_run_before_anything_starts(tmp_path: Path, pmem_env):
    data = Path(pmem_env["PMEM_DATA_DIR"])
    proc = _holder(data)
    try:
        env = {
            **os.environ,
            **pmem_env,
            "PREFECT_API_URL": "http://127.0.0.1:9/api",
        }  # never reached
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", "backfill", "--export", str(DEMO)],
            env=env,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        proc.kill()
        proc.wait()
    assert out.returncode == 1, out.stderr
    assert f"another pmem run is in progress in this data dir: pid {proc.pid}" in out.stderr
    assert "`pmem status run-held-1`" in out.stderr and "Traceback" not in out.stderr


# ---------------------------------------------------------------- waits said out loud


def test_a_budget_wait_says_what_it_waits_for_and_until_when(lines: list[str]):
    now = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    lim = SlidingWindowLimiter(
        max_wait=600, sleep=sleep, backend=MemoryWindow(2, 20, clock=lambda: now[0])
    )
    for _ in range(6):
        lim.acquire("r1")
    assert sum(slept) >= 40 and lim.waited >= 40
    assert lines, "the wait was not announced"
    assert lines[0].startswith("waiting for the memory API budget (2 requests per 20 s) until ")
    assert lines[0].endswith("(20 s)")
    assert len(lines) <= 3  # damped: not one line per 5 s sleep


def test_a_429_pause_and_a_long_wait_are_announced_and_short_ones_are_not(lines: list[str]):
    cc = AdaptiveConcurrency(max_wait=600, name="the model provider's rate limit")
    cc.on_rate_limited(0.2)
    assert lines == []
    cc.on_rate_limited(42)
    assert len(lines) == 1 and lines[0].startswith(
        "waiting for the model provider's rate limit (429, Retry-After 42 s) until"
    )
    with pytest.raises(RateLimitStop):
        cc.on_rate_limited(3600)


def test_wait_line_names_the_clock_time():
    from datetime import datetime

    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert waits.wait_line("x", 250, now) == "waiting for x until 12:04:10 (4 min 10 s)"
    assert (
        waits.wait_line("x", 86400, now) == "waiting for x until 2026-12-02 12:00:00 (24 h 00 min)"
    )


# ---------------------------------------------------------------- the budget where it belongs


def test_in_process_commits_are_not_throttled_and_an_http_committer_paces_itself(
    pmem_env, monkeypatch
):
    from flows.pipeline import Pipeline
    from store.budget import PgWindow

    monkeypatch.setenv("PMEM_COMMIT_BUDGET", "1/600s")
    p = Pipeline.open(Settings())
    try:
        assert isinstance(p.limiter.backend, Unlimited) and p.limiter.unlimited
        for _ in range(50):  # far beyond 1 per 600 s: nothing waits, nothing stops
            p.limiter.acquire("r")
        assert p.limiter.requests == 50 and p.limiter.waited == 0
    finally:
        p.close()
    monkeypatch.setenv("PMEM_MEMORY_URL", "http://127.0.0.1:9")
    p = Pipeline.open(Settings())
    try:
        assert isinstance(p.limiter.backend, PgWindow) and p.limiter.limit == 1
    finally:
        p.close()


def test_resume_command_drops_redraft_and_quotes():
    from cli.foreground import resume_command

    assert (
        resume_command(["backfill", "--export", "my export.zip", "--redraft"])
        == "pmem backfill --export 'my export.zip'"
    )
