"""The shell adapter and the bash tool, with real bash processes; what a command prints
and how it ends read the same unconfined and in the sandbox (`shell_sandbox`), and nothing
a command started outlives it in either."""

from __future__ import annotations

import os
import select
import signal
import threading
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.sandbox import sandbox_available
from agent_tutorial.adapters.shell import run_command
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.sandbox import SandboxPolicy
from agent_tutorial.core.tools import CommandOutcome, ToolRegistry, ToolResult
from agent_tutorial.features.bash import BashSettings
from agent_tutorial.features.builtin_tools import bash_tool
from tests.conftest import processes_with_marker, sleeping, wait_until

needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfd")
SANDBOX_UNAVAILABLE = sandbox_available()
needs_the_sandbox = pytest.mark.skipif(
    SANDBOX_UNAVAILABLE is not None, reason=f"no sandbox here: {SANDBOX_UNAVAILABLE}"
)


def workspace_sandbox(workspace: Path) -> SandboxPolicy:
    private_tmp = workspace.parent / "private-tmp"
    private_tmp.mkdir(exist_ok=True)
    return SandboxPolicy(
        mode="workspace-write",
        network=False,
        workspace=workspace,
        private_tmp=private_tmp,
        home=workspace.parent / "home",
    )


@pytest.fixture(params=["unconfined", pytest.param("sandboxed", marks=needs_the_sandbox)])
def shell_sandbox(request: pytest.FixtureRequest, workspace: Path) -> SandboxPolicy | None:
    return None if request.param == "unconfined" else workspace_sandbox(workspace)


def run_bash(
    workspace: Path, sandbox: SandboxPolicy | None = None, **arguments: object
) -> ToolResult:
    registry = ToolRegistry([bash_tool(workspace, BashSettings(sandbox=sandbox))])
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


