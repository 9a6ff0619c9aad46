"""Issue 29, item 7: Esc then `/` within a moment is a slash, not Meta-/ (complete), which
swallowed it and sent the command's words to the model as a prompt."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.loopback import LoopbackServer
from tests.terminal import Terminal


@pytest.mark.parametrize("columns", [80, 40])
def test_escape_then_a_slash_command_runs_the_command(
    make_terminal: Callable[..., Terminal], loopback: LoopbackServer, columns: int
) -> None:
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()

    terminal.type("\x1b/todos")  # Esc and the slash in one read, as a quick typist's
    terminal.enter("")
    terminal.wait_for_text("todo planning arrives in chapter 5")

    assert loopback.requests == []
