"""Ctrl-C at the approval prompt, on a real pseudo-terminal: the terminal driver turns the
key into SIGINT, as for a user. It cancels the whole turn, as anywhere else in a turn:
the call does not run, the model is not asked again, and the history stays paired."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
CTRL_C = "\x03"
TOUCH = [("call-touch", "bash", {"command": "touch ran.txt"})]
INTERRUPTED = "Error [interrupted]: the user interrupted this tool call"


def test_ctrl_c_at_the_approval_prompt_cancels_the_repl_turn(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(TOUCH), text_stream("back again"))
    terminal = make_terminal("run", "--chapter", "3")
    terminal.wait_for_prompt()
    terminal.enter("touch a file")
    terminal.wait_for_text("Allow?")

    terminal.type(CTRL_C)

    terminal.wait_for_text("interrupted; the conversation goes on")
    terminal.wait_for_prompt()
    assert len(loopback.requests) == 1  # the model was not told "declined" and asked again
    assert not (workspace / "ran.txt").exists()
    terminal.enter("never mind")
    terminal.wait_for_text("back again")
    sent = [m for m in loopback.requests[1]["messages"] if m["role"] != "system"]
    assert sent[-2:] == [
        {"role": "tool", "tool_call_id": "call-touch", "content": INTERRUPTED},
        {"role": "user", "content": "never mind"},
    ]


def test_ctrl_c_at_the_approval_prompt_ends_a_one_shot_run_with_130(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(TOUCH))
    terminal = make_terminal("run", "--chapter", "3", "--prompt", "touch a file")
    terminal.wait_for_text("Allow?")

    terminal.type(CTRL_C)

    assert terminal.wait_for_exit() == 130
    assert "error: interrupted" in terminal.text()
    assert not (workspace / "ran.txt").exists()
    assert len(loopback.requests) == 1
