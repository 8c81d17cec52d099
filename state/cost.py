"""What a run spends on its model, held to --max-cost over every resume of the run.

The meter is plain bookkeeping: the estimate of a batch and the cost of the tokens a model
reported are given to it (``estimate``, ``cost``: the provider's price, resolved by the caller),
and what the run spent, and what that was estimated to cost, is counted on the run's row
through a ``SpendLog`` (the run store).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from core.errors import CostLimitStop
from core.models import Conversation


class SpendLog(Protocol):
    """Where a run's spending is counted, cumulative across resumes (``store.runs.RunStore``):
    the actual tokens and cost, and what those requests were estimated to cost."""

    def spent(self, run_id: str) -> tuple[int, int, float]: ...

    def spent_estimate(self, run_id: str) -> float: ...

    def add_spent(
        self,
        run_id: str,
        input_tokens: int,
        output_tokens: int,
        cost_usd: float,
        estimate_usd: float = 0.0,
    ) -> tuple[int, int, float]: ...


@dataclass
class Hold:
    """What a batch admitted under --max-cost still holds of the cap: its estimate, less what
    its requests have cost so far."""

    amount: float = 0.0


class CostMeter:
    """--max-cost, held before each batch: a batch is admitted (``admit``) only when what the
    run has spent, what the batches in flight hold and this batch's estimate stay within the
    cap; else the run stops before it (``CostLimitStop``). The estimate is the dry run's
    (``estimate``: the caller's, the one the announced estimate uses), scaled by the run's
    ``overrun``: how far what its requests cost passed what they were estimated to cost, over
    every resume (never below 1). So a model that bills more than the estimate foresees (a long
    context, a verbose answer) is caught before its next batch, not one batch later. Each
    request is counted as it returns (``settle``: the actual cost of the tokens the model
    reported, on the run's row), and a batch's next request waits for nothing but is refused
    once what was spent and held passes the cap (``check``: a long conversation's chunks).

    ``price`` is the model's price (None: unknown, every cost 0), ``estimate`` the estimated
    cost of drafting these conversations, ``cost`` the cost of (input, output) tokens at
    ``price``."""

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
        self.spent_estimate = runs.spent_estimate(run_id)
        self.reserved = 0.0
        self.input_tokens = self.output_tokens = 0  # this invocation
        self.cost = 0.0
        self._lock = threading.Lock()

    def estimate(self, conversations: list[Conversation]) -> float:
        return 0.0 if self.price is None else self._estimate(conversations)

    @property
    def overrun(self) -> float:
        """What the run's requests cost per dollar they were estimated to cost (at least 1)."""
        if self.spent_estimate <= 0:
            return 1.0
        return max(1.0, self.spent[2] / self.spent_estimate)

    def admit(self, conversations: list[Conversation]) -> Hold:
        """Admit a batch of ``conversations`` under the cap, holding its estimate until it ends
        (``release``); ``CostLimitStop`` before it when it would pass the cap."""
        if self.max_cost is None:
            return Hold()
        with self._lock:
            est = self.estimate(conversations) * self.overrun
            if self.spent[2] + self.reserved + est > self.max_cost + 1e-9:
                raise CostLimitStop(
                    f"run {self.run_id} has spent ${self.spent[2]:.4f}; its next batch "
                    f"(~${est:.4f}) would pass --max-cost ${self.max_cost:.2f}",
                    run_id=self.run_id,
                )
            self.reserved += est
        return Hold(est)

    def check(self) -> None:
        """Before a request of an admitted batch: refused once what the run spent and what its
        batches still hold pass the cap (an earlier request cost more than its estimate)."""
        if self.max_cost is None:
            return
        with self._lock:
            if self.spent[2] + self.reserved > self.max_cost + 1e-9:
                raise CostLimitStop(
                    f"run {self.run_id} has spent ${self.spent[2]:.4f}; its batch's next request "
                    f"would pass --max-cost ${self.max_cost:.2f}",
                    run_id=self.run_id,
                )

    def release(self, hold: Hold) -> None:
        """A batch ended (drafted, failed or stopped): what it still held is free again."""
        with self._lock:
            self.reserved -= hold.amount
            hold.amount = 0.0

    def settle(
        self,
        hold: Hold,
        conversations: list[Conversation],
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        """Count one request of ``conversations`` that returned: its actual cost on the run's
        row, with its estimate; the batch's hold shrinks by what it cost."""
        cost = 0.0 if self.price is None else self._cost(input_tokens, output_tokens)
        est = self.estimate(conversations)
        with self._lock:
            used = min(hold.amount, cost)
            hold.amount -= used
            self.reserved -= used
            self.spent = self.runs.add_spent(
                self.run_id, input_tokens, output_tokens, cost, estimate_usd=est
            )
            self.spent_estimate += est
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens
            self.cost += cost
