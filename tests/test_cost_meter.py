"""--max-cost held before each batch (state/cost.py, ADR 0032): the batches in flight hold their
estimates, a batch's later request is refused once an earlier one took the run past the cap,
and the overrun (actual over estimated cost) is kept on the run's row across resumes; on the
real PostgreSQL's run store. The CLI's run on the fake model server:
tests/test_run_contract.py::test_max_cost_stops_on_actual_tokens_across_resumes_and_a_higher_cap_resumes."""

from __future__ import annotations

import pytest

from core.errors import CostLimitStop
from state.cost import CostMeter
from store.runs import RunStore
from tests.test_scaleout_claims import _run_with_batches


def _meter(runs: RunStore, run_id: str, cap: float) -> CostMeter:
    # a batch of n conversations is estimated at $0.01 each; a token costs $0.000001
    return CostMeter(
        runs,
        run_id,
        price=object(),
        max_cost=cap,
        estimate=lambda convs: 0.01 * len(convs),
        cost=lambda i, o: (i + o) / 1e6,
    )


def test_batches_in_flight_hold_their_estimates_and_an_overrun_counts_across_resumes(db) -> None:
    runs = RunStore(db)
    run_id, _ = _run_with_batches(db, 1)
    meter = _meter(runs, run_id, cap=0.05)
    one = meter.admit([object()] * 2)
    two = meter.admit([object()] * 2)
    assert meter.reserved == pytest.approx(0.04)
    with pytest.raises(CostLimitStop, match="next batch"):  # 0.04 held + 0.02 > 0.05
        meter.admit([object()] * 2)
    # the first batch's request bills 0.03 for an estimate of 0.02: the overrun is 1.5
    meter.settle(one, [object()] * 2, 30_000, 0)
    assert one.amount == 0 and meter.overrun == pytest.approx(1.5)
    meter.check()  # spent 0.03 + held 0.02: at the cap, not past it
    # the second batch's first request bills 0.025 of its 0.02: its next one is refused
    meter.settle(two, [object()], 25_000, 0)
    with pytest.raises(CostLimitStop, match="next request"):
        meter.check()
    meter.release(one)
    meter.release(two)
    assert meter.reserved == pytest.approx(0.0)
    # a resume reads what was spent (0.055) and what it was estimated at (0.03) from the row
    again = _meter(runs, run_id, cap=0.08)
    assert again.spent[2] == pytest.approx(0.055) and again.overrun == pytest.approx(0.055 / 0.03)
    with pytest.raises(CostLimitStop):  # 0.055 + 0.02 * 1.83 > 0.08
        again.admit([object()] * 2)
    assert again.admit([object()]).amount == pytest.approx(0.01 * 0.055 / 0.03)
