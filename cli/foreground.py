"""A run in the foreground of a terminal (`pmem backfill`, `pmem demo`, `pmem reimport`): one at a
time per data dir, its waits said out loud, Ctrl-C as one line.

* the data dir's run lock (``state/runlock.py``): a second run stops at once, naming the holder
  (pid, command, run id) and how to follow its progress;
* every wait on a budget or a rate limit prints ``waiting for … until HH:MM:SS (…)`` on stderr
  (``core/waits.py``): above the progress bars on a terminal, a plain line when piped;
* Ctrl-C: the first one stops the run. Logging and worker-thread tracebacks are silenced at once
  (no ``PoolClosed`` storm, also with ``-v``), the run is marked stopped on the way out, the
  progress bars are cleared, and ONE line says what was kept and the exact command that resumes;
  then the process ends with exit 130 without waiting for worker threads. A second Ctrl-C exits
  at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from rich.markup import escape

from cli.app import err_console
from core.display import for_terminal
from core.settings import Settings
from core.waits import set_wait_hook
from state import runlock

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
_NOT_REPEATED = {"--redraft"}  # flags that start something new: resuming drops them


def command_line(argv: list[str] | None = None) -> str:
    """The command as the user can type it again: ``pmem`` and the arguments (quoted)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["pmem", *args])


def resume_command(argv: list[str] | None = None) -> str:
    args = [a for a in (sys.argv[1:] if argv is None else argv) if a not in _NOT_REPEATED]
    return shlex.join(["pmem", *args])


def _print_wait(line: str) -> None:
    err_console.print(f"[yellow]{escape(for_terminal(line))}[/]", highlight=False)


def _silence() -> None:
    """From the first Ctrl-C on, nothing but our one line: no log records, no thread tracebacks."""
    logging.disable(logging.CRITICAL)
    threading.excepthook = lambda _args: None
    sys.excepthook = lambda *_a: None


def _stop_bars() -> None:
    """Clear the progress bars (and give the cursor back) before the last line."""
    for live in list(reversed(getattr(err_console, "_live_stack", []))):
        with contextlib.suppress(Exception):
            live.stop()
    with contextlib.suppress(Exception):
        err_console.show_cursor(True)


def interrupted_line(settings: Settings, run_id: str | None, resume: str) -> str:
    """The one line after Ctrl-C: what was kept, and the command that resumes."""
    kept = "the run had not started yet, nothing changed"
    if run_id:
        with contextlib.suppress(Exception):
            from flows.progress import kept_words

            kept = kept_words(settings, run_id)
    return f"stopped (Ctrl-C): {kept}; resume with: {resume}"


def _warm_up(settings: Settings) -> None:
    """A fresh data dir starts two servers: launch Prefect's in the background first, then start
    the database while it boots (``_prefect_env`` waits for Prefect afterwards). Best effort: any
    problem here is met again, and reported, where the run needs the server."""
    if os.environ.get("PMEM_PREFECT", "managed").strip().lower() not in ("", "managed"):
        return
    with contextlib.suppress(Exception):
        from flows.prefect_server import launch

        launch(settings)
    with contextlib.suppress(Exception):
        from store.db import Database

        Database.open(settings).close()


@contextlib.contextmanager
def foreground_run(settings: Settings) -> Iterator[runlock.RunLock]:
    """Hold the data dir's run lock, announce waits, and turn Ctrl-C into one line + exit 130."""
    resume = resume_command()
    stopping = threading.Event()

    def on_sigint(_signum: int, _frame: Any) -> None:
        if stopping.is_set():  # the second Ctrl-C: no more waiting
            os._exit(EXIT_INTERRUPTED)
        stopping.set()
        _silence()
        raise KeyboardInterrupt

    with runlock.hold(settings.data_dir, command_line()) as lock:
        if lock.took_over is not None:
            err_console.print(
                f"(pid {lock.took_over.pid} left this data dir's run lock behind when it "
                "ended; taken over)"
            )
        set_wait_hook(_print_wait)
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, on_sigint) if main else None
        try:
            _warm_up(settings)
            yield lock
        except KeyboardInterrupt:
            _silence()
            _stop_bars()
            line = interrupted_line(settings, lock.run_id, resume)
            err_console.print(f"[yellow]{escape(for_terminal(line))}[/]", highlight=False)
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            lock.release()
            # worker threads may still be inside a batch: their work is transactional and
            # idempotent (a kill -9 there is a tested resume point); do not wait for them
            os._exit(EXIT_INTERRUPTED)
        finally:
            set_wait_hook(None)
            if main:
                signal.signal(signal.SIGINT, previous)
