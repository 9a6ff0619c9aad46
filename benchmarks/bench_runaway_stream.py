"""What a runaway server costs a run: a loopback server that sends 1 GB once (endless text,
one call's endless arguments, one line that never ends), and one that holds its reply open
with keepalive comments or never answers at all.

For each 1 GB stream, over a few runs: the CLI's exit code, its error, its peak resident
memory (beside an ordinary run's, as a ratio), the time from the request's arrival at the
server to the CLI's exit (start-up, a second or more on a busy machine, is left out), and
how much of the gigabyte the server had written when the client hung up. For the two that
never end: that time against `request_timeout_s`, and the requests sent.
Run with `make bench` (`.venv/bin/python benchmarks/bench_runaway_stream.py [RUNS]`).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the loopback server lives with the tests

from tests.loopback import LoopbackServer, Reply, text_stream  # noqa: E402
from tests.loopback_quirks import (  # noqa: E402
    RawStream,
    endless_arguments,
    endless_content,
    endless_line,
    keepalive_trickle,
)

DEFAULT_RUNS = 3
GIGABYTE = 1 << 30
DEADLINE_S = 3.0
KEEPALIVE_EVERY_S = 0.5
COMMAND = Path(sys.executable).with_name("agent-tutorial")
MIB = 1 << 20


@dataclass
class Measured:
    exit_code: int
    peak_rss_bytes: int
    exited_at: float
    last_error_line: str
    arrived_at: float = 0.0
    """When the server received the run's request (`perf_counter`)."""

    @property
    def request_to_exit_s(self) -> float:
        return self.exited_at - self.arrived_at


def arriving(reply: Reply, arrivals: list[float]) -> Callable[[dict[str, Any]], Reply]:
    """`reply`, noting when its request arrived."""

    def served(_body: dict[str, Any]) -> Reply:
        arrivals.append(time.perf_counter())
        return reply

    return served


def once(total: int, stream: RawStream, sent: list[int]) -> RawStream:
    """`stream` cut at `total` bytes; `sent` gets what the server had written when the
    client hung up (the kernel's socket buffers hold some of it unread)."""

    def limited() -> Iterator[bytes]:
        written = 0
        try:
            for data in stream():
                data = data[: total - written]
                yield data
                written += len(data)
                if written >= total:
                    return
        finally:
            sent.append(written)

    return limited


def run_cli(server: LoopbackServer, reply: Reply, workspace: Path, **env: str) -> Measured:
    """One `agent-tutorial` run against `reply` to its end; its peak memory from the kernel
    (`wait4`)."""
    arrivals: list[float] = []
    server.queue(arriving(reply, arrivals))
    environment = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "sk-bench",
        "AGENT_TUTORIAL_MODEL": "bench-model",
        "HOME": str(workspace),
        **env,
    }
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(
            [str(COMMAND), "run", "--chapter", "2", "-p", "go"],
            cwd=workspace,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        _, status, usage = os.wait4(child.pid, 0)
        exited_at = time.perf_counter()
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        lines = stderr.read().strip().splitlines()
    return Measured(
        exit_code=child.returncode,
        peak_rss_bytes=usage.ru_maxrss * 1024,
        exited_at=exited_at,
        last_error_line=lines[-1] if lines else "",
        arrived_at=arrivals[0] if arrivals else exited_at,
    )


def ordinary(server: LoopbackServer, workspace: Path) -> Measured:
    return run_cli(server, text_stream("ok"), workspace)


RUNAWAYS: dict[str, Callable[[], RawStream]] = {
    "endless text": endless_content,
    "endless arguments": endless_arguments,
    "one endless line": endless_line,
}


def runaway(server: LoopbackServer, workspace: Path, name: str) -> tuple[Measured, int]:
    sent: list[int] = []
    measured = run_cli(server, Reply(raw_stream=once(GIGABYTE, RUNAWAYS[name](), sent)), workspace)
    return measured, sent[0] if sent else 0


def never_ending(server: LoopbackServer, workspace: Path, reply: Reply) -> tuple[Measured, int]:
    server.requests.clear()  # a retry would be sent a 500 ("no reply queued"), and counted
    timeout = {"AGENT_TUTORIAL_REQUEST_TIMEOUT_S": f"{DEADLINE_S:g}"}
    measured = run_cli(server, reply, workspace, **timeout)
    return measured, len(server.requests)


def mib(size: float) -> str:
    return f"{size / MIB:.1f} MiB"


def report_runaways(server: LoopbackServer, workspace: Path, runs: int) -> None:
    ordinary(server, workspace)  # warm the file cache
    base = [ordinary(server, workspace) for _ in range(runs)]
    base_rss = statistics.median(m.peak_rss_bytes for m in base)
    base_wall = statistics.median(m.request_to_exit_s for m in base)
    print(f"1 GB sent once, median of {runs} runs (chapter 2, default caps):")
    print(
        f"  {'an ordinary run':<20} peak RSS {mib(base_rss):>10}"
        f"          request to exit {base_wall:5.2f} s"
    )
    for name in RUNAWAYS:
        results = [runaway(server, workspace, name) for _ in range(runs)]
        rss = statistics.median(m.peak_rss_bytes for m, _ in results)
        wall = statistics.median(m.request_to_exit_s for m, _ in results)
        sent = statistics.median(s for _, s in results)
        codes = sorted({m.exit_code for m, _ in results})
        print(
            f"  {name:<20} peak RSS {mib(rss):>10} ({rss / base_rss:.2f}x)"
            f"   request to exit {wall:5.2f} s   server wrote {mib(sent)}   exit {codes}"
        )
        print(f"    {results[-1][0].last_error_line}")


def report_never_ending(server: LoopbackServer, workspace: Path, runs: int) -> None:
    never = threading.Event()  # never set: the held replies' threads end with the process
    cases = {
        f"keepalive every {KEEPALIVE_EVERY_S:g} s": Reply(
            raw_stream=keepalive_trickle(lambda: time.sleep(KEEPALIVE_EVERY_S))
        ),
        "accepted, never answered": Reply(hold=never),
    }
    print(f"never-ending replies, request_timeout_s = {DEADLINE_S:g}, median of {runs} runs:")
    for name, reply in cases.items():
        results = [never_ending(server, workspace, reply) for _ in range(runs)]
        wall = statistics.median(m.request_to_exit_s for m, _ in results)
        requests = sorted({count for _, count in results})
        print(
            f"  {name:<26} request to exit {wall:5.2f} s ({wall / DEADLINE_S:.2f}x the "
            f"deadline)   requests {requests}   exit {sorted({m.exit_code for m, _ in results})}"
        )
        print(f"    {results[-1][0].last_error_line}")


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    server = LoopbackServer()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            report_runaways(server, Path(scratch), runs)
            report_never_ending(server, Path(scratch), runs)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
