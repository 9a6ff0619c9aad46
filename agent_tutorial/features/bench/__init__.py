"""`agent-tutorial bench`: replay one conversation through several context strategies
(chapter 8's, no compaction, and peers re-implemented from their descriptions) and compare
what their requests would cost under a modelled prefix cache."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_tutorial.core.model import DEFAULT_MAX_OUTPUT_TOKENS
from agent_tutorial.features.bench.cache_model import CACHE_MODEL_TEXT
from agent_tutorial.features.bench.contenders import CONTENDERS
from agent_tutorial.features.bench.prices import PriceSheet, price_sheets
from agent_tutorial.features.bench.replay import (
    BenchSetup,
    Contender,
    RecordingSummarizer,
    StrategyResult,
    replay,
)
from agent_tutorial.features.bench.trace import TraceStep, session_trace, synthetic_trace
from agent_tutorial.features.compaction.budget import WindowSize

__all__ = [
    "CACHE_MODEL_TEXT",
    "BenchReport",
    "StrategyResult",
    "run_bench",
    "session_trace",
    "synthetic_trace",
]

SUMMARIZER_TEXT = (
    "Summaries inside the bench come from the deterministic offline extractive summarizer; "
    "a model-written summary's request is counted at the size it would have had."
)


@dataclass(frozen=True, slots=True)
class BenchReport:
    source: str
    """What was replayed, e.g. "synthetic trace, 300 steps, seed 591"."""
    context_window_tokens: int | None
    output_cap_tokens: int
    sheets: tuple[PriceSheet, ...]
    results: tuple[StrategyResult, ...]


def output_cap_for(window: int | None) -> int:
    """The reply's reserve: the default output cap, kept within a known window as a run
    keeps it (`WindowSize`)."""
    return DEFAULT_MAX_OUTPUT_TOKENS if window is None else WindowSize.of(window).output_cap_tokens


def run_bench(
    trace: Sequence[TraceStep],
    source: str,
    context_window_tokens: int | None,
    contenders: Sequence[Contender] = CONTENDERS,
) -> BenchReport:
    """Replay `trace` through every contender, each in a scratch workspace of its own."""
    sheets = price_sheets()
    cap = output_cap_for(context_window_tokens)
    results = []
    with tempfile.TemporaryDirectory(prefix="agent-tutorial-bench-") as scratch:
        for number, contender in enumerate(contenders):
            workspace = Path(scratch) / str(number)
            workspace.mkdir()
            setup = BenchSetup(workspace, RecordingSummarizer(), context_window_tokens, cap)
            results.append(replay(contender, trace, setup, sheets))
    return BenchReport(source, context_window_tokens, cap, sheets, tuple(results))
