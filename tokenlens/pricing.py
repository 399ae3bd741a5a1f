"""Dated model prices, in one place, so every cost figure is traceable to a table and a date.

Prices are USD per million tokens, as published by Anthropic on the date below. Batch
calls cost half. Cache writes (5-minute TTL) cost 1.25x input, cache reads 0.1x input.
Local models cost nothing. An unknown model has no price: callers must say so rather
than print $0.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_AS_OF = "2026-11-01"

CACHE_WRITE_MULTIPLIER = 1.25
CACHE_READ_MULTIPLIER = 0.10
BATCH_DISCOUNT = 0.5


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: float
    output_per_mtok: float


#: Keyed by model id prefix; the longest matching prefix wins (so dated snapshots match).
PRICES: dict[str, ModelPrice] = {
    "claude-haiku-4-5": ModelPrice(1.00, 5.00),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00),
    "claude-3-haiku": ModelPrice(0.25, 1.25),
    "claude-sonnet-4-5": ModelPrice(3.00, 15.00),
    "claude-sonnet-4": ModelPrice(3.00, 15.00),
    "claude-3-7-sonnet": ModelPrice(3.00, 15.00),
    "claude-opus-4-5": ModelPrice(5.00, 25.00),
    "claude-opus-4-1": ModelPrice(15.00, 75.00),
    "claude-opus-4": ModelPrice(15.00, 75.00),
}


def price_for(model: str) -> ModelPrice | None:
    """The price of a model id, or None when the table does not know it (or it is local)."""
    matches = [prefix for prefix in PRICES if model.startswith(prefix)]
    if not matches:
        return None
    return PRICES[max(matches, key=len)]


def cost_usd(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    batch: bool = False,
) -> float | None:
    """USD for one call's usage; None when the model has no price in the table."""
    price = price_for(model)
    if price is None:
        return None
    per_in = price.input_per_mtok / 1_000_000
    per_out = price.output_per_mtok / 1_000_000
    total = (
        input_tokens * per_in
        + cache_write_tokens * per_in * CACHE_WRITE_MULTIPLIER
        + cache_read_tokens * per_in * CACHE_READ_MULTIPLIER
        + output_tokens * per_out
    )
    return total * BATCH_DISCOUNT if batch else total
