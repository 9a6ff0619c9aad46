"""How fast the command starts: the median wall and CPU time of `agent-tutorial --help` and
`--version` against a bare `python -c pass` on the same interpreter (target: under 8x),
and of `run -p` from launch to the moment its first request reaches a loopback server.

The three start-up commands run interleaved, so a machine that gets busier during the
run slows them alike; CPU time (user + system of the child) is the steadier figure on a
shared machine. Bytecode is cached in a scratch folder, as an installed package has it,
even where PYTHONDONTWRITEBYTECODE is set. Run with `make bench`
(`.venv/bin/python benchmarks/bench_startup.py [RUNS]`).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the loopback server lives with the tests

from tests.loopback import LoopbackServer, Reply, text_stream  # noqa: E402

TARGET_RATIO = 8.0
DEFAULT_RUNS = 21
FIRST_REQUEST_RUNS = 5
COMMAND = Path(sys.executable).with_name("agent-tutorial")


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of `argv`."""
    cpu_before, started = child_cpu_seconds(), time.perf_counter()
    subprocess.run(
        argv, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    return time.perf_counter() - started, child_cpu_seconds() - cpu_before


def cached_bytecode(bytecode: Path) -> dict[str, str]:
    """The environment with bytecode written to (and read from) `bytecode`."""
    environment = {**os.environ, "PYTHONPYCACHEPREFIX": str(bytecode)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def startup_medians(runs: int, environment: dict[str, str]) -> dict[str, tuple[float, float]]:
    """Per command, the median (wall, CPU) seconds."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "agent-tutorial --help": [str(COMMAND), "--help"],
        "agent-tutorial --version": [str(COMMAND), "--version"],
    }
    for argv in commands.values():  # warm the file cache and write the bytecode
        timed(argv, environment)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(timed(argv, environment))
    return {
        name: (
            statistics.median(wall for wall, _ in values),
            statistics.median(cpu for _, cpu in values),
        )
        for name, values in times.items()
    }


def first_request_seconds(
    server: LoopbackServer, workspace: Path, environment: dict[str, str]
) -> float:
    """Launch `run -p` and time until the server sees its first request."""
    arrived = threading.Event()
    arrived_at: list[float] = []

    def answer(_body: dict[str, Any]) -> Reply:
        arrived_at.append(time.perf_counter())
        arrived.set()
        return text_stream("ok")

    server.queue(answer)
    environment = {
        **environment,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-bench",
        "AGENT_TUTORIAL_MODEL": "bench-model",
        "AGENT_TUTORIAL_CONTEXT_WINDOW": "128000",  # no probing request before the first one
        "HOME": str(workspace),
    }
    started = time.perf_counter()
    subprocess.run(
        [str(COMMAND), "run", "-c", "8", "-p", "hello"],
        cwd=workspace,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    if not arrived.is_set():
        raise RuntimeError("the run ended without sending a request")
    return arrived_at[0] - started


def first_request_median(runs: int, environment: dict[str, str]) -> float:
    server = LoopbackServer()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            first_request_seconds(server, Path(scratch), environment)  # warm-up
            return statistics.median(
                first_request_seconds(server, Path(scratch), environment) for _ in range(runs)
            )
    finally:
        server.stop()


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    with tempfile.TemporaryDirectory() as bytecode:
        environment = cached_bytecode(Path(bytecode))
        medians = startup_medians(runs, environment)
        first = first_request_median(FIRST_REQUEST_RUNS, environment)
    bare_wall, bare_cpu = medians["python -c pass"]
    print(f"start-up, median of {runs} interleaved runs (target: under {TARGET_RATIO:g}x bare):")
    worst = 0.0
    for name, (wall, cpu) in medians.items():
        ratio = wall / bare_wall
        if name != "python -c pass":
            worst = max(worst, ratio)
        print(
            f"  {name:<26} wall {wall * 1000:6.1f} ms {ratio:5.1f}x"
            f"   cpu {cpu * 1000:6.1f} ms {cpu / bare_cpu:5.1f}x"
        )
    print(
        f"  run -p, launch to first request (median of {FIRST_REQUEST_RUNS}): {first * 1000:.0f} ms"
    )
    verdict = "within" if worst < TARGET_RATIO else "OVER"
    print(f"  {verdict} target: worst wall-clock ratio {worst:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
