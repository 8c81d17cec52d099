"""The price table and the cost estimate."""

from __future__ import annotations

import pytest

from providers.pricing import PRICES, PRICES_AS_OF, Price, estimate_cost, price_for


def test_known_models_have_prices() -> None:
    assert PRICES_AS_OF
    assert price_for("openai:gpt-4o-mini") == Price(0.15, 0.60)
    assert price_for("anthropic:claude-sonnet-4-5") == Price(3.00, 15.00)
    assert price_for("gemini:gemini-2.5-flash") == Price(0.30, 2.50)
    for provider, models in PRICES.items():
        for model, price in models.items():
            assert price.input_per_million > 0 and price.output_per_million > 0, (provider, model)


def test_estimate_cost() -> None:
    # 1M input at $0.15 and 200k output at $0.60 per million
    assert estimate_cost("openai:gpt-4o-mini", 1_000_000, 200_000) == pytest.approx(0.27)
    assert estimate_cost("anthropic:claude-sonnet-4-5", 10_000, 2_000) == pytest.approx(0.06)
    assert estimate_cost("openai:gpt-4o-mini", 0, 0) == 0.0


@pytest.mark.parametrize(
    ("model", "base"),
    [
        ("openai:gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai:gpt-4.1-2025-04-14", "gpt-4.1"),
        ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic:claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("gemini:gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("gpt-4o", "gpt-4o"),  # a bare model name is looked up in every provider
    ],
)
def test_snapshots_resolve_to_their_base_model(model: str, base: str) -> None:
    found = price_for(model)
    assert found is not None
    assert found in [models[base] for models in PRICES.values() if base in models]


def test_a_longer_name_is_not_priced_as_its_prefix() -> None:
    assert price_for("openai:gpt-4o-mini") != price_for("openai:gpt-4o")
    assert price_for("openai:gpt-4o-audio-preview-2024-12-17") is None


def test_unknown_models_give_no_estimate_and_offline_drafters_are_free() -> None:
    assert estimate_cost("openai:llama3.1:8b", 1000, 1000) is None
    assert estimate_cost("mistral:large", 1000, 1000) is None
    assert estimate_cost("extractive:v1", 10**6, 10**6) == 0.0
    assert estimate_cost("fake:scripted", 5, 5) == 0.0


def test_an_own_table_can_be_given() -> None:
    table = {"openai": {"my-model": Price(1.0, 2.0)}}
    assert estimate_cost("openai:my-model", 1_000_000, 1_000_000, table=table) == 3.0
    assert estimate_cost("openai:gpt-4o", 1, 1, table=table) is None


def test_negative_tokens_are_a_bug() -> None:
    with pytest.raises(ValueError):
        estimate_cost("openai:gpt-4o", -1, 0)
