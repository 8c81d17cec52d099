"""What a run spends on its model, held to --max-cost over every resume of the run.

The meter is plain bookkeeping: the estimate of a request and the cost of the tokens a model
reported are given to it (``estimate``, ``cost``: the provider's price, resolved by the caller),
and what the run spent is counted on the run's row through a ``SpendLog`` (the run store).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from core.errors import CostLimitStop
from core.models import Conversation


class SpendLog(Protocol):
    """Where a run's spending is counted, cumulative across resumes (``store.runs.RunStore``)."""

    def spent(self, run_id: str) -> tuple[int, int, float]: ...

    def add_spent(
        self, run_id: str, input_tokens: int, output_tokens: int, cost_usd: float
    ) -> tuple[int, int, float]: ...


class CostMeter:
    """Before each model request the meter reserves the request's estimated cost (the estimate
    errs high); the request is refused (``CostLimitStop``) when what the run has spent, what is
    in flight and this estimate would pass the cap. After the request the reservation is
    replaced by the actual cost of the tokens the model reported, counted on the run's row.

    ``price`` is the model's price (None: unknown, every cost 0), ``estimate`` a request's
    estimated cost, ``cost`` the cost of (input, output) tokens at ``price``."""

    def __init__(
        self,
        runs: SpendLog,
        run_id: str,
        *,
        price: Any,
        max_cost: float | None,
        estimate: Callable[[list[Conversation]], float],
        cost: Callable[[int, int], float],
    ) -> None:
        self.runs, self.run_id, self.max_cost = runs, run_id, max_cost
        self.price = price
        self._estimate, self._cost = estimate, cost
        self.spent = runs.spent(run_id)
        self.reserved = 0.0
        self.input_tokens = self.output_tokens = 0  # this invocation
        self.cost = 0.0
        self._lock = threading.Lock()

    def estimate(self, conversations: list[Conversation]) -> float:
        return 0.0 if self.price is None else self._estimate(conversations)

    def reserve(self, conversations: list[Conversation]) -> float:
        if self.max_cost is None:
            return 0.0
        est = self.estimate(conversations)
        with self._lock:
            if self.spent[2] + self.reserved + est > self.max_cost + 1e-9:
                raise CostLimitStop(
                    f"run {self.run_id} has spent ${self.spent[2]:.4f}; its next request (~${est:.4f}) "
                    f"would pass --max-cost ${self.max_cost:.2f}",
                    run_id=self.run_id,
                )
            self.reserved += est
        return est

    def release(self, reserved: float) -> None:
        with self._lock:
            self.reserved -= reserved

    def settle(self, reserved: float, input_tokens: int, output_tokens: int) -> None:
        cost = 0.0 if self.price is None else self._cost(input_tokens, output_tokens)
        with self._lock:
            self.reserved -= reserved
            self.spent = self.runs.add_spent(self.run_id, input_tokens, output_tokens, cost)
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.cost += cost
