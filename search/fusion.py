"""Weighted Reciprocal Rank Fusion and the search configuration (pure: no database).

The SQL statement fuses the same way; this ``rrf()`` is the reference it is tested against and
what ``--explain`` prints from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ListConfig", "SearchConfig", "rrf"]

ListName = Literal["lexical", "trigram", "vector"]


def rrf(
    rankings: Mapping[str, Sequence[str]],
    weights: Mapping[str, float] | None = None,
    k: int = 60,
) -> list[tuple[str, float, dict[str, int]]]:
    """Fuse ranked id lists: ``score(id) = sum over lists of weight / (k + rank)``, rank from 1.

    Returns ``(id, score, {list name: rank})`` best first; the ranks are for ``--explain``. An id
    listed twice in one list counts once, at its better rank. Without ``weights`` every list
    weighs 1.0; with them, every list needs one. Ties go to the id found by more lists, then to
    the smaller id, so the order never depends on dict or set iteration.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if weights is not None:
        missing = sorted(set(rankings) - set(weights))
        if missing:
            raise ValueError(f"no weight for {', '.join(missing)}")
        negative = sorted(name for name in rankings if weights[name] < 0)
        if negative:
            raise ValueError(f"negative weight for {', '.join(negative)}")
    ranks: dict[str, dict[str, int]] = {}
    for name, ids in rankings.items():
        for rank, doc in enumerate(ids, start=1):
            ranks.setdefault(doc, {}).setdefault(name, rank)
    fused = [
        (
            doc,
            math.fsum(  # exact sum: equal contributions tie exactly, whatever their order
                (1.0 if weights is None else weights[name]) / (k + rank)
                for name, rank in per_list.items()
            ),
            per_list,
        )
        for doc, per_list in ranks.items()
    ]
    fused.sort(key=lambda row: (-row[1], -len(row[2]), row[0]))
    return fused


class ListConfig(BaseModel):
    """One candidate list: its weight in the fusion and how many candidates it contributes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weight: float = Field(ge=0)
    limit: int = Field(default=50, ge=0)  # 0 switches the list off


class SearchConfig(BaseModel):
    """Hybrid search settings (after graphiti's ``SearchConfig``).

    Lexical weighs most: a proper noun or the person's own phrase is the strongest evidence;
    trigram catches partial titles and aliases; vector is the vaguest.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    lexical: ListConfig = ListConfig(weight=1.0)
    trigram: ListConfig = ListConfig(weight=0.7)
    vector: ListConfig = ListConfig(weight=0.5)
    k: int = Field(default=60, ge=0)
    limit: int = Field(default=10, ge=1)  # fused results returned

    def lists(self) -> dict[ListName, ListConfig]:
        """The lists that are switched on (weight and limit above zero), lexical first."""
        every: dict[ListName, ListConfig] = {
            "lexical": self.lexical,
            "trigram": self.trigram,
            "vector": self.vector,
        }
        return {name: c for name, c in every.items() if c.weight > 0 and c.limit > 0}

    @property
    def weights(self) -> dict[str, float]:
        return {name: c.weight for name, c in self.lists().items()}

    def fuse(
        self, rankings: Mapping[str, Sequence[str]]
    ) -> list[tuple[str, float, dict[str, int]]]:
        """``rrf()`` over the switched-on lists, each cut to its limit, cut to ``limit``."""
        unknown = sorted(set(rankings) - {"lexical", "trigram", "vector"})
        if unknown:
            raise ValueError(f"unknown candidate list {', '.join(unknown)}")
        cut: dict[str, list[str]] = {
            name: list(rankings.get(name, ()))[: c.limit] for name, c in self.lists().items()
        }
        return rrf(cut, self.weights, self.k)[: self.limit]
