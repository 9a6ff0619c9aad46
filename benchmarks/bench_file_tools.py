"""What the descriptor walk costs: median times of the chapter-2 file tools over a synthetic
git repository (nested folders, a .gitignore, an ignored build folder), and how long grep
takes to give up on a pattern that backtracks badly, against its time budget.

Run with `make bench` (`.venv/bin/python benchmarks/bench_file_tools.py [RUNS]`).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import file_tools, search_tools

DEFAULT_RUNS = 7
FOLDERS, FILES_PER_FOLDER, LINES_PER_FILE = 20, 15, 200
BUDGET_S = 1.0


def make_repository(root: Path) -> int:
    """A git repository of FOLDERS x FILES_PER_FOLDER Python files; returns the line count
    grep scans (the ignored build folder is not scanned)."""
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("build/\n*.log\n")
    lines = "".join(f"    value_{number} = compute({number})\n" for number in range(LINES_PER_FILE))
    for folder in range(FOLDERS):
        directory = root / "src" / f"package_{folder}" / "module"
        directory.mkdir(parents=True)
        for file in range(FILES_PER_FOLDER):
            (directory / f"file_{file}.py").write_text(lines)
    (root / "build").mkdir()
    for file in range(100):
        (root / "build" / f"generated_{file}.py").write_text(lines)
    (root / "big.txt").write_text(lines * 10)
    (root / "edit.txt").write_text("count 0\n")
    (root / "evil.txt").write_text("a" * 100_000 + "b\n")
    return FOLDERS * FILES_PER_FOLDER * LINES_PER_FILE


def run(registry: ToolRegistry, name: str, **arguments: object) -> ToolResult:
    return registry.run(tool_call("call", name, orjson.dumps(arguments).decode()))


def median_ms(runs: int, registry: ToolRegistry, name: str, **arguments: object) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = run(registry, name, **arguments)
        times.append(time.perf_counter() - started)
        if result.is_error:
            raise SystemExit(f"{name} failed: {result.content[:200]}")
    return statistics.median(times) * 1000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        scanned = make_repository(root)
        registry = ToolRegistry([*file_tools(root), *search_tools(root)])
        budgeted = ToolRegistry(search_tools(root, grep_time_budget_s=BUDGET_S))
        print(f"file tools over {FOLDERS * FILES_PER_FOLDER} files, median of {runs} runs:")
        figures = {
            "glob **/*.py": median_ms(runs, registry, "glob", pattern="**/*.py"),
            f"grep, no match ({scanned:,} lines)": median_ms(
                runs, registry, "grep", pattern="no_such_name", path="src"
            ),
            "read_file 2,000 lines": median_ms(runs, registry, "read_file", path="big.txt"),
            "write_file 1 KiB": median_ms(
                runs, registry, "write_file", path="out/new.txt", content="x" * 1024
            ),
            "edit_file": median_ms(
                runs, registry, "edit_file", path="edit.txt", old_text="count ", new_text="count x"
            ),
        }
        for label, milliseconds in figures.items():
            print(f"  {label:<36} {milliseconds:8.1f} ms")
        started = time.perf_counter()
        result = run(budgeted, "grep", pattern=r"(a+)+$", path="evil.txt")
        elapsed = time.perf_counter() - started
        print(
            f"  grep (a+)+$ over a 100,000-char line: {result.error_code} after {elapsed:.1f} s "
            f"(budget {BUDGET_S:g} s)"
        )


if __name__ == "__main__":
    main()
