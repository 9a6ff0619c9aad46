"""No process outlives the bash call or hook that started it, even one that left the
command's process group: the CLI (a real subprocess, so `main()` makes it a subreaper)
finds and kills what escaped. Processes are found by `conftest.processes_with_marker`."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import WAIT_S, RunCli, processes_with_marker
from tests.loopback import LoopbackServer, text_stream, tool_stream

DAEMON = (
    "import os, time\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "time.sleep(60)\n"
)
# The interpreter itself, not the virtual environment's link to it: bash runs in the sandbox,
# whose /tmp is its own, so a checkout under /tmp (a fresh clone) has no .venv in there.
INTERPRETER = os.path.realpath(sys.executable)
ESCAPES = {
    "setsid &": "setsid sleep 60 >/dev/null 2>&1 &",
    "setsid -f": "setsid -f sleep 60 >/dev/null 2>&1",
    "setsid -f holding the pipe": "setsid -f sleep 60",
    "nohup &": "nohup sleep 60 >/dev/null 2>&1 &",
    "double-forked daemon": f"{shlex.quote(INTERPRETER)} -c {shlex.quote(DAEMON)}",
}


@pytest.mark.parametrize("command", ESCAPES.values(), ids=ESCAPES.keys())
def test_nothing_a_bash_call_started_survives_it(
    run_cli_process: RunCli, loopback: LoopbackServer, marker: str, command: str
) -> None:
    loopback.queue(tool_stream([("call-1", "bash", {"command": command})]), text_stream("done"))

    finished = run_cli_process("run", "--chapter", "2", "--prompt", "start it", timeout_s=WAIT_S)
    assert finished.exit_code == 0, finished.stderr

    assert processes_with_marker(marker) == []
    tool_result = loopback.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert "exit code 0" in tool_result["content"]


def test_nothing_a_hook_started_survives_it(
    workspace: Path, run_cli_process: RunCli, loopback: LoopbackServer, marker: str
) -> None:
    config = workspace / ".agent_tutorial" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        "[[hooks.PreToolUse]]\n"
        f"command = {ESCAPES['setsid -f']!r}\n"
        "[[hooks.PostToolUse]]\n"
        f"command = {ESCAPES['double-forked daemon']!r}\n"
    )
    loopback.queue(tool_stream([("call-1", "bash", {"command": "true"})]), text_stream("done"))

    finished = run_cli_process("run", "--chapter", "4", "-y", "--prompt", "go", timeout_s=WAIT_S)
    assert finished.exit_code == 0, finished.stderr

    assert processes_with_marker(marker) == []
    assert "exit code 0" in loopback.requests[1]["messages"][-1]["content"]


def test_reaping_escapees_leaves_the_commands_own_exit_status(
    run_cli_process: RunCli, loopback: LoopbackServer, marker: str
) -> None:
    command = f"{ESCAPES['double-forked daemon']}; {ESCAPES['setsid -f']}; exit 7"
    loopback.queue(tool_stream([("call-1", "bash", {"command": command})]), text_stream("done"))

    finished = run_cli_process("run", "--chapter", "2", "--prompt", "start it", timeout_s=WAIT_S)
    assert finished.exit_code == 0, finished.stderr

    assert processes_with_marker(marker) == []
    assert "[exit code 7" in loopback.requests[1]["messages"][-1]["content"]
