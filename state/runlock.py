"""One in-process run at a time per data dir: ``<data dir>/run.lock``.

A backfill, the demo or a re-import holds an exclusive ``flock`` on the file for as long as it
runs, and writes its holder into it (0600): pid, process start time, the command, when it
started and, once known, its run id. A second run in the same data dir does not wait and does
not share the first one's run: it stops at once with :class:`RunLocked`, naming the holder and how
to follow its progress.

The kernel drops a flock when its process dies (a kill -9, a power cut), so a lock a dead
process left behind is free and simply taken over; its old holder is reported
(``RunLock.took_over``). A file whose lock is held by a pid that is gone (a pid reused after a
reboot, a file system without flock) is also taken over. Pool runs against a shared memory API
coordinate through PostgreSQL instead (the scale-out issue), not through this file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import PmemError

_log = logging.getLogger("pmem.runlock")

LOCK_FILE = "run.lock"


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    started_at: str
    host: str = ""
    start_ticks: int | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        try:
            d = json.loads(text)
            return cls(
                pid=int(d["pid"]),
                command=str(d.get("command", "")),
                started_at=str(d.get("started_at", "")),
                host=str(d.get("host", "")),
                start_ticks=d.get("start_ticks"),
                run_id=d.get("run_id"),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def since(self) -> str:
        try:
            return (
                datetime.fromisoformat(self.started_at).astimezone().strftime("%Y-%m-%d %H:%M:%S")
            )
        except ValueError:
            return self.started_at or "?"


class RunLocked(PmemError):
    """Another run holds this data dir."""

    def __init__(self, holder: Holder | None, path: Path) -> None:
        if holder is None:
            message = f"another pmem run holds this data dir ({path})"
        else:
            run = f", run {holder.run_id}" if holder.run_id else ""
            message = (
                f"another pmem run is in progress in this data dir: pid {holder.pid} "
                f"`{holder.command}` since {holder.since()}{run}"
            )
        follow = f"`pmem status {holder.run_id}`" if holder and holder.run_id else "`pmem status`"
        super().__init__(
            message,
            hint=f"one run at a time per data dir: follow its progress with {follow} or in the Prefect UI "
            "(`pmem prefect status` prints its address); run this again when it has finished"
            + (
                f", or stop it with Ctrl-C in its terminal (or `kill -INT {holder.pid}`)"
                if holder
                else ""
            ),
        )
        self.holder = holder


def _process_start(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None


def _alive(holder: Holder) -> bool:
    if holder.host and holder.host != socket.gethostname():
        return True  # another machine's process: we cannot tell, assume it runs
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    start = _process_start(holder.pid)
    return holder.start_ticks is None or start is None or start == holder.start_ticks


class RunLock:
    def __init__(self, data_dir: Path, command: str) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self.command = command
        self.took_over: Holder | None = None  # the stale holder found in the file
        self._fd: int | None = None
        self._holder: Holder | None = None

    @property
    def run_id(self) -> str | None:
        return self._holder.run_id if self._holder else None

    def acquire(self) -> RunLock:
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = Holder.from_text(self._read(fd))
                if holder is not None and not _alive(holder):
                    # held, yet by a process that is gone: the lock cannot be ours to take; wait
                    # briefly for the kernel to release it (a process exiting right now)
                    for _ in range(20):
                        time.sleep(0.1)
                        with contextlib.suppress(BlockingIOError):
                            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                            break
                    else:
                        raise RunLocked(holder, self.path) from None
                else:
                    raise RunLocked(holder, self.path) from None
            previous = Holder.from_text(self._read(fd))
            if previous is not None and previous.pid != os.getpid():
                self.took_over = previous  # its process ended without releasing (killed)
                _log.warning("took over the run lock of pid %s, which is gone", previous.pid)
            self._fd = fd
            self._write(
                Holder(
                    pid=os.getpid(),
                    command=self.command,
                    started_at=datetime.now(UTC).isoformat(timespec="seconds"),
                    host=socket.gethostname(),
                    start_ticks=_process_start(os.getpid()),
                )
            )
            return self
        except BaseException:
            if self._fd is None:
                os.close(fd)
            raise

    def note_run(self, run_id: str) -> None:
        """Record the run id, so a second run can name it (and `pmem status RUN_ID`)."""
        if self._fd is not None and self._holder is not None and self._holder.run_id != run_id:
            self._write(Holder(**{**self._holder.to_dict(), "run_id": run_id}))

    def release(self) -> None:
        if self._fd is None:
            return
        import fcntl

        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    @staticmethod
    def _read(fd: int) -> str:
        os.lseek(fd, 0, os.SEEK_SET)
        return os.read(fd, 65536).decode(errors="replace")

    def _write(self, holder: Holder) -> None:
        assert self._fd is not None
        data = json.dumps(holder.to_dict(), sort_keys=True).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        self._holder = holder


_held: list[RunLock] = []


@contextlib.contextmanager
def hold(data_dir: Path, command: str) -> Iterator[RunLock]:
    """Hold this data dir's run lock for the block (RunLocked when another run holds it)."""
    lock = RunLock(data_dir, command).acquire()
    _held.append(lock)
    try:
        yield lock
    finally:
        _held.remove(lock)
        lock.release()


def current() -> RunLock | None:
    """The lock this process holds, if any."""
    return _held[-1] if _held else None


def note_run(run_id: str) -> None:
    """Record ``run_id`` in the lock this process holds (nothing when it holds none)."""
    lock = current()
    if lock is not None:
        lock.note_run(run_id)


def read_holder(data_dir: Path) -> Holder | None:
    """Who holds the data dir's run lock now (None: nobody, or a holder that is gone)."""
    try:
        holder = Holder.from_text((Path(data_dir) / LOCK_FILE).read_text())
    except OSError:
        return None
    return holder if holder is not None and _alive(holder) else None
