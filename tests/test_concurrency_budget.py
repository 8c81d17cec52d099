"""Adaptive concurrency and the persisted budget window (no HTTP here)."""

from __future__ import annotations

import pytest

from core.errors import RateLimitStop
from state.budget import SlidingWindowLimiter
from state.concurrency import AdaptiveConcurrency
from store.budget import PgWindow


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_concurrency_drops_on_429_and_climbs_back_after_quiet():
    clock = Clock()
    cc = AdaptiveConcurrency(start=3, maximum=3, quiet=60, max_wait=600, clock=clock)
    cc.on_rate_limited(5)
    cc.on_rate_limited(5)
    cc.on_rate_limited(5)
    assert cc.limit == 1 and cc.history == [3, 2, 1]
    cc.on_success()
    assert cc.limit == 1  # not quiet yet
    clock.now += 61
    cc.on_success()
    assert cc.limit == 2
    cc.on_success()
    assert cc.limit == 2  # one step per quiet stretch
    clock.now += 61
    cc.on_success()
    clock.now += 61
    cc.on_success()
    assert cc.limit == 3  # never above the maximum
    assert cc.rate_limited == 3


def test_concurrency_stops_on_a_long_retry_after():
    cc = AdaptiveConcurrency(max_wait=600)
    with pytest.raises(RateLimitStop) as err:
        cc.on_rate_limited(5 * 3600, run_id="r1")  # a provider's 5-hour session limit
    assert err.value.retry_after == 5 * 3600


def test_budget_window_is_shared_across_limiters_and_restarts(db):
    first = SlidingWindowLimiter(max_wait=0.5, backend=PgWindow(db, "client:t", 5, 600))
    for _ in range(5):
        first.acquire()
    # a "restarted run": a new limiter over the same bucket knows the window is spent
    second = SlidingWindowLimiter(max_wait=0.5, backend=PgWindow(db, "client:t", 5, 600))
    assert second.in_window() == 5
    with pytest.raises(RateLimitStop) as err:
        second.acquire("run-2")
    assert 590 < err.value.retry_after <= 600
    # another bucket (another client) has its own window
    SlidingWindowLimiter(max_wait=0.5, backend=PgWindow(db, "client:other", 5, 600)).acquire()


def test_budget_window_slides(db):
    w = PgWindow(db, "client:slide", 2, 0.5)
    assert w.try_acquire() == 0 and w.try_acquire() == 0
    wait = w.try_acquire()
    assert 0 < wait <= 0.5
    lim = SlidingWindowLimiter(max_wait=5, backend=w)
    lim.acquire()  # waits for the oldest to leave the window
    assert lim.waited > 0 and w.in_window() <= 2


def test_ai_client_writes_count_against_their_own_budget(db):
    from core.models import ActionRequest, CommitRequest
    from mcp_server.service import MemoryService

    svc = MemoryService(db, budget=(2, 600))

    def req(i: int) -> CommitRequest:
        return CommitRequest(
            kind="episode",
            title=f"mcp {i}",
            canonical_summary="s",
            index_summary="s",
            idempotency_key=f"mcp-{i}",
        )

    svc.commit(req(1))
    svc.propose(ActionRequest(action="create", record={"title": "x"}, client="claude-desktop"))
    with pytest.raises(RateLimitStop):
        svc.commit(req(2))
    assert PgWindow(db, "client:mcp", 2, 600).in_window() == 2
