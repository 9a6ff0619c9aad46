"""Issue 29, item 3: approvals answered with one key, no Enter: y yes, a always, n or Esc
no, and t, "no, and tell it what to do instead", whose words reach the model with the
denial. Keys typed before the question do not answer it."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from agent_tutorial.approval import KEY_PROMPT, TerminalApprover
from agent_tutorial.core.permissions import ApprovalRequest, DeclinedWithInstructions
from agent_tutorial.terminal_keys import END_OF_INPUT, ESCAPE
from tests.loopback import LoopbackServer, exchanged, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
REQUEST = ApprovalRequest("bash", "make", {"command": "make"}, reason="execute tools get 'ask'")


def key_approver(
    keys: str | list[str], lines: tuple[str, ...] = ()
) -> tuple[TerminalApprover, io.StringIO]:
    pressed: Iterator[str] = iter(keys)
    typed = iter(lines)
    output = io.StringIO()
    approver = TerminalApprover(
        Console(file=output, width=100, color_system=None),
        read_line=lambda _prompt: next(typed),
        read_key=lambda: next(pressed),
    )
    return approver, output


@pytest.mark.parametrize(
    ("key", "answer"),
    [("y", "yes"), ("Y", "yes"), ("a", "always"), ("n", "no"), (ESCAPE, "no"), ("\x04", "no")],
)
def test_one_key_answers(key: str, answer: str) -> None:
    approver, output = key_approver([key])

    assert approver.approve(REQUEST) == answer
    assert output.getvalue().endswith(f"{KEY_PROMPT}{answer}\n")


def test_the_end_of_input_means_no() -> None:
    approver, _ = key_approver([END_OF_INPUT])

    assert approver.approve(REQUEST) == "no"


def test_keys_that_are_no_answer_are_passed_over() -> None:
    approver, _ = key_approver(["\r", "x", "\n", "y"])

    assert approver.approve(REQUEST) == "yes"


def test_t_then_a_line_declines_with_what_to_do_instead() -> None:
    approver, output = key_approver(["t"], ("  run make test instead  ",))

    assert approver.approve(REQUEST) == DeclinedWithInstructions("run make test instead")
    assert "no, and instead:" in output.getvalue()


def test_t_then_an_empty_line_is_a_plain_no() -> None:
    approver, _ = key_approver(["t"], ("",))

    assert approver.approve(REQUEST) == "no"


def test_ctrl_c_at_the_key_cancels_the_turn() -> None:
    def interrupted() -> str:
        raise KeyboardInterrupt

    approver = TerminalApprover(
        Console(file=io.StringIO(), width=100), read_line=lambda _: "", read_key=interrupted
    )

    with pytest.raises(KeyboardInterrupt):
        approver.approve(REQUEST)


TOUCH = [("call-touch", "bash", {"command": "touch ran.txt"})]


@pytest.mark.parametrize("columns", [80, 40])
def test_y_alone_approves_on_a_terminal(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    loopback.queue(tool_stream(TOUCH), text_stream("touched"))
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("touch a file")
    terminal.wait_for_question()

    terminal.type("y")
    terminal.wait_for_text("touched")

    assert (workspace / "ran.txt").exists()


@pytest.mark.parametrize("columns", [80, 40])
def test_esc_alone_declines_on_a_terminal(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    loopback.queue(tool_stream(TOUCH), text_stream("not touched"))
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("touch a file")
    terminal.wait_for_question()

    terminal.type(ESCAPE)
    terminal.wait_for_text("not touched")

    assert not (workspace / "ran.txt").exists()
    assert "^[" not in terminal.text()
    assert exchanged(loopback.requests[1])[-1]["content"] == (
        "Error [permission_denied]: the user declined this bash call"
    )


def test_t_sends_what_to_do_instead_with_the_denial(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream(TOUCH), text_stream("ok, I will"))
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off")
    terminal.wait_for_prompt()
    terminal.enter("touch a file")
    terminal.wait_for_question()

    terminal.type("t")
    terminal.wait_for_text("What should it do instead?")
    terminal.enter("write notes.txt with write_file")
    terminal.wait_for_text("ok, I will")

    assert not (workspace / "ran.txt").exists()
    assert exchanged(loopback.requests[1])[-1]["content"] == (
        "Error [permission_denied]: the user declined this bash call and says instead: "
        "write notes.txt with write_file"
    )
