"""The token and prefix-cache model the bench prices requests with. It is a model, not a
bill: real tokenizers and caches differ, so the table compares strategies, not invoices.

- Tokens: a request of `n` bytes is `ceil(n / BYTES_PER_TOKEN)` tokens.
- Cache: a request reads from the cache the prefix it shares with the previous agent
  request, counted in whole blocks of `CACHE_BLOCK_TOKENS` tokens once the shared prefix
  reaches `CACHE_MIN_TOKENS` (OpenAI-style automatic caching). Anthropic's explicit
  breakpoints are approximated as automatic; summary requests start with another system
  prompt, so they share nothing and read nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

BYTES_PER_TOKEN = 4.0
CACHE_BLOCK_TOKENS = 128
CACHE_MIN_TOKENS = 1_024

CACHE_MODEL_TEXT = (
    f"Tokens = bytes / {BYTES_PER_TOKEN:g}. Prefix cache: a request reads the prefix it shares "
    f"with the previous agent request, in {CACHE_BLOCK_TOKENS}-token blocks once at least "
    f"{CACHE_MIN_TOKENS:,} tokens match (OpenAI-style automatic caching); Anthropic's explicit "
    "breakpoints are approximated as automatic; uncached tokens are billed as cache writes "
    "where a sheet prices writes; summary requests read nothing from the cache. Modelled, "
    "not billed."
)


def tokens_for(utf8_bytes: int) -> int:
    return math.ceil(utf8_bytes / BYTES_PER_TOKEN)


class PrefixCache:
    """Remembers the previous request's parts (serialized messages) and says how many of
    the next request's tokens it would read from the cache."""

    def __init__(self) -> None:
        self._previous: Sequence[bytes] = ()

    def read(self, parts: Sequence[bytes]) -> int:
        """Cached tokens of the request made of `parts`; it then becomes the previous one."""
        shared = _shared_prefix_bytes(self._previous, parts)
        self._previous = parts
        shared_tokens = int(shared // BYTES_PER_TOKEN)
        if shared_tokens < CACHE_MIN_TOKENS:
            return 0
        return shared_tokens - shared_tokens % CACHE_BLOCK_TOKENS


def _shared_prefix_bytes(previous: Sequence[bytes], current: Sequence[bytes]) -> int:
    shared = 0
    for old, new in zip(previous, current, strict=False):
        if old == new:
            shared += len(new)
            continue
        return shared + _common_prefix_length(old, new)
    return shared


def _common_prefix_length(old: bytes, new: bytes) -> int:
    """Bisect on slices: `bytes` equality is a C-speed memcmp."""
    low, high = 0, min(len(old), len(new))
    while low < high:
        middle = (low + high + 1) // 2
        if old[:middle] == new[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
