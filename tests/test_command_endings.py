"""Issue 29, item 1: every tool line says how its call ended. A command's exit code, the
signal that killed it and a denial by the sandbox travel as data on the result (and so on
stream-json's `tool_finished`); the terminal shows them, with the output's last lines
under the line and a tool error's reason."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from agent_tutorial.adapters.sandbox import sandbox_available
from agent_tutorial.core.events import ToolFinished, ToolStarted
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.sandbox import SandboxMode, SandboxPolicy
from agent_tutorial.core.tools import CommandOutcome, ToolResult, tool_error, tool_success
from agent_tutorial.features.bash import BashInput, BashSettings, bash_tool, output_tail
from agent_tutorial.render import TerminalRenderer, tool_details, tool_line
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.terminal import Terminal

UNAVAILABLE = sandbox_available()
needs_sandbox = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no sandbox: {UNAVAILABLE}")


def ended(
    exit_code: int | None,
    *,
    signal: int | None = None,
    sandbox_denied: bool = False,
    output_tail: tuple[str, ...] = (),
) -> ToolResult:
    outcome = CommandOutcome(exit_code, signal, sandbox_denied, output_tail)
    return ToolResult(content="output", sandboxed=True, command=outcome)


# -- the line ---------------------------------------------------------------------------
def test_a_command_that_exits_non_zero_ends_its_line_with_a_red_cross_and_its_code() -> None:
    line = tool_line("bash", "make", ended(3), 0.17, width=80)

    assert line.plain == "✗ bash make  exit 3  sandboxed  0.17s"
    assert {span.style for span in line.spans if line.plain[span.start : span.end] == "✗ "} == {
        "red"
    }


def test_a_command_that_exits_zero_keeps_its_green_bullet_and_size() -> None:
    assert tool_line("bash", "make", ended(0), 0.17).plain == "• bash make  6 B  sandboxed  0.17s"


def test_a_command_killed_by_a_signal_says_which() -> None:
    line = tool_line("bash", "sleep 9", ended(137, signal=9), 1.0)

    assert line.plain == "✗ bash sleep 9  signal 9 (SIGKILL)  sandboxed  1.00s"


def test_a_command_the_sandbox_refused_says_so() -> None:
    line = tool_line("bash", "touch x", ended(1, sandbox_denied=True), 0.1)

    assert line.plain == "✗ bash touch x  denied by the sandbox  sandboxed  0.10s"


def test_a_failed_line_still_fits_forty_columns() -> None:
    line = tool_line("bash", "python3 -c 'exit(3)'", ended(1, sandbox_denied=True), 0.1, 40)

    assert len(line.plain) <= 40
    assert "denied by the sandbox" in line.plain


# -- under the line ---------------------------------------------------------------------
def test_the_output_tail_keeps_the_last_five_lines_that_hold_something() -> None:
    output = "".join(f"line {n}\n" for n in range(1, 9)) + "\n  \n"

    assert output_tail(output) == ("line 4", "line 5", "line 6", "line 7", "line 8")


def test_an_output_of_five_lines_is_shown_whole_and_an_empty_one_not_at_all() -> None:
    assert output_tail("a\nb\nc\nd\ne\n") == ("a", "b", "c", "d", "e")
    assert output_tail("") == ()
    assert output_tail("\n \n") == ()


def test_each_tail_line_is_cut_to_the_width_and_dimmed() -> None:
    result = ended(0, output_tail=("x" * 100, "short"))

    lines = tool_details(result, 40)

    assert [line.plain for line in lines] == ["  " + "x" * 37 + "…", "  short"]
    assert all(line.style == "dim" for line in lines)


def test_a_tail_line_exactly_as_wide_as_the_terminal_is_not_cut() -> None:
    exact, over = ended(0, output_tail=("x" * 38,)), ended(0, output_tail=("x" * 39,))

    assert [line.plain for line in tool_details(exact, 40)] == ["  " + "x" * 38]
    assert [line.plain for line in tool_details(over, 40)] == ["  " + "x" * 37 + "…"]


def test_a_tail_line_shows_control_characters_as_escapes() -> None:
    lines = tool_details(ended(1, output_tail=("\x1b[2Jgone",)), 80)

    assert [line.plain for line in lines] == ["  \\x1b[2Jgone"]


def test_a_tool_error_shows_its_reason_on_one_line() -> None:
    result = tool_error("invalid_arguments", "old_text: field required\nmore detail")

    lines = tool_details(result, 80)

    assert [line.plain for line in lines] == ["  old_text: field required"]


def test_an_interrupted_call_shows_no_reason_the_user_knows_already() -> None:
    assert tool_details(tool_error("interrupted", "the user pressed Ctrl-C"), 80) == []


def test_a_denied_call_shows_no_second_reason_under_its_decision_line() -> None:
    assert tool_details(tool_error("permission_denied", "the user declined"), 80) == []


def test_a_success_without_a_command_shows_nothing_under_its_line() -> None:
    assert tool_details(tool_success("text"), 80) == []


def test_the_renderer_prints_the_details_under_the_tool_line() -> None:
    err = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=80), Console(file=err, width=80), stream_answer=False
    )
    call = tool_call("c1", "bash", '{"command": "make"}')
    renderer.emit(ToolStarted(call, "make"))
    renderer.emit(ToolFinished(call, ended(2, output_tail=("make: *** Error 2",)), 0.5))

    assert err.getvalue() == "✗ bash make  exit 2  sandboxed  0.50s\n  make: *** Error 2\n"


# -- the bash tool's outcome, from real processes ----------------------------------------
@pytest.fixture
def scratch() -> Iterator[Path]:
    """Out of /tmp: each sandboxed command gets its own empty one."""
    base = Path(tempfile.mkdtemp(prefix="command-endings-", dir="/var/tmp"))
    for folder in ("workspace", "home", "tmp"):
        (base / folder).mkdir()
    yield base
    shutil.rmtree(base)


def policy(scratch: Path, mode: SandboxMode) -> SandboxPolicy:
    return SandboxPolicy(
        mode=mode,
        network=False,
        workspace=scratch / "workspace",
        private_tmp=scratch / "tmp",
        home=scratch / "home",
    )


RunBash = Callable[[str], CommandOutcome]


def bash_runner(scratch: Path, sandbox: SandboxPolicy | None) -> RunBash:
    tool = bash_tool(scratch / "workspace", BashSettings(sandbox=sandbox))

    def run(command: str) -> CommandOutcome:
        result = tool.handler(BashInput(command=command))
        assert result.command is not None
        return result.command

    return run


def unconfined(scratch: Path) -> RunBash:
    return bash_runner(scratch, None)


def test_a_command_carries_its_exit_code_and_its_last_lines(scratch: Path) -> None:
    outcome = unconfined(scratch)("seq 1 7; exit 3")

    assert outcome == CommandOutcome(3, output_tail=("3", "4", "5", "6", "7"))
    assert outcome.failed


def test_a_command_that_succeeds_has_not_failed(scratch: Path) -> None:
    outcome = unconfined(scratch)("true")

    assert outcome == CommandOutcome(0) and not outcome.failed


def test_an_unconfined_command_killed_by_a_signal_reports_it_as_the_shell_would(
    scratch: Path,
) -> None:
    assert unconfined(scratch)("kill -9 $$") == CommandOutcome(137, signal=9)


def test_an_unconfined_command_that_exits_with_137_itself_was_not_killed(scratch: Path) -> None:
    assert unconfined(scratch)("exit 137") == CommandOutcome(137)


@needs_sandbox
def test_a_sandboxed_command_killed_by_a_signal_reports_it(scratch: Path) -> None:
    run = bash_runner(scratch, policy(scratch, "workspace-write"))

    assert run("kill -9 $$") == CommandOutcome(137, signal=9)


@needs_sandbox
def test_a_write_the_sandbox_refused_is_marked_denied(scratch: Path) -> None:
    run = bash_runner(scratch, policy(scratch, "read-only"))

    outcome = run("touch made")

    assert outcome.sandbox_denied and outcome.exit_code == 1
    assert "Read-only file system" in outcome.output_tail[-1]


@needs_sandbox
def test_a_failure_without_a_sign_of_the_sandbox_is_not_marked_denied(scratch: Path) -> None:
    run = bash_runner(scratch, policy(scratch, "read-only"))

    assert run("echo no; exit 1") == CommandOutcome(1, output_tail=("no",))


# -- through the CLI ---------------------------------------------------------------------
@pytest.fixture
def workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The shared fixture's workspace, moved out of /tmp, which a sandboxed command sees
    as its own empty folder (the home is its parent, as in the shared fixture)."""
    home = Path(tempfile.mkdtemp(prefix="command-endings-cli-", dir="/var/tmp"))
    root = home / "project"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    yield root
    shutil.rmtree(home)


