"""The REPL's screens on a real pseudo-terminal at 80 and 40 columns, read back from a pyte
screen: a large paste collapsed to a placeholder, tables that keep a number with its unit
and break no word, a plain prompt and toolbar with --no-color, /compact on one line,
/resume's picker and a resumed session's last turns."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.loopback import LoopbackServer, text_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
UP = "\x1b[A"
LOG = "".join(f"line {n} of the pasted log with some detail in it, enough\n" for n in range(800))


def user_contents(body: dict[str, object]) -> list[object]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [message["content"] for message in messages if message["role"] == "user"]


@pytest.mark.parametrize("columns", [80, 40])
def test_a_large_paste_shows_as_one_placeholder_line_and_is_sent_whole(
    make_terminal: MakeTerminal, loopback: LoopbackServer, columns: int
) -> None:
    loopback.queue(text_stream("read it"), text_stream("read it again"))
    terminal = make_terminal("run", "--chapter", "2", columns=columns)
    terminal.wait_for_prompt()

    terminal.type("see " + PASTE_START + LOG + PASTE_END)
    terminal.wait_for_text("[pasted 800 lines, 45.2 KB]")
    terminal.enter("")
    terminal.wait_for_text("read it")
    terminal.wait_for_prompt()
    terminal.type(UP)  # the sent prompt comes back collapsed
    terminal.wait_for(lambda: "[pasted" in terminal.cursor_line(), "the recalled placeholder")
    terminal.enter("")
    terminal.wait_for_text("read it again")

    assert "line 1 of" not in terminal.text()  # the pasted lines never reach the screen
    assert user_contents(loopback.requests[0]) == [f"see {LOG}".strip()]
    assert user_contents(loopback.requests[1])[-1] == f"see {LOG}".strip()


def colours_of(terminal: Terminal, row: int, text: str) -> set[str]:
    """The foreground colours the screen shows `text` in, on `row` (-1: the last)."""
    line = terminal.screen.buffer[row % terminal.screen.lines]
    shown = "".join(line[x].data for x in range(terminal.screen.columns))
    start = shown.index(text)
    return {line[x].fg for x in range(start, start + len(text))}


@pytest.mark.parametrize(
    ("flags", "env", "plain"),
    [
        ((), {}, False),
        (("--no-color",), {}, True),
        ((), {"NO_COLOR": "1"}, True),
    ],
)
def test_no_color_makes_the_prompt_and_the_toolbar_plain(
    make_terminal: MakeTerminal, flags: tuple[str, ...], env: dict[str, str], plain: bool
) -> None:
    terminal = make_terminal("run", "--chapter", "8", *flags, env=env)
    terminal.wait_for(lambda: "of summary" in terminal.lines()[-1], "the toolbar")
    terminal.wait_for_prompt()

    prompt = colours_of(terminal, terminal.screen.cursor.y, "›")
    share = colours_of(terminal, -1, "0% of summary")

    assert (prompt, share) == (({"default"}, {"default"}) if plain else ({"cyan"}, {"green"}))
