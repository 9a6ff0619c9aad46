"""Answers on a real terminal: the REPL and a one-shot run on a pseudo-terminal against the
loopback server, read back from a pyte screen. Lines wider than the terminal wrap; no
word is ever cut off at the right edge, at 80 columns, at 40, or after a resize. An answer
on a terminal is rendered as Markdown; to a pipe it goes as the model wrote it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import RunCli
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]

PARAGRAPH = (
    "Here is a long paragraph that keeps going well past the width of any ordinary "
    "terminal, so it has to wrap, and it ends with the word paragraphend."
)
BULLET = (
    "a long bullet item that also runs on past the right edge of the terminal by a "
    "comfortable margin and ends with bulletend"
)
CODE_LINE = (
    "Call {code} and then keep talking for a good while longer, well past the edge, "
    "until the line ends with codeend."
)
ANSWER = f"{PARAGRAPH}\n\n- {BULLET}\n- short\n\n{CODE_LINE.format(code='`make test`')}\n"
# What the Markdown answer shows: bullets as •, inline code without its backticks.
SHOWN = (PARAGRAPH, BULLET, CODE_LINE.format(code="make test"))


def ask_in_repl(terminal: Terminal, prompt: str) -> None:
    terminal.wait_for_prompt()
    terminal.enter(prompt)
    terminal.wait_for_text("codeend.")
    terminal.wait_for_prompt()


def missing(sentences: tuple[str, ...], shown: str) -> list[str]:
    return [sentence for sentence in sentences if sentence not in shown]


def line_ending_with(terminal: Terminal, word: str) -> str:
    [line] = [line for line in terminal.lines() if word in line]
    return line


def test_repl_at_80_columns_shows_the_last_word_of_every_long_line(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream(ANSWER, pieces=12))
    terminal = make_terminal("run", "--chapter", "2", columns=80)

    ask_in_repl(terminal, "explain")

    assert line_ending_with(terminal, "paragraphend").endswith("the word paragraphend.")
    assert line_ending_with(terminal, "bulletend").endswith("ends with bulletend")
    assert line_ending_with(terminal, "codeend").endswith("line ends with codeend.")


def test_repl_at_40_columns_loses_no_word(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream(ANSWER, pieces=12))
    terminal = make_terminal("run", "--chapter", "2", columns=40)

    ask_in_repl(terminal, "explain")

    assert missing(SHOWN, terminal.flat_text()) == []


def test_repl_after_a_resize_wraps_at_the_new_width(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("first answer"), text_stream(ANSWER, pieces=12))
    terminal = make_terminal("run", "--chapter", "2", columns=100, fixed_size=False)
    terminal.wait_for_prompt()
    terminal.enter("warm up")
    terminal.wait_for_text("first answer")

    terminal.resize(columns=44, lines=30)
    ask_in_repl(terminal, "explain")

    assert missing(SHOWN, terminal.flat_text()) == []


@pytest.mark.parametrize("columns", [80, 40])
def test_a_one_shot_answer_on_a_terminal_is_rendered_as_markdown(
    make_terminal: MakeTerminal, loopback: LoopbackServer, columns: int
) -> None:
    loopback.queue(text_stream(f"**Found** three files.\n\n{ANSWER}", pieces=12))
    terminal = make_terminal("run", "--chapter", "2", "--prompt", "explain", columns=columns)

    assert terminal.wait_for_exit() == 0

    # Bold without its asterisks, bullets as •, code without backticks; no word cut.
    assert missing(("Found three files.", *SHOWN), terminal.flat_text()) == []
    assert "**" not in terminal.text() and "`" not in terminal.text()
    assert all(len(line) <= columns for line in terminal.lines())


def test_a_one_shot_answer_in_a_pipe_is_the_markdown_as_written(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream(f"**Found** three files.\n\n{ANSWER}"))

    result = run_cli("run", "--chapter", "2", "--prompt", "explain")

    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"**Found** three files.\n\n{ANSWER}"


def test_the_toolbar_fits_an_80_column_terminal_with_a_long_model_name(
    make_terminal: MakeTerminal,
) -> None:
    model = "Qwen/Qwen2.5-Coder-32B-Instruct-GPTQ-Int4"
    terminal = make_terminal(
        "run", "--chapter", "8", columns=80, env={"AGENT_TUTORIAL_MODEL": model}
    )

    terminal.wait_for(lambda: "of summary" in terminal.toolbar(), "the whole toolbar")

    toolbar = terminal.toolbar()
    assert toolbar.startswith(" ch8 · ask · sandbox ")  # the modes before the model's name
    assert len(toolbar.rstrip()) < 80


def test_an_approval_panel_shows_a_long_command_whole_at_80_columns(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    command = "echo " + " ".join(f"word{n}" for n in range(40)) + " && rm -rf build/lastword"
    loopback.queue(tool_stream([("call-1", "bash", {"command": command})]), text_stream("ok"))
    terminal = make_terminal("run", "--chapter", "3", columns=80)
    terminal.wait_for_prompt()
    terminal.enter("clean up")
    terminal.wait_for_question()

    shown = terminal.flat_text()

    assert "build/lastword" in shown
    assert "word39 && rm -rf" in shown
    terminal.enter("n")
    terminal.wait_for_prompt()


def test_an_answer_taller_than_the_terminal_shows_every_paragraph_once(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    paragraphs = [
        f"Paragraph {n} says something moderately long about item {n} and ends with end{n}."
        for n in range(1, 41)
    ]
    loopback.queue(text_stream("\n\n".join(paragraphs), pieces=40))
    terminal = make_terminal("run", "--chapter", "2", columns=60, lines=20)
    terminal.wait_for_prompt()
    terminal.enter("a long one")
    terminal.wait_for_text("end40.")
    terminal.wait_for_prompt()

    shown = terminal.flat_text()

    assert [shown.count(paragraph) for paragraph in paragraphs] == [1] * 40
    # The screen has scrolled: the prompt is near its foot, the toolbar right under it.
    terminal.wait_for(lambda: terminal.toolbar().startswith(" ch2 · "), "the toolbar")
    assert terminal.screen.cursor.y >= 10
