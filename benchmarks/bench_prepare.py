"""How `CompactionManager.prepare` scales: the median time per call on a pure append of one
tool group at 50 and at 5,000 groups of history, their ratio (target ≤ 2: flat in history
length), and a cold prepare of the same histories for comparison. Each warmed-up manager
then takes 20 appends, so "50 groups" means 50 to 70.

Run with `make bench` (`.venv/bin/python benchmarks/bench_prepare.py`).
"""

from __future__ import annotations

import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.features.compaction import CompactionManager, CompactionSummary

SIZES = (50, 5_000)
MANAGERS_PER_SIZE = 20
APPENDS_PER_MANAGER = 20
TARGET_RATIO = 2.0


class RefusingSummarizer:
    """The benchmark histories stay under the summary threshold; a summary would be a bug."""

    def summarize(self, history: History) -> CompactionSummary:
        raise AssertionError("the benchmark history should never need a summary")


def tool_groups(start: int) -> Iterator[list[ChatMessage]]:
    """Endless `read_file` groups with about 1 KB of output each."""
    number = start
    while True:
        call = tool_call(f"call-{number}", "read_file", f'{{"path": "src/module_{number}.py"}}')
        lines = "\n".join(f"{number:>6} line {line}: some source text here" for line in range(24))
        yield [assistant_message(None, [call]), tool_message(lines, call.id)]
        number += 1


def history_of(groups: int) -> list[ChatMessage]:
    history: list[ChatMessage] = [user_message("Give me a tour of this repository.")]
    source = tool_groups(0)
    for _ in range(groups):
        history.extend(next(source))
    return history


def measure_one(
    workspace: Path, base: list[ChatMessage], appends: Iterator[list[ChatMessage]]
) -> tuple[float, list[float]]:
    """Seconds for a cold prepare of `base`, then per prepare after appending one group."""
    history = list(base)
    manager = CompactionManager(workspace, RefusingSummarizer())
    started = time.perf_counter()
    manager.prepare(history)
    cold = time.perf_counter() - started
    warm: list[float] = []
    for _ in range(APPENDS_PER_MANAGER):
        history.extend(next(appends))
        started = time.perf_counter()
        manager.prepare(history)
        warm.append(time.perf_counter() - started)
    return cold, warm


def main() -> int:
    bases = {groups: history_of(groups) for groups in SIZES}
    cold: dict[int, list[float]] = {groups: [] for groups in SIZES}
    warm: dict[int, list[float]] = {groups: [] for groups in SIZES}
    gc.disable()  # as timeit does: collector pauses are not prepare's work
    with tempfile.TemporaryDirectory() as directory:
        # Sizes take turns, so a busy machine slows both alike and the ratio stays fair.
        for round_number in range(MANAGERS_PER_SIZE):
            for groups in SIZES:
                appends = tool_groups(1_000_000 * (round_number + 1))
                first, rest = measure_one(Path(directory), bases[groups], appends)
                cold[groups].append(first)
                warm[groups].extend(rest)
    gc.enable()
    medians = {groups: statistics.median(warm[groups]) for groups in SIZES}
    print("prepare() on a pure append of one tool group (median per call)")
    for groups in SIZES:
        append_text = f"append {medians[groups] * 1e6:8.1f} µs"
        cold_text = f"cold {statistics.median(cold[groups]) * 1e3:8.2f} ms"
        print(f"  {groups:>6,} groups: {append_text}   {cold_text}")
    ratio = medians[SIZES[1]] / medians[SIZES[0]]
    verdict = "ok" if ratio <= TARGET_RATIO else "ABOVE TARGET"
    sizes = f"{SIZES[1]:,} / {SIZES[0]:,} groups"
    print(f"  ratio {sizes}: {ratio:.2f} (target ≤ {TARGET_RATIO}) {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