def finished_events(stdout: str) -> list[dict[str, object]]:
    events = [json.loads(line) for line in stdout.splitlines()]
    return [event for event in events if event.get("type") == "tool_finished"]


def test_stream_json_carries_the_exit_code_of_a_failed_command(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    calls = [("b1", "bash", {"command": "exit 3"}), ("b2", "bash", {"command": "true"})]
    loopback.queue(tool_stream(calls), text_stream("done"))

    run = run_cli(
        "run", "-c", "3", "-y", "--sandbox", "off", "--output-format", "stream-json", "-p", "go"
    )

    finished = finished_events(run.stdout)
    assert [event["exit_code"] for event in finished] == [3, 0]
    assert all("sandbox_denied" not in event for event in finished)


def test_stream_json_has_no_exit_code_for_a_tool_that_is_not_a_command(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(tool_stream([("r1", "read_file", {"path": "x"})]), text_stream("done"))

    run = run_cli("run", "-c", "3", "-y", "--output-format", "stream-json", "-p", "go")

    [finished] = finished_events(run.stdout)
    assert "exit_code" not in finished and "sandbox_denied" not in finished


@needs_sandbox
def test_stream_json_says_the_sandbox_denied_a_command(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(tool_stream([("b1", "bash", {"command": "touch x"})]), text_stream("done"))

    run = run_cli(
        "run", "-c", "3", "-y", "--sandbox", "read-only", "--output-format", "stream-json",
        "-p", "go",
    )  # fmt: skip

    [finished] = finished_events(run.stdout)
    assert (finished["exit_code"], finished["sandbox_denied"]) == (1, True)


@pytest.mark.parametrize("columns", [80, 40])
def test_a_failing_command_shows_its_exit_code_and_output_tail_on_a_terminal(
    make_terminal: Callable[..., Terminal], loopback: LoopbackServer, columns: int
) -> None:
    command = "python3 -c 'import sys; print(*range(1, 9), sep=chr(10)); sys.exit(3)'"
    loopback.queue(tool_stream([("b1", "bash", {"command": command})]), text_stream("done"))
    terminal = make_terminal("run", "-c", "3", "-y", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()

    terminal.enter("go")
    terminal.wait_for_text("done")

    lines = terminal.lines()
    [row] = [index for index, line in enumerate(lines) if line.startswith("✗ bash")]
    assert "exit 3" in lines[row]
    assert [line.strip() for line in lines[row + 1 : row + 6]] == ["4", "5", "6", "7", "8"]
    assert all(len(line) <= columns for line in lines)
