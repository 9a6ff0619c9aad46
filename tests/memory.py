"""How much memory a block made Python hold: for the tests that a huge input is refused or
read in part, never read whole."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Peak:
    bytes: int = 0
    """The most bytes Python held at once while the block ran (set when it ends)."""


@contextmanager
def peak_memory() -> Iterator[Peak]:
    peak = Peak()
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak.bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
