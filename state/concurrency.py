"""Adaptive concurrency: start at 3, drop one step (3 → 2 → 1) on every 429 and pause for its
Retry-After, climb back one step after a quiet stretch, never above the configured maximum.
One controller for the memory API and one for the LLM provider; both are this class."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from core.errors import RateLimitStop
from core.waits import announce


class AdaptiveConcurrency:
    def __init__(
        self,
        *,
        start: int = 3,
        maximum: int = 3,
        minimum: int = 1,
        quiet: float = 60.0,
        max_wait: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        name: str = "a rate limit",
    ) -> None:
        self.name = name  # what a wait is announced as (core.waits)
        self.maximum = max(1, maximum)
        self.minimum = max(1, min(minimum, self.maximum))
        self.limit = max(self.minimum, min(start, self.maximum))
        self.quiet, self.max_wait, self._clock = quiet, max_wait, clock
        self._active = 0
        self._paused_until = 0.0
        self._last_change = clock()
        self._cond = threading.Condition()
        self.rate_limited = 0
        self.history: list[int] = [self.limit]

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the `limit` slots for the duration of one request."""
        with self._cond:
            while True:
                now = self._clock()
                if now < self._paused_until:
                    self._cond.wait(min(self._paused_until - now, 1.0))
                    continue
                if self._active < self.limit:
                    break
                self._cond.wait(1.0)
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._cond.notify_all()

    def on_rate_limited(self, retry_after: float, run_id: str = "") -> None:
        """A 429: one step down and a pause; stop the run when the wait is too long."""
        if retry_after > self.max_wait:
            raise RateLimitStop(
                f"rate limited for {retry_after:.0f}s, longer than the {self.max_wait:.0f}s we wait",
                run_id=run_id,
                retry_after=retry_after,
            )
        announce(f"{self.name} (429, Retry-After {retry_after:g} s)", retry_after)
        with self._cond:
            self.rate_limited += 1
            now = self._clock()
            self._paused_until = max(self._paused_until, now + retry_after)
            if self.limit > self.minimum:
                self.limit -= 1
                self.history.append(self.limit)
            self._last_change = now
            self._cond.notify_all()

    def on_success(self) -> None:
        with self._cond:
            now = self._clock()
            if self.limit < self.maximum and now - self._last_change >= self.quiet:
                self.limit += 1
                self.history.append(self.limit)
                self._last_change = now
                self._cond.notify_all()
