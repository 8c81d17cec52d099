"""Time as a prior, not a wall (issue 26, item 3; ADR 0036): when the range a question names
holds no relevant message, recall goes on outside it, step by step, and the messages found there come after the range's own, ranked by relevance and nearness
in time.

Pure orchestration over any recall (``ask(start, end) -> result`` with ``hits``, each with
``message_key``, ``created_at``, ``score``): no database here. The range's own hits keep their
order and their lead; the widening is reported (``Widened.used``: the range it ended with).

Steps (before the range, after it): people speak of an event in the days after it ("yesterday",
"last week"), so the first step reaches further forward than back; then a month, a season, a
year, the whole history. Nearness: a hit's relevance score is divided by ``1 + days / NEAR_DAYS``,
``days`` its distance from the range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

__all__ = ["NEAR_DAYS", "STEPS", "Widened", "widen"]

STEPS: tuple[tuple[timedelta, timedelta] | None, ...] = (
    (timedelta(days=3), timedelta(days=10)),
    (timedelta(days=30), timedelta(days=45)),
    (timedelta(days=120), timedelta(days=120)),
    (timedelta(days=400), timedelta(days=400)),
    None,  # no range at all
)
NEAR_DAYS = 30.0


class _Hit(Protocol):
    message_key: str
    created_at: datetime | None
    score: float | None


@dataclass(frozen=True)
class Widened:
    hits: list[Any]  # the range's own first, then those found outside it
    widened: bool  # hits from outside the range were added
    used: tuple[datetime | None, datetime | None] | None  # the range the last step read
    result: Any  # the result of the last recall asked (its counts)


def _days_outside(t: datetime | None, start: datetime | None, end: datetime | None) -> float:
    if t is None:
        return float("inf")
    if start is not None and t < start:
        return (start - t).total_seconds() / 86400
    if end is not None and t >= end:
        return (t - end).total_seconds() / 86400
    return 0.0


def widen(
    ask: Callable[[datetime | None, datetime | None], Any],
    start: datetime | None,
    end: datetime | None,
    limit: int,
    first: Any | None = None,
) -> Widened:
    """Recall within ``[start, end)`` (``first``: that result, when asked already); when it
    holds no hit, widen by ``STEPS`` until hits from outside are found."""
    result = first if first is not None else ask(start, end)
    if result.hits or (start is None and end is None):
        return Widened(list(result.hits), False, None, result)
    for step in STEPS:
        lo = None if step is None or start is None else start - step[0]
        hi = None if step is None or end is None else end + step[1]
        wide = ask(lo, hi)
        more: list[_Hit] = list(wide.hits)
        if not more and step is not None:
            continue
        more.sort(
            key=lambda h: (
                -(h.score or 0.0) / (1 + _days_outside(h.created_at, start, end) / NEAR_DAYS),
                h.message_key,
            )
        )
        return Widened(more[:limit], bool(more), (lo, hi), wide)
    return Widened([], False, None, result)
