"""Ctrl-C on a real pseudo-terminal, where the terminal driver turns the key into SIGINT
as it does for a user. At the approval prompt it cancels the whole turn, as anywhere else
in a turn: the call does not run, the model is not asked again, the history stays paired.
While the model answers, the turn is recorded as interrupted."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import sleeping, wait_until
from tests.loopback import LoopbackServer, Reply, exchanged, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
CTRL_C = "\x03"
TOUCH = [("call-touch", "bash", {"command": "touch ran.txt"})]
INTERRUPTED = "Error [interrupted]: the user interrupted this tool call"
WAIT_S = 20.0


def test_ctrl_c_at_the_approval_prompt_cancels_the_repl_turn(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(TOUCH), text_stream("back again"))
    terminal = make_terminal("run", "--chapter", "3")
    terminal.wait_for_prompt()
    terminal.enter("touch a file")
    terminal.wait_for_question()

    terminal.type(CTRL_C)

    terminal.wait_for_text("interrupted; the conversation goes on")
    terminal.wait_for_prompt()
    lines = terminal.lines()
    question = next(index for index, line in enumerate(lines) if line.startswith("Allow?"))
    assert lines[question].endswith("(Esc = no) cancelled")
    assert lines[question + 1].startswith("✗ bash touch ran.txt  Error [interrupted]  ")
    assert lines[question + 2] == "interrupted; the conversation goes on"
    assert len(loopback.requests) == 1  # the model was not told "declined" and asked again
    assert not (workspace / "ran.txt").exists()
    terminal.enter("never mind")
    terminal.wait_for_text("back again")
    sent = exchanged(loopback.requests[1])
    assert sent[-2:] == [
        {"role": "tool", "tool_call_id": "call-touch", "content": INTERRUPTED},
        {"role": "user", "content": "never mind"},
    ]


def test_ctrl_c_at_the_approval_prompt_ends_a_one_shot_run_with_130(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(TOUCH))
    terminal = make_terminal("run", "--chapter", "3", "--prompt", "touch a file")
    terminal.wait_for_question()

    terminal.type(CTRL_C)

    assert terminal.wait_for_exit() == 130
    assert "error: interrupted" in terminal.text()
    assert not (workspace / "ran.txt").exists()
    assert len(loopback.requests) == 1


def test_ctrl_c_while_the_model_answers_records_the_turn_as_interrupted(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    asked, released = threading.Event(), threading.Event()

    def answer_when_released(_body: dict[str, Any]) -> Reply:
        asked.set()
        released.wait(WAIT_S)
        return text_stream("too late")

    loopback.queue(answer_when_released, text_stream("a fresh answer"))
    terminal = make_terminal("run", "--chapter", "2")
    try:
        terminal.wait_for_prompt()
        terminal.enter("a slow question")
        terminal.wait_for(asked.is_set, "the request")

        terminal.type(CTRL_C)

        terminal.wait_for_text("interrupted; the conversation goes on")
    finally:
        released.set()
    terminal.wait_for_prompt()
    terminal.enter("a second question")
    terminal.wait_for_text("a fresh answer")
    sent = exchanged(loopback.requests[1])
    assert sent == [
        {"role": "user", "content": "a slow question"},
        {"role": "assistant", "content": "[interrupted by the user]"},
        {"role": "user", "content": "a second question"},
    ]


ASK_REASON = "execute tools need approval in permission mode 'ask'"


@pytest.mark.parametrize("chapter", ["2", "3"], ids=["while it runs", "after its approval"])
def test_ctrl_c_during_a_tool_leaves_its_finished_line_in_the_repl(
    make_terminal: MakeTerminal, loopback: LoopbackServer, marker: str, chapter: str
) -> None:
    loopback.queue(tool_stream([("call-sleep", "bash", {"command": "sleep 30"})]))
    terminal = make_terminal("run", "--chapter", chapter)
    terminal.wait_for_prompt()
    terminal.enter("wait")
    if chapter == "3":
        terminal.wait_for_question()
        terminal.enter("y")
    assert wait_until(lambda: sleeping(marker)), "bash never started sleeping"

    terminal.type(CTRL_C)

    terminal.wait_for_text("interrupted; the conversation goes on")
    terminal.wait_for_prompt()
    lines = terminal.lines()
    goes_on = lines.index("interrupted; the conversation goes on")
    # The spinner shows the call running, after an approval too: stopping it takes the
    # terminal's ^C echo with it, so the finished line starts the line.
    assert lines[goes_on - 1].startswith("✗ bash sleep 30  Error [interrupted]  ")
    # The approval panel gives the policy's reason; no activity line repeats it.
    assert terminal.text().count(ASK_REASON) == (1 if chapter == "3" else 0)
