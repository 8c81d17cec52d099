"""Saying so whenever a run waits on a budget or a rate limit: what it waits for and until when.

Every place that sleeps for a budget or a rate limit (the memory API's request budget of an HTTP
committer, a 429's Retry-After, a provider's retry) calls :func:`announce` first. The CLI installs
a hook that prints the line on the terminal (above the progress bars; with output piped, as a
plain line on stderr, so the log of a piped run has it too); without a hook the line is logged as
a warning on ``pmem.wait``. Lines carry names, counts and times only, never private text.

Repeats are damped: while a wait on the same thing is announced and not yet over, or was
announced less than ``REPEAT_SECONDS`` ago, a new wait is announced only when it ends much later.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

_log = logging.getLogger("pmem.wait")

MIN_SECONDS = 1.0  # shorter waits are not worth a line
REPEAT_SECONDS = 30.0

WaitHook = Callable[[str], None]
_hooks: list[WaitHook] = []
_last: dict[str, tuple[float, float]] = {}  # what -> (announced at, until), monotonic
_lock = threading.Lock()


def set_wait_hook(hook: WaitHook | None) -> None:
    """Where announcements go in this process (the CLI's terminal); None: the log only."""
    with _lock:
        _hooks.clear()
        _last.clear()
        if hook is not None:
            _hooks.append(hook)


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def wait_line(what: str, seconds: float, now: datetime | None = None) -> str:
    """``waiting for WHAT until 12:03:15 (4 min 10 s)``: local wall-clock time."""
    now = now or datetime.now().astimezone()
    until = now + timedelta(seconds=seconds)
    stamp = until.strftime("%H:%M:%S" if until.date() == now.date() else "%Y-%m-%d %H:%M:%S")
    return f"waiting for {what} until {stamp} ({_duration(seconds)})"


def announce(what: str, seconds: float) -> bool:
    """Say that this process now waits ``seconds`` for ``what``; True when a line was emitted."""
    if seconds < MIN_SECONDS:
        return False
    now = time.monotonic()
    until = now + seconds
    with _lock:
        last = _last.get(what)
        if last is not None:
            announced_at, last_until = last
            recent = now < last_until or now - announced_at < REPEAT_SECONDS
            if recent and until <= last_until + REPEAT_SECONDS:
                return False
        _last[what] = (now, until)
        hooks = list(_hooks)
    line = wait_line(what, seconds)
    if hooks:
        _log.info("%s", line)
        for hook in hooks:
            hook(line)
    else:
        _log.warning("%s", line)
    return True
