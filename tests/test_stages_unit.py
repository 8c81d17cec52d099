"""Pure stages and state helpers, no database: batching, result files, the budget window."""

from __future__ import annotations

import json
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.errors import RateLimitStop
from core.models import BatchMember
from stages.batching import pack
from state.budget import SlidingWindowLimiter
from state.files import RESULT_SCHEMA, read_checked, read_result, write_atomic


def members(sizes: list[int]) -> list[BatchMember]:
    return [
        BatchMember(conversation_key=f"chatgpt:c{i}", content_hash=f"h{i}", chars=n)
        for i, n in enumerate(sizes)
    ]


@given(
    st.lists(st.integers(min_value=1, max_value=200_000), max_size=40),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=1_000, max_value=150_000),
)
def test_pack_respects_caps_keeps_order_and_is_deterministic(sizes, max_conv, max_chars):
    ms = members(sizes)
    a = pack(ms, max_conversations=max_conv, max_chars=max_chars, prompt_version="p1", model="m")
    b = pack(ms, max_conversations=max_conv, max_chars=max_chars, prompt_version="p1", model="m")
    assert [x.batch_id for x in a] == [x.batch_id for x in b]
    assert [m for batch in a for m in batch.members] == ms  # nothing lost, order kept
    for batch in a:
        assert 1 <= len(batch.members) <= max_conv
        # an oversize conversation travels alone; otherwise the char cap holds
        assert len(batch.members) == 1 or sum(m.chars for m in batch.members) <= max_chars


def test_batch_id_depends_on_content_prompt_and_model():
    ms = members([10, 20])
    base = pack(ms, max_conversations=4, max_chars=120_000, prompt_version="p1", model="m")[
        0
    ].batch_id
    assert (
        pack(ms, max_conversations=4, max_chars=120_000, prompt_version="p2", model="m")[0].batch_id
        != base
    )
    assert (
        pack(ms, max_conversations=4, max_chars=120_000, prompt_version="p1", model="x")[0].batch_id
        != base
    )
    changed = [ms[0], ms[1].model_copy(update={"content_hash": "other"})]
    assert (
        pack(changed, max_conversations=4, max_chars=120_000, prompt_version="p1", model="m")[
            0
        ].batch_id
        != base
    )


def test_result_file_is_atomic_and_checksummed(tmp_path):
    path = tmp_path / "b" / "result.json"
    write_atomic(
        path, {"batch_id": "batch:1", "complete": True, "drafts": ["日本語"]}, RESULT_SCHEMA
    )
    assert read_result(path, "batch:1") is not None
    assert read_result(path, "batch:2") is None  # another batch's file
    assert list(path.parent.glob("*.tmp")) == []
    doc = json.loads(path.read_text())
    doc["drafts"] = ["edited"]
    path.write_text(json.dumps(doc))
    assert read_result(path, "batch:1") is None  # checksum no longer matches
    path.write_text(path.read_text()[:20])  # torn write
    assert read_result(path, "batch:1") is None
    with pytest.raises(Exception, match="not valid JSON"):
        read_checked(path, RESULT_SCHEMA)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_sliding_window_never_exceeds_the_budget():
    clock = FakeClock()
    lim = SlidingWindowLimiter(300, 600, clock=clock, sleep=clock.sleep)
    stamps = []
    for _ in range(1000):
        lim.acquire()
        stamps.append(clock.now)
        clock.now += 0.5
    # in any window of 600 s there are at most 300 requests
    j = 0
    for i, t in enumerate(stamps):
        while stamps[j] <= t - 600:
            j += 1
        assert i - j + 1 <= 300
    assert clock.slept  # it had to wait


def test_limiter_stops_instead_of_waiting_too_long():
    clock = FakeClock()
    lim = SlidingWindowLimiter(2, 600, max_wait=60, clock=clock, sleep=clock.sleep)
    lim.acquire()
    lim.acquire()
    with pytest.raises(RateLimitStop) as err:
        lim.acquire("run-1")
    assert err.value.run_id == "run-1" and err.value.retry_after == pytest.approx(600)


def test_limiter_is_shared_by_threads():
    lim = SlidingWindowLimiter(50, 3600, max_wait=0.01)
    ok, stopped = [], []

    def worker() -> None:
        for _ in range(20):
            try:
                lim.acquire()
                ok.append(1)
            except RateLimitStop:
                stopped.append(1)

    threads = [threading.Thread(target=worker) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 50 and len(stopped) == 50
