"""Ctrl-C for real: SIGINT while a bash tool sleeps (in the loop, in the REPL and in the
one-shot CLI as a subprocess) and while the model is still answering; SIGTERM and SIGHUP
to the CLI end a run the same way. Processes are found by `conftest.processes_with_marker`.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from agent_tutorial.conversation import Conversation
from agent_tutorial.core.loop import AgentRunner, TurnInterrupted
from agent_tutorial.core.messages import (
    ToolMessage,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import ModelReply, ModelRequest
from agent_tutorial.core.tools import ToolRegistry
from agent_tutorial.features.builtin_tools import bash_tool
from agent_tutorial.features.sessions import load_session
from agent_tutorial.render import TerminalRenderer
from agent_tutorial.repl import Repl
from agent_tutorial.resuming import choose_session
from agent_tutorial.run_summary import RunSummary
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply
from tests.conftest import (
    LOOPBACK_MODEL,
    WAIT_S,
    open_loopback_conversation,
    processes_with_marker,
    sleeping,
    start_cli,
    wait_until,
)
from tests.loopback import LoopbackServer, Reply, exchanged, text_stream, tool_stream
from tests.terminal import Terminal

pytestmark = pytest.mark.usefixtures("sigint_raises_keyboard_interrupt")

MakeTerminal = Callable[..., Terminal]

INTERRUPTED = "Error [interrupted]: the user interrupted this tool call"
SLEEP = {"command": "sleep 60", "timeout_s": 20}  # the timeout only bounds a failed test
# Far below the 20 s tool timeout, so passing means the interrupt ended the call; loose
# enough for a loaded machine (an idle one exits in about 0.5 s).
PROMPTLY_S = 10.0


class SigintWhenSleeping(threading.Thread):
    """Sends SIGINT to this process, as Ctrl-C would, once the marked `sleep` runs."""

    def __init__(self, marker: str) -> None:
        super().__init__(daemon=True)
        self.marker = marker
        self.sent_at: float | None = None

    def run(self) -> None:
        if wait_until(lambda: sleeping(self.marker)):
            self.sent_at = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)


def continued_session(workspace: Path) -> Path:
    """The session `--continue` resumes."""
    choice = choose_session(workspace, True, None)
    assert choice is not None
    return choice.path


def bash_runner(workspace: Path, model: ScriptedModel) -> AgentRunner:
    tools = ToolRegistry()
    tools.register(bash_tool(workspace))
    return AgentRunner(model, tools)


def test_sigint_during_bash_ends_the_turn_paired_promptly(workspace: Path, marker: str) -> None:
    model = ScriptedModel(
        [tool_reply(tool_call("call-sleep", "bash", json.dumps(SLEEP))), text_reply("resumed")]
    )
    runner = bash_runner(workspace, model)
    sender = SigintWhenSleeping(marker)
    sender.start()

    with pytest.raises(TurnInterrupted):
        runner.run("wait a minute")

    assert sender.sent_at is not None
    assert time.monotonic() - sender.sent_at < PROMPTLY_S
    assert processes_with_marker(marker) == []
    validate_tool_pairing(runner.history)
    assert runner.history[-1] == tool_message(INTERRUPTED, "call-sleep")


def test_after_an_interrupt_the_runner_takes_another_turn(workspace: Path, marker: str) -> None:
    model = ScriptedModel(
        [tool_reply(tool_call("call-sleep", "bash", json.dumps(SLEEP))), text_reply("resumed")]
    )
    runner = bash_runner(workspace, model)
    SigintWhenSleeping(marker).start()
    with pytest.raises(TurnInterrupted):
        runner.run("wait a minute")

    result = runner.run("never mind")

    assert result.final_text == "resumed"
    second = model.requests[1].messages
    assert tool_message(INTERRUPTED, "call-sleep") in second
    assert second[-1].content == "never mind"
    model.assert_exhausted()


def test_calls_after_the_interrupted_one_never_run(workspace: Path, marker: str) -> None:
    model = ScriptedModel(
        [
            tool_reply(
                tool_call("call-sleep", "bash", json.dumps(SLEEP)),
                tool_call("call-touch", "bash", json.dumps({"command": "touch ran.txt"})),
            )
        ]
    )
    runner = bash_runner(workspace, model)
    SigintWhenSleeping(marker).start()

    with pytest.raises(TurnInterrupted):
        runner.run("two calls")

    assert not (workspace / "ran.txt").exists()
    assert runner.history[-2:] == [
        tool_message(INTERRUPTED, "call-sleep"),
        tool_message(INTERRUPTED, "call-touch"),
    ]


@dataclass
class ReplUnderTest:
    repl: Repl
    conversation: Conversation
    stderr: io.StringIO


@pytest.fixture
def repl_at_chapter_2(workspace: Path, loopback: LoopbackServer) -> Iterator[ReplUnderTest]:
    """A REPL whose stderr console claims to be a terminal, so the spinner really runs."""
    with ExitStack() as cleanup:
        stderr = io.StringIO()
        renderer = TerminalRenderer(
            Console(file=io.StringIO(), width=100),
            Console(file=stderr, width=100, force_terminal=True),
            stream_answer=True,
            markdown=True,
        )
        summary = RunSummary()
        conversation = open_loopback_conversation(
            cleanup, workspace, loopback, 2, [summary, renderer]
        )
        yield ReplUnderTest(
            Repl(conversation, summary, renderer, model_name=LOOPBACK_MODEL), conversation, stderr
        )


def live_display_threads() -> list[threading.Thread]:
    """Threads that keep redrawing a rich spinner or live answer."""
    return [thread for thread in threading.enumerate() if type(thread).__name__ == "_RefreshThread"]


def test_repl_reports_an_interrupted_tool_and_stops_its_spinner(
    repl_at_chapter_2: ReplUnderTest, loopback: LoopbackServer, marker: str
) -> None:
    loopback.queue(tool_stream([("call-sleep", "bash", SLEEP)]))
    SigintWhenSleeping(marker).start()

    goes_on = repl_at_chapter_2.repl.handle("wait a minute")

    assert goes_on
    shown = Text.from_ansi(repl_at_chapter_2.stderr.getvalue()).plain  # without its colours
    assert "✗ bash sleep 60  Error [interrupted]" in shown
    assert shown.index("✗ bash sleep 60") < shown.index("interrupted; the conversation goes on")
    assert "error:" not in repl_at_chapter_2.stderr.getvalue()
    assert wait_until(lambda: not live_display_threads(), timeout_s=2.0)  # stop() does not join
    assert processes_with_marker(marker) == []


def test_repl_turn_after_an_interrupt_carries_the_paired_result(
    repl_at_chapter_2: ReplUnderTest, loopback: LoopbackServer, marker: str
) -> None:
    loopback.queue(tool_stream([("call-sleep", "bash", SLEEP)]), text_stream("fine"))
    SigintWhenSleeping(marker).start()
    repl_at_chapter_2.repl.handle("wait a minute")

    repl_at_chapter_2.repl.handle("never mind")

    sent = loopback.requests[1]["messages"]
    assert {"role": "tool", "tool_call_id": "call-sleep", "content": INTERRUPTED} in sent
    assert sent[-1] == {"role": "user", "content": "never mind"}


def test_ctrl_c_while_the_model_answers_runs_no_tool_and_the_repl_goes_on(
    repl_at_chapter_2: ReplUnderTest, loopback: LoopbackServer, workspace: Path
) -> None:
    released = threading.Event()

    def interrupt_before_answering(_body: dict[str, Any]) -> Reply:
        os.kill(os.getpid(), signal.SIGINT)
        released.wait(WAIT_S)
        return tool_stream([("call-touch", "bash", {"command": "touch ran.txt"})])

    loopback.queue(interrupt_before_answering, text_stream("fresh start"))
    try:
        repl_at_chapter_2.repl.handle("first")
    finally:
        released.set()

    repl_at_chapter_2.repl.handle("second")

    assert "interrupted; the conversation goes on" in repl_at_chapter_2.stderr.getvalue()
    assert not (workspace / "ran.txt").exists()
    sent = exchanged(loopback.requests[1])
    assert sent == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "[interrupted by the user]"},
        {"role": "user", "content": "second"},
    ]


def test_ctrl_c_mid_answer_keeps_what_streamed_as_an_interrupted_reply(workspace: Path) -> None:
    def half_an_answer(request: ModelRequest) -> ModelReply:
        assert request.on_text is not None
        request.on_text("The first half")
        raise KeyboardInterrupt

    model = ScriptedModel([half_an_answer, text_reply("the whole answer")])
    runner = bash_runner(workspace, model)
    with pytest.raises(TurnInterrupted):
        runner.run("explain")

    runner.run("go on")

    assert model.requests[1].messages[-3:] == (
        user_message("explain"),
        assistant_message("The first half\n\n[interrupted by the user]"),
        user_message("go on"),
    )


@dataclass
class InterruptedRun:
    exit_code: int
    seconds_to_exit: float
    stderr: str
    leftovers: list[tuple[int, str]]
    stdout: str = ""


def interrupt_cli_during_sleep(
    workspace: Path,
    loopback: LoopbackServer,
    marker: str,
    signal_number: signal.Signals = signal.SIGINT,
    arguments: dict[str, Any] = SLEEP,
    output_format: str = "text",
) -> InterruptedRun:
    """`agent-tutorial run --chapter 2 --prompt …` as a subprocess running bash with
    `arguments`; `signal_number` (Ctrl-C by default) once the marked `sleep` runs."""
    loopback.queue(tool_stream([("call-sleep", "bash", arguments)]))
    arguments_ = ("run", "--chapter", "2", "--prompt", "wait", "--output-format", output_format)
    with start_cli(workspace, loopback, *arguments_) as cli:
        assert wait_until(lambda: sleeping(marker)), "bash never started sleeping"
        cli.send_signal(signal_number)
        sent_at = time.monotonic()
        stdout, stderr = cli.communicate(timeout=WAIT_S)
        seconds = time.monotonic() - sent_at
    leftovers = processes_with_marker(marker)
    return InterruptedRun(cli.wait(), seconds, stderr.decode(), leftovers, stdout.decode())


def test_ctrl_c_in_a_one_shot_run_exits_130_promptly_leaving_nothing(
    workspace: Path, loopback: LoopbackServer, marker: str
) -> None:
    run = interrupt_cli_during_sleep(workspace, loopback, marker)

    assert run.exit_code == 130, run.stderr
    assert run.seconds_to_exit < PROMPTLY_S
    assert run.leftovers == []
    assert "error: interrupted" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_one_shot_run_shows_the_interrupted_tool_as_finished(
    workspace: Path, loopback: LoopbackServer, marker: str
) -> None:
    run = interrupt_cli_during_sleep(workspace, loopback, marker)

    tool_line, error = run.stderr.splitlines()
    assert tool_line.startswith("✗ bash sleep 60  Error [interrupted]  ")
    assert error == "error: interrupted"


@pytest.mark.parametrize(
    ("signal_number", "error"),
    [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "interrupted by SIGTERM")],
)
def test_an_interrupt_under_json_output_prints_one_result_counting_the_tool(
    workspace: Path,
    loopback: LoopbackServer,
    marker: str,
    signal_number: signal.Signals,
    error: str,
) -> None:
    run = interrupt_cli_during_sleep(
        workspace, loopback, marker, signal_number, output_format="json"
    )

    record = json.loads(run.stdout)
    assert run.exit_code == 128 + signal_number, run.stderr
    assert record["type"] == "result" and record["is_error"] is True
    assert record["subtype"] == "error_during_execution" and record["error"] == error
    assert (record["tool_calls"], record["tool_errors"]) == (1, 1)


def test_an_interrupt_under_stream_json_finishes_the_tool_before_its_result_message(
    workspace: Path, loopback: LoopbackServer, marker: str
) -> None:
    run = interrupt_cli_during_sleep(workspace, loopback, marker, output_format="stream-json")

    records = [json.loads(line) for line in run.stdout.splitlines()]
    kinds = [(record["type"], record.get("id")) for record in records]
    finished = kinds.index(("tool_finished", "call-sleep"))
    assert kinds[finished - 1] == ("tool_started", "call-sleep")
    assert records[finished]["is_error"] is True
    assert records[finished]["error_code"] == "interrupted"
    assert records[finished + 1]["message"] == {
        "role": "tool",
        "content": INTERRUPTED,
        "tool_call_id": "call-sleep",
    }
    assert records[-1]["type"] == "result" and records[-1]["tool_calls"] == 1


def test_interrupted_one_shot_run_can_be_continued_with_its_paired_result(
    workspace: Path, loopback: LoopbackServer, marker: str, run_cli: Any
) -> None:
    interrupt_cli_during_sleep(workspace, loopback, marker)
    path = continued_session(workspace)
    assert path is not None
    saved = load_session(path, repair=False)
    assert saved.history[-1] == tool_message(INTERRUPTED, "call-sleep")
    assert saved.repaired == []
    loopback.queue(text_stream("continued"))

    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "go on")

    assert result.exit_code == 0, result.stderr
    sent = loopback.requests[-1]["messages"]
    assert {"role": "tool", "tool_call_id": "call-sleep", "content": INTERRUPTED} in sent
    assert isinstance(saved.history[-1], ToolMessage)


@pytest.mark.parametrize(
    ("signal_number", "exit_code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_sigterm_and_sighup_end_a_one_shot_run_like_ctrl_c(
    workspace: Path,
    loopback: LoopbackServer,
    marker: str,
    signal_number: signal.Signals,
    exit_code: int,
) -> None:
    run = interrupt_cli_during_sleep(workspace, loopback, marker, signal_number)

    assert run.exit_code == exit_code, run.stderr
    assert run.seconds_to_exit < PROMPTLY_S
    assert run.leftovers == []
    assert f"error: interrupted by {signal_number.name}" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGHUP])
def test_a_run_ended_by_a_signal_leaves_its_session_paired_and_whole(
    workspace: Path, loopback: LoopbackServer, marker: str, signal_number: signal.Signals
) -> None:
    interrupt_cli_during_sleep(workspace, loopback, marker, signal_number)

    path = continued_session(workspace)
    assert path is not None
    saved = load_session(path, repair=False)
    assert saved.history[-1] == tool_message(INTERRUPTED, "call-sleep")
    assert saved.repaired == []


def test_sigterm_also_stops_what_the_command_moved_out_of_its_group(
    workspace: Path, loopback: LoopbackServer, marker: str
) -> None:
    escaping = {"command": "setsid sleep 61 >/dev/null 2>&1 & sleep 60", "timeout_s": 20}

    run = interrupt_cli_during_sleep(workspace, loopback, marker, signal.SIGTERM, escaping)

    assert run.exit_code == 143, run.stderr
    assert run.leftovers == []


def test_sigterm_at_the_repl_prompt_ends_it_with_143(make_terminal: MakeTerminal) -> None:
    terminal = make_terminal("run", "--chapter", "2")
    terminal.wait_for_prompt()

    terminal.kill(signal.SIGTERM)

    assert terminal.wait_for_exit() == 143
    assert "error: interrupted by SIGTERM" in terminal.flat_text()


def test_sighup_during_a_repl_turn_stops_the_tool_and_keeps_the_session_paired(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path, marker: str
) -> None:
    loopback.queue(tool_stream([("call-sleep", "bash", SLEEP)]))
    terminal = make_terminal("run", "--chapter", "2")
    terminal.wait_for_prompt()
    terminal.enter("wait")
    assert wait_until(lambda: sleeping(marker)), "bash never started sleeping"

    terminal.kill(signal.SIGHUP)

    assert terminal.wait_for_exit() == 129
    assert processes_with_marker(marker) == []
    path = continued_session(workspace)
    assert path is not None
    assert load_session(path, repair=False).history[-1] == tool_message(INTERRUPTED, "call-sleep")


def test_sigterm_during_a_hook_stops_it_and_keeps_the_session_paired(
    workspace: Path, loopback: LoopbackServer, marker: str
) -> None:
    config = workspace / ".agent_tutorial" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        '[[hooks.PreToolUse]]\ncommand = "setsid -f sleep 61 >/dev/null 2>&1; sleep 60"\n'
    )
    loopback.queue(tool_stream([("call-1", "bash", {"command": "touch ran.txt"})]))

    with start_cli(
        workspace, loopback, "run", "--trust-project", "--chapter", "4", "-y", "--prompt", "go"
    ) as cli:
        assert wait_until(lambda: sleeping(marker)), "the hook never started sleeping"
        cli.send_signal(signal.SIGTERM)
        _, stderr = cli.communicate(timeout=WAIT_S)

    assert cli.returncode == 143, stderr.decode()
    assert processes_with_marker(marker) == []
    assert not (workspace / "ran.txt").exists()
    path = continued_session(workspace)
    assert path is not None
    assert load_session(path, repair=False).history[-1] == tool_message(INTERRUPTED, "call-1")


def test_sigterm_while_the_model_answers_exits_143_with_the_prompt_saved(
    workspace: Path, loopback: LoopbackServer
) -> None:
    asked, released = threading.Event(), threading.Event()

    def answer_after_release(_body: dict[str, Any]) -> Reply:
        asked.set()
        released.wait(WAIT_S)
        return text_stream("too late")

    loopback.queue(answer_after_release)
    try:
        with start_cli(workspace, loopback, "run", "--chapter", "2", "--prompt", "hello") as cli:
            assert asked.wait(WAIT_S), "the model was never asked"
            cli.send_signal(signal.SIGTERM)
            _, stderr = cli.communicate(timeout=WAIT_S)
    finally:
        released.set()

    assert cli.returncode == 143, stderr.decode()
    path = continued_session(workspace)
    assert path is not None
    history = load_session(path, repair=False).history
    assert history[0].content == "hello"
    validate_tool_pairing(history)
