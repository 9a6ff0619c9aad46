"""The price sheets the bench applies, read from `prices.toml` beside this module."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any


@dataclass(frozen=True, slots=True)
class PriceSheet:
    """One provider's input prices, in dollars per million tokens."""

    name: str
    model: str
    input: float
    """An uncached prompt token."""
    cached_input: float
    """A prompt token read from the prefix cache."""
    cache_write: float | None
    """A prompt token written to the cache; None where writing costs nothing extra."""
    as_of: str
    source: str

    def input_cost(self, prompt_tokens: int, cached_tokens: int) -> float:
        """Dollars for one request. Caching is automatic in the bench's model, so every
        token not read from the cache is written to it (billed as a write where the sheet
        prices writes)."""
        uncached_price = self.input if self.cache_write is None else self.cache_write
        uncached = prompt_tokens - cached_tokens
        return (uncached * uncached_price + cached_tokens * self.cached_input) / 1_000_000


def price_sheets() -> tuple[PriceSheet, ...]:
    text = resources.files(__package__).joinpath("prices.toml").read_text(encoding="utf-8")
    return tuple(_sheet(entry) for entry in tomllib.loads(text)["sheets"])


def _sheet(entry: dict[str, Any]) -> PriceSheet:
    return PriceSheet(
        name=entry["name"],
        model=entry["model"],
        input=float(entry["input"]),
        cached_input=float(entry["cached_input"]),
        cache_write=float(entry["cache_write"]) if "cache_write" in entry else None,
        as_of=entry["as_of"],
        source=entry["source"],
    )
