"""What a checkpoint costs (issue 30): a workspace of 10,000 small files (20 MB in all) in
which each turn changes one file; the time of one checkpoint after the first, in the
process that took the first (the REPL) and in a fresh one (each `run`), whose stat cache
comes from disk. A checkpointed turn takes two: before its first write, and at its end.

Run with `make bench` (`.venv/bin/python benchmarks/bench_checkpoints.py [TURNS]`).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agent_tutorial.adapters.checkpoint_store import CACHE_SETTLED_NS, CheckpointStore
from agent_tutorial.config import CHECKPOINT_MAX_FILE_BYTES

FILES, FOLDERS, FILE_BYTES = 10_000, 100, 2_000
DEFAULT_TURNS = 20
AIM_MS = 150.0


def make_workspace(root: Path) -> list[Path]:
    paths = []
    for number in range(FILES):
        folder = root / "src" / f"package_{number % FOLDERS}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"file_{number}.txt"
        path.write_bytes(f"file {number}\n".encode().ljust(FILE_BYTES, b"x"))
        paths.append(path)
    (root / ".gitignore").write_text("build/\n")
    return paths


def timed_ms(store: CheckpointStore, workspace: Path) -> tuple[float, float]:
    """Wall-clock and CPU milliseconds of one checkpoint: on a shared machine the wall
    clock also counts the time other processes held the cores."""
    wall, cpu = time.perf_counter(), time.process_time()
    store.snapshot(workspace)
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def spread(times: list[float]) -> str:
    """The 10th to the 90th percentile of `times`, in ms: on a shared machine the
    spread says how much the median can be trusted."""
    deciles = statistics.quantiles(times, n=10)
    return f"{deciles[0]:.0f}-{deciles[-1]:.0f} ms"


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TURNS
    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as folder:
        workspace = Path(folder)
        paths = make_workspace(workspace)
        # The stat cache trusts only files whose times have settled, as a real tree's have.
        time.sleep(CACHE_SETTLED_NS / 1e9 + 0.1)

        def store() -> CheckpointStore:
            return CheckpointStore.in_state_folder(
                workspace, max_file_bytes=CHECKPOINT_MAX_FILE_BYTES
            )

        first_wall, first_cpu = timed_ms(same_process := store(), workspace)
        first_size = same_process.size_bytes()
        warm, cold = [], []
        for turn in range(turns):
            paths[turn * 37 % FILES].write_text(f"changed in turn {turn}\n")
            warm.append(timed_ms(same_process, workspace))
            cold.append(timed_ms(store(), workspace))
        size = same_process.size_bytes()
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"checkpoints: {FILES:,} files, {FILES * FILE_BYTES / 1e6:.0f} MB, one changed a turn")
    print(f"  load average {load} on {os.cpu_count()} cores (wall time counts other processes)")
    print(f"  first checkpoint          {first_wall:8.1f} ms wall {first_cpu:8.1f} ms CPU")
    for label, times in (("same process", warm), ("fresh process", cold)):
        walls, cpus = [wall for wall, _ in times], [cpu for _, cpu in times]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        verdict = "within" if wall < AIM_MS else "OVER"
        print(
            f"  later, {label:<14}    {wall:8.1f} ms wall {cpu:8.1f} ms CPU "
            f"(median of {turns}; {verdict} the aim of {AIM_MS:.0f} ms)"
        )
        print(f"  {'':<28}10th-90th percentile {spread(walls)} wall, {spread(cpus)} CPU")
    growth = (size - first_size) / turns / 1e3
    print(f"  store after the first       {first_size / 1e6:8.1f} MB")
    print(f"  store after {turns} turns     {size / 1e6:8.1f} MB ({growth:.0f} KB a turn)")


if __name__ == "__main__":
    main()
