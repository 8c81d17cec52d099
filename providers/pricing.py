"""Per-model prices for the cost estimate (``pmem backfill --estimate``, ``--max-cost``).

Prices are US dollars per million tokens, standard (non-batch) tier, short-prompt tier where a
vendor has two, without prompt-cache discounts, so an estimate errs on the high side.

PRICES AS OF 2025-11 (the vendors' published list prices as known on that date). Prices
change: check the vendor's pricing page before trusting an estimate, and pass your own table
(``estimate_cost(..., table=...)``) for models not listed. An unknown model gives ``None``
(no estimate), never a made-up number; the offline drafters cost nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

PRICES_AS_OF = "2025-11"


class Price(NamedTuple):
    input_per_million: float
    output_per_million: float


# provider -> model -> price. Dated snapshots ("-2025-04-14", "-20250929", "-001") and
# "-latest" aliases resolve to the base name below.
PRICES: dict[str, dict[str, Price]] = {
    "openai": {
        "gpt-5": Price(1.25, 10.00),
        "gpt-5-mini": Price(0.25, 2.00),
        "gpt-5-nano": Price(0.05, 0.40),
        "gpt-4.1": Price(2.00, 8.00),
        "gpt-4.1-mini": Price(0.40, 1.60),
        "gpt-4.1-nano": Price(0.10, 0.40),
        "gpt-4o": Price(2.50, 10.00),
        "gpt-4o-mini": Price(0.15, 0.60),
        "o4-mini": Price(1.10, 4.40),
        "o3": Price(2.00, 8.00),
    },
    "anthropic": {
        "claude-opus-4-5": Price(5.00, 25.00),
        "claude-opus-4-1": Price(15.00, 75.00),
        "claude-opus-4": Price(15.00, 75.00),
        "claude-sonnet-4-5": Price(3.00, 15.00),
        "claude-sonnet-4": Price(3.00, 15.00),
        "claude-haiku-4-5": Price(1.00, 5.00),
        "claude-3-5-haiku": Price(0.80, 4.00),
    },
    "gemini": {
        "gemini-2.5-pro": Price(1.25, 10.00),
        "gemini-2.5-flash": Price(0.30, 2.50),
        "gemini-2.5-flash-lite": Price(0.10, 0.40),
        "gemini-2.0-flash": Price(0.10, 0.40),
        "gemini-2.0-flash-lite": Price(0.075, 0.30),
    },
}

#: Drafters that run locally and cost nothing.
FREE_PROVIDERS = frozenset({"extractive", "fake"})

_SNAPSHOT_RE = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{3}|latest|preview(?:-\d{2}-\d{4})?)$")


def price_for(model: str, table: Mapping[str, Mapping[str, Price]] | None = None) -> Price | None:
    """The price of ``model`` ("provider:model", or a bare model name), or None if unknown."""
    table = PRICES if table is None else table
    provider, sep, name = model.strip().partition(":")
    if not sep:
        provider, name = "", provider
    provider = provider.lower()
    if provider in FREE_PROVIDERS:
        return Price(0.0, 0.0)
    providers = [provider] if provider else list(table)
    for candidate in _names(name.strip().lower()):
        for p in providers:
            found = table.get(p, {}).get(candidate)
            if found is not None:
                return found
    return None


def _names(name: str) -> list[str]:
    """The name itself, then the name without its snapshot suffix(es)."""
    names = [name]
    while (m := _SNAPSHOT_RE.search(name)) is not None:
        name = name[: m.start()]
        names.append(name)
    return names


def estimate_cost(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    table: Mapping[str, Mapping[str, Price]] | None = None,
) -> float | None:
    """Estimated US dollars for the given token counts, or None when the model's price is unknown."""
    if input_tokens < 0 or output_tokens < 0:
        raise ValueError("token counts cannot be negative")
    price = price_for(model, table)
    if price is None:
        return None
    cost = (input_tokens * price.input_per_million + output_tokens * price.output_per_million) / 1e6
    return round(cost, 6)


def cost_at(price: Price, input_tokens: int, output_tokens: int) -> float:
    """US dollars for these token counts at ``price``."""
    return round(
        (input_tokens * price.input_per_million + output_tokens * price.output_per_million) / 1e6, 6
    )


def parse_price(text: str) -> Price:
    """``--price IN/OUT``: US dollars per million input / output tokens, e.g. ``0.4/1.6``."""
    left, sep, right = text.strip().partition("/")
    try:
        price = Price(float(left), float(right)) if sep else None
    except ValueError:
        price = None
    if price is None or price.input_per_million < 0 or price.output_per_million < 0:
        raise ValueError(
            f"--price must be IN/OUT in US dollars per million tokens (e.g. 0.4/1.6), not {text!r}"
        )
    return price


def price_rows() -> list[dict[str, object]]:
    """The table as rows (``pmem prices``): model, USD per million input and output tokens."""
    return [
        {
            "model": f"{provider}:{model}",
            "input_per_million": p.input_per_million,
            "output_per_million": p.output_per_million,
        }
        for provider, models in PRICES.items()
        for model, p in models.items()
    ]
