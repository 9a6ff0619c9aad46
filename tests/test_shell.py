"""The shell adapter and the bash tool, with real bash processes."""

from __future__ import annotations

import os
import select
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.shell import run_command
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import bash_tool

needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfd")


def run_bash(workspace: Path, **arguments: object) -> ToolResult:
    registry = ToolRegistry([bash_tool(workspace)])
    return registry.run(tool_call("call-1", "bash", orjson.dumps(arguments).decode()))


def exits_within(pid: int, seconds: float) -> bool:
    """Wait for the process to exit (a zombie counts as exited: it no longer runs)."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([handle], [], [], seconds)
        return bool(readable)
    finally:
        os.close(handle)


def test_merges_stdout_and_stderr_and_reports_the_exit_code(workspace: Path) -> None:
    result = run_command("echo out; echo err >&2; exit 3", cwd=workspace, timeout_s=10)

    assert (result.exit_code, result.output, result.timed_out) == (3, "out\nerr\n", False)
    assert (result.total_bytes, result.truncated) == (8, False)


def test_runs_in_the_given_directory(workspace: Path) -> None:
    result = run_command("pwd", cwd=workspace, timeout_s=10)

    assert result.output == f"{workspace.resolve()}\n"


def test_stdin_is_empty_so_a_reader_does_not_wait(workspace: Path) -> None:
    result = run_command("cat; echo done", cwd=workspace, timeout_s=10)

    assert (result.output, result.exit_code) == ("done\n", 0)


def test_bytes_that_are_not_utf8_are_shown_as_escapes(workspace: Path) -> None:
    result = run_command(r"printf 'ok \xff\xfe end'", cwd=workspace, timeout_s=10)

    assert result.output == r"ok \xff\xfe end"
    assert result.total_bytes == 9


def test_long_output_keeps_head_and_tail_with_exact_byte_accounting(workspace: Path) -> None:
    command = "head -c 1000 /dev/zero | tr '\\0' a; head -c 1000 /dev/zero | tr '\\0' b"

    result = run_command(command, cwd=workspace, timeout_s=10, output_cap_bytes=100)

    assert result.output == "a" * 50 + "\n… [1900 bytes omitted] …\n" + "b" * 50
    assert (result.total_bytes, result.truncated) == (2000, True)


def test_truncation_never_splits_a_character(workspace: Path) -> None:
    # 100 two-byte characters; a 51-byte cap keeps a 25-byte head and a 26-byte tail.
    command = "for i in $(seq 100); do printf 'é'; done"

    result = run_command(command, cwd=workspace, timeout_s=10, output_cap_bytes=51)

    assert result.output == "é" * 12 + "\n… [150 bytes omitted] …\n" + "é" * 13
    assert result.total_bytes == 200


def test_output_exactly_at_the_cap_is_not_truncated(workspace: Path) -> None:
    result = run_command(
        "printf '%.0s-' $(seq 100)", cwd=workspace, timeout_s=10, output_cap_bytes=100
    )

    assert (result.output, result.truncated) == ("-" * 100, False)


@needs_pidfd
def test_timeout_kills_the_whole_process_group(workspace: Path) -> None:
    result = run_command("sleep 300 & echo $!; wait", cwd=workspace, timeout_s=1)

    assert (result.timed_out, result.exit_code) == (True, None)
    assert exits_within(int(result.output), seconds=5)


@needs_pidfd
def test_background_child_holding_the_pipe_is_stopped_when_bash_exits(workspace: Path) -> None:
    result = run_command("sleep 30 & echo $!", cwd=workspace, timeout_s=30)

    assert (result.timed_out, result.exit_code) == (False, 0)
    assert exits_within(int(result.output), seconds=5)


@needs_pidfd
def test_detached_background_child_is_stopped_when_bash_exits(workspace: Path) -> None:
    result = run_command("sleep 30 >/dev/null 2>&1 & echo $!", cwd=workspace, timeout_s=30)

    assert result.exit_code == 0
    assert exits_within(int(result.output), seconds=5)


@needs_pidfd
@pytest.mark.usefixtures("sigint_raises_keyboard_interrupt")
def test_keyboard_interrupt_kills_the_group_and_propagates(workspace: Path) -> None:
    # bash's parent is this test process: the command presses Ctrl-C on us while it runs.
    command = "sleep 300 & echo $! > child.pid; kill -INT $PPID; wait"

    with pytest.raises(KeyboardInterrupt):
        run_command(command, cwd=workspace, timeout_s=30)

    assert exits_within(int((workspace / "child.pid").read_text()), seconds=5)


def test_bash_tool_reports_output_exit_code_and_size(workspace: Path) -> None:
    result = run_bash(workspace, command="echo hello; exit 2")

    assert result == ToolResult("hello\n[exit code 2 · 6 bytes of output]")


def test_bash_tool_says_when_there_was_no_output(workspace: Path) -> None:
    result = run_bash(workspace, command="true")

    assert result.content == "(no output)\n[exit code 0 · 0 bytes of output]"


def test_bash_tool_timeout_is_an_error_with_the_partial_output(workspace: Path) -> None:
    result = run_bash(workspace, command="echo started; sleep 30", timeout_s=1)

    assert (result.is_error, result.error_code) == (True, "timeout")
    assert "longer than 1 s" in result.content
    assert "started\n[timed out · 8 bytes of output]" in result.content


@pytest.mark.parametrize("timeout_s", [0, 601])
def test_bash_tool_rejects_timeouts_outside_1_to_600_seconds(
    workspace: Path, timeout_s: int
) -> None:
    result = run_bash(workspace, command="true", timeout_s=timeout_s)

    assert result.error_code == "invalid_arguments"
    assert "timeout_s" in result.content
