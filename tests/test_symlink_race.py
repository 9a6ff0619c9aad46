"""The goal test for race-free file access: while another process swaps a directory for a
symlink to the outside as fast as it can (`renameat2(RENAME_EXCHANGE)`), a CLI run whose
model keeps reading, grepping, globbing, writing and editing through that directory reads
nothing from outside, writes nothing there, leaves no temporary file and never crashes.

It runs a few seconds by default and 20 s under CI=true; AGENT_TUTORIAL_RACE_SECONDS sets
the duration."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRun
from tests.loopback import LoopbackServer, Reply, text_stream, tool_stream

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="renameat2 is Linux-only")

RACE_SECONDS = float(
    os.environ.get("AGENT_TUTORIAL_RACE_SECONDS") or (20 if os.environ.get("CI") else 3)
)
OUTSIDE_SECRET = "OUTSIDE-SECRET"
CALL_BATCHES = 4
"""Each model turn calls every file tool this many times (turns cost an HTTP round trip)."""

SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
os.chdir(sys.argv[1])
print("swapping", flush=True)
while True:
    if libc.renameat2(AT_FDCWD, b"dir", AT_FDCWD, b"link", RENAME_EXCHANGE) != 0:
        sys.exit(f"renameat2 failed: errno {ctypes.get_errno()}")
"""


@pytest.fixture
def outside(workspace: Path) -> Path:
    directory = workspace.parent / "outside"
    directory.mkdir()
    (directory / "inside.txt").write_text(f"{OUTSIDE_SECRET} INSIDE\n")
    return directory


@pytest.fixture
def swapping(workspace: Path, outside: Path) -> Iterator[Callable[[], None]]:
    """`dir` (a real directory) and `link` (a symlink to the outside) trade names
    continuously in another process, until the test calls the function it gets."""
    (workspace / "dir").mkdir()
    (workspace / "dir" / "inside.txt").write_text("INSIDE\n")
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(workspace)], stdout=subprocess.PIPE, text=True
    )

    def stop() -> None:
        if swapper.returncode is not None:  # already stopped
            return
        ended_early = swapper.poll() is not None
        swapper.kill()
        swapper.wait()
        assert swapper.stdout is not None
        swapper.stdout.close()
        assert not ended_early, "the swapper stopped on its own"

    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "swapping\n"
        yield stop
    finally:
        stop()


def attack_turns(loopback: LoopbackServer, seconds: float) -> Callable[[dict[str, Any]], Reply]:
    """A model that calls every file tool on `dir/` for `seconds` from its first request."""
    deadline = 0.0
    turn = 0

    def reply(_request: dict[str, Any]) -> Reply:
        nonlocal turn, deadline
        turn += 1
        deadline = deadline or time.monotonic() + seconds
        if time.monotonic() > deadline:
            return text_stream(f"done after {turn - 1} turns")
        loopback.queue(reply)
        return tool_stream(
            call
            for copy in range(CALL_BATCHES)
            for call in [
                (f"r{turn}-{copy}", "read_file", {"path": "dir/inside.txt"}),
                (f"g{turn}-{copy}", "grep", {"pattern": "INSIDE", "path": "dir"}),
                (f"l{turn}-{copy}", "glob", {"pattern": "**/*", "path": "dir"}),
                (f"w{turn}-{copy}", "write_file", {"path": f"dir/{turn}-{copy}", "content": "x"}),
                (
                    f"e{turn}-{copy}",
                    "edit_file",
                    {"path": "dir/inside.txt", "old_text": "INSIDE", "new_text": "INSIDE!"},
                ),
            ]
        )

    return reply


def tool_outputs(loopback: LoopbackServer) -> list[str]:
    return [
        message["content"]
        for request in loopback.requests
        for message in request["messages"]
        if message["role"] == "tool"
    ]


def test_file_tools_never_reach_outside_while_a_directory_is_swapped_for_a_symlink(
    workspace: Path,
    outside: Path,
    swapping: Callable[[], None],
    loopback: LoopbackServer,
    run_cli_process: Callable[..., CliRun],
) -> None:
    loopback.queue(attack_turns(loopback, RACE_SECONDS))

    run = run_cli_process(
        "run",
        "--chapter",
        "3",
        "-y",
        "--max-turns",
        "1000000",
        "-p",
        "race",
        timeout_s=RACE_SECONDS + 120,
    )

    swapping()  # stop, so the checks below see a still workspace
    assert run.exit_code == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert "done after" in run.stdout, run.stdout
    outputs = tool_outputs(loopback)
    assert len(outputs) >= 50, "too few tool calls ran to say anything about the race"
    assert not [output for output in outputs if OUTSIDE_SECRET in output]
    assert sorted(path.name for path in outside.iterdir()) == ["inside.txt"]
    assert (outside / "inside.txt").read_text() == f"{OUTSIDE_SECRET} INSIDE\n"
    for directory in (workspace / "dir", workspace / "link"):
        real = directory.resolve()
        if real != outside:
            assert not list(real.glob(".*.tmp")), "a temporary file was left behind"
