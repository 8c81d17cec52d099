"""The commit budget: a sliding window over memory-API requests (default 300 per 600 s), shared
by every worker thread. Persisting the window across runs comes with the flow issue."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from core.errors import RateLimitStop
from core.models import CommitRequest, CommitResult, MemoryIndexEntry, MemoryView, SearchHit
from core.ports import MemoryAPI


class SlidingWindowLimiter:
    def __init__(
        self, limit: int, window: float, *, max_wait: float = 600.0,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    ) -> None:  # fmt: skip
        if limit < 1 or window <= 0:
            raise ValueError("budget must allow at least one request per positive window")
        self.limit, self.window, self.max_wait = limit, window, max_wait
        self._clock, self._sleep = clock, sleep
        self._events: deque[float] = deque()
        self._lock = threading.Lock()
        self.waited = 0.0
        self.requests = 0

    def _trim(self, now: float) -> None:
        while self._events and self._events[0] <= now - self.window:
            self._events.popleft()

    def acquire(self, run_id: str = "") -> None:
        """Block until one more request fits in the window; RateLimitStop if that takes too long."""
        while True:
            with self._lock:
                now = self._clock()
                self._trim(now)
                if len(self._events) < self.limit:
                    self._events.append(now)
                    self.requests += 1
                    return
                wait = self._events[0] + self.window - now
            if wait > self.max_wait:
                raise RateLimitStop(
                    f"the commit budget ({self.limit} requests per {self.window:g}s) is spent; "
                    f"the next slot opens in {wait:.0f}s",
                    run_id=run_id,
                    retry_after=wait,
                )
            self.waited += wait
            self._sleep(wait)

    def in_window(self) -> int:
        with self._lock:
            self._trim(self._clock())
            return len(self._events)


class BudgetedMemoryAPI:
    """Counts every memory-API request against the limiter before making it."""

    def __init__(self, inner: MemoryAPI, limiter: SlidingWindowLimiter, run_id: str = "") -> None:
        self.inner, self.limiter, self.run_id = inner, limiter, run_id

    def _go(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.limiter.acquire(self.run_id)
        return fn(*args)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        return self._go(self.inner.search, query, limit)

    def related(self, conversation_keys: list[str], titles: list[str]) -> list[MemoryIndexEntry]:
        return self._go(self.inner.related, conversation_keys, titles)

    def propose(self, run_id: str, batch_id: str, draft_id: str, payload: dict) -> str:
        return self._go(self.inner.propose, run_id, batch_id, draft_id, payload)

    def commit(self, request: CommitRequest) -> CommitResult:
        return self._go(self.inner.commit, request)

    def get(self, memory_id: str) -> MemoryView:
        return self._go(self.inner.get, memory_id)