def test_merges_stdout_and_stderr_and_reports_the_exit_code(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_command(
        "echo out; echo err >&2; exit 3", cwd=workspace, timeout_s=10, sandbox=shell_sandbox
    )

    assert (result.exit_code, result.output, result.timed_out) == (3, "out\nerr\n", False)
    assert (result.total_bytes, result.truncated) == (8, False)


def test_runs_in_the_given_directory(workspace: Path, shell_sandbox: SandboxPolicy | None) -> None:
    result = run_command("pwd", cwd=workspace, timeout_s=10, sandbox=shell_sandbox)

    assert result.output == f"{workspace.resolve()}\n"


def test_stdin_is_empty_so_a_reader_does_not_wait(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_command("cat; echo done", cwd=workspace, timeout_s=10, sandbox=shell_sandbox)

    assert (result.output, result.exit_code) == ("done\n", 0)


def test_bytes_that_are_not_utf8_are_shown_as_escapes(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_command(
        r"printf 'ok \xff\xfe end'", cwd=workspace, timeout_s=10, sandbox=shell_sandbox
    )

    assert result.output == r"ok \xff\xfe end"
    assert result.total_bytes == 9


def test_long_output_keeps_head_and_tail_with_exact_byte_accounting(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    command = "head -c 1000 /dev/zero | tr '\\0' a; head -c 1000 /dev/zero | tr '\\0' b"

    result = run_command(
        command, cwd=workspace, timeout_s=10, output_cap_bytes=100, sandbox=shell_sandbox
    )

    assert result.output == "a" * 50 + "\n… [1900 bytes omitted] …\n" + "b" * 50
    assert (result.total_bytes, result.truncated) == (2000, True)


def test_truncation_never_splits_a_character(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    # 100 two-byte characters; a 51-byte cap keeps a 25-byte head and a 26-byte tail.
    command = "for i in $(seq 100); do printf 'é'; done"

    result = run_command(
        command, cwd=workspace, timeout_s=10, output_cap_bytes=51, sandbox=shell_sandbox
    )

    assert result.output == "é" * 12 + "\n… [150 bytes omitted] …\n" + "é" * 13
    assert result.total_bytes == 200


def test_output_exactly_at_the_cap_is_not_truncated(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_command(
        "printf '%.0s-' $(seq 100)",
        cwd=workspace,
        timeout_s=10,
        output_cap_bytes=100,
        sandbox=shell_sandbox,
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


def test_bash_tool_reports_output_exit_code_and_size(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_bash(workspace, shell_sandbox, command="echo hello; exit 2")

    sandboxed = shell_sandbox is not None
    assert result == ToolResult(
        "hello\n[exit code 2 · 6 bytes of output]",
        sandboxed=sandboxed,
        command=CommandOutcome(2, output_tail=("hello",)),
    )


def test_bash_tool_says_when_there_was_no_output(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_bash(workspace, shell_sandbox, command="true")

    assert result.content == "(no output)\n[exit code 0 · 0 bytes of output]"


def test_bash_tool_timeout_is_an_error_with_the_partial_output(
    workspace: Path, shell_sandbox: SandboxPolicy | None
) -> None:
    result = run_bash(workspace, shell_sandbox, command="echo started; sleep 30", timeout_s=1)

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


# The sandbox: the command's pids are the sandbox's own, so its processes are found by the
# marker in their environment rather than by the pid they print.


@needs_the_sandbox
def test_a_timeout_stops_everything_in_the_sandbox(workspace: Path, marker: str) -> None:
    command = "setsid sleep 300 & sleep 300 & echo started; wait"

    result = run_command(command, cwd=workspace, timeout_s=1, sandbox=workspace_sandbox(workspace))

    assert (result.timed_out, result.output) == (True, "started\n")
    assert wait_until(lambda: processes_with_marker(marker) == [])


@needs_the_sandbox
def test_what_a_sandboxed_command_left_running_stops_when_bash_exits(
    workspace: Path, marker: str
) -> None:
    command = "sleep 30 & sleep 30 >/dev/null 2>&1 & nohup setsid sleep 30 >/dev/null 2>&1 &"

    result = run_command(command, cwd=workspace, timeout_s=30, sandbox=workspace_sandbox(workspace))

    assert (result.timed_out, result.exit_code) == (False, 0)
    assert wait_until(lambda: processes_with_marker(marker) == [])


@needs_the_sandbox
@pytest.mark.usefixtures("sigint_raises_keyboard_interrupt")
def test_keyboard_interrupt_stops_the_sandbox_and_propagates(workspace: Path, marker: str) -> None:
    # Inside, the command cannot signal us (its own pid namespace): Ctrl-C comes from a
    # thread that waits until the command's sleep runs.
    def press_ctrl_c() -> None:
        if wait_until(lambda: sleeping(marker)):
            os.kill(os.getpid(), signal.SIGINT)

    pressed = threading.Thread(target=press_ctrl_c)
    pressed.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_command(
                "sleep 300 & wait",
                cwd=workspace,
                timeout_s=30,
                sandbox=workspace_sandbox(workspace),
            )
    finally:
        pressed.join()

    assert wait_until(lambda: processes_with_marker(marker) == [])


@needs_the_sandbox
def test_a_command_killed_by_a_signal_in_the_sandbox_says_which(workspace: Path) -> None:
    result = run_bash(workspace, workspace_sandbox(workspace), command="kill -TERM $$")

    assert (
        result.content
        == "(no output)\n[exit code 143 = 128 + signal 15 (SIGTERM) · 0 bytes of output]"
    )


@pytest.mark.parametrize("code", [128, 129 + 64])
@needs_the_sandbox
def test_an_exit_code_that_is_no_signal_is_shown_as_it_is(workspace: Path, code: int) -> None:
    result = run_bash(workspace, workspace_sandbox(workspace), command=f"exit {code}")

    assert result.content == f"(no output)\n[exit code {code} · 0 bytes of output]"


def test_unconfined_128_plus_a_signal_is_an_ordinary_exit_code(workspace: Path) -> None:
    # Unconfined, a signal that killed bash comes as a negative code: 143 is what it said.
    result = run_bash(workspace, command="exit 143")

    assert result.content == "(no output)\n[exit code 143 · 0 bytes of output]"


@needs_the_sandbox
def test_a_sandboxed_denial_carries_the_note_and_an_ordinary_failure_does_not(
    workspace: Path,
) -> None:
    denied = run_bash(workspace, workspace_sandbox(workspace), command="touch /etc/x")
    failed = run_bash(workspace, workspace_sandbox(workspace), command="ls no-such-file")
    unconfined = run_bash(workspace, command="echo 'Read-only file system' >&2; exit 1")

    assert denied.content.endswith(
        "\n[sandbox] The command ran in the sandbox (workspace-write, network off), which may "
        "have denied it. If it needs more, ask the user to allow it: `sandbox_network = true` "
        "(`--sandbox-network`) or `--sandbox off`."
    )
    assert "[sandbox]" not in failed.content
    assert "[sandbox]" not in unconfined.content
    assert (denied.sandboxed, unconfined.sandboxed) == (True, False)


@needs_the_sandbox
def test_a_workspace_the_sandbox_cannot_use_is_a_tool_error(workspace: Path) -> None:
    policy = workspace_sandbox(workspace)
    (workspace.parent / "private-tmp").rmdir()

    result = run_bash(workspace, policy, command="true")

    assert (result.is_error, result.error_code) == (True, "sandbox_unavailable")
    assert "private temporary directory" in result.content
