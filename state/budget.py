"""The commit budget: a sliding window over memory-API requests (default 300 per 600 s).

The budget is the memory API's limit per client over HTTP (`pmem api` and a remote server
enforce it with 429 + Retry-After); an HTTP committer paces itself to it with a limiter over the
PostgreSQL window. A run that commits in process is not an HTTP client: its limiter has the
:class:`Unlimited` window (it still counts requests), whatever ``PMEM_COMMIT_BUDGET`` says.
AI clients' writes over MCP (``BudgetedMemoryAPI``) keep their own window. Every wait for a slot
is announced (``core.waits``): what it waits for and until when.

The window itself lives behind a small backend: in memory (tests, one process) or in
PostgreSQL (``store.budget.PgWindow``: shared by every worker and persisted across restarts, so
a resumed run knows what the stopped run spent). The limiter waits for a free slot and stops the
run cleanly (:class:`RateLimitStop`) when the wait would exceed ``max_wait``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from core.errors import RateLimitStop
from core.models import (
    ActionRequest,
    CommitRequest,
    CommitResult,
    MemoryIndexEntry,
    MemoryView,
    SearchHit,
)
from core.ports import MemoryAPI
from core.waits import announce


class Window(Protocol):
    limit: int
    window: float

    def try_acquire(self) -> float: ...

    def in_window(self) -> int: ...


class MemoryWindow:
    """An in-process sliding window."""

    def __init__(
        self, limit: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("budget must allow at least one request per positive window")
        self.limit, self.window, self._clock = limit, window, clock
        self._events: deque[float] = deque()
        self._lock = threading.Lock()

    def _trim(self, now: float) -> None:
        while self._events and self._events[0] <= now - self.window:
            self._events.popleft()

    def try_acquire(self) -> float:
        with self._lock:
            now = self._clock()
            self._trim(now)
            if len(self._events) < self.limit:
                self._events.append(now)
                return 0.0
            return self._events[0] + self.window - now

    def in_window(self) -> int:
        with self._lock:
            self._trim(self._clock())
            return len(self._events)


class Unlimited:
    """No budget (a run committing in process): every request is admitted at once and counted."""

    limit = 0  # 0: no limit
    window = 0.0

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def try_acquire(self) -> float:
        with self._lock:
            self._count += 1
        return 0.0

    def in_window(self) -> int:
        return 0


class SlidingWindowLimiter:
    def __init__(
        self,
        limit: int = 300,
        window: float = 600.0,
        *,
        max_wait: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        backend: Window | None = None,
        what: str | None = None,
    ) -> None:
        self.backend: Window = backend or MemoryWindow(limit, window, clock)
        self.limit, self.window = self.backend.limit, self.backend.window
        self.max_wait = max_wait
        self.what = what  # how a wait names this budget (default: its limit and window)
        self._sleep = sleep
        self._lock = threading.Lock()
        self.waited = 0.0
        self.requests = 0

    @property
    def unlimited(self) -> bool:
        return isinstance(self.backend, Unlimited)

    def describe(self) -> str:
        return self.what or f"the memory API budget ({self.limit} requests per {self.window:g} s)"

    def acquire(self, run_id: str = "") -> None:
        """Block until one more request fits in the window; RateLimitStop if that takes too long."""
        while True:
            wait = self.backend.try_acquire()
            if wait <= 0:
                with self._lock:
                    self.requests += 1
                return
            if wait > self.max_wait:
                raise RateLimitStop(
                    f"the commit budget ({self.limit} requests per {self.window:g}s) is spent; "
                    f"the next slot opens in {wait:.0f}s",
                    run_id=run_id,
                    retry_after=wait,
                )
            announce(self.describe(), wait)
            with self._lock:
                self.waited += wait
            self._sleep(min(wait, 5.0))

    def in_window(self) -> int:
        return self.backend.in_window()


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

    def request_action(self, request: ActionRequest) -> str:
        """Queue a request for the owner (the inner API must implement ``ActionQueue``)."""
        return self._go(self.inner.request_action, request)  # type: ignore[attr-defined]
