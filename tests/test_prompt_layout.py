"""Issue 29, item 7: the REPL's toolbar sits right under the prompt. prompt_toolkit's own
layout put it at the foot of the screen (its input took every row under the cursor, eight
of them kept for the completion menu); `put_the_toolbar_under_the_prompt` rearranges that
layout, so the shape it relies on is pinned here, and on a terminal the menu still opens
under the prompt, over the toolbar's row."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.layout import ConditionalContainer, FloatContainer, HSplit
from prompt_toolkit.output import DummyOutput

from agent_tutorial.prompt_layout import AsTallAsNeeded, put_the_toolbar_under_the_prompt
from tests.terminal import Terminal


def session() -> PromptSession[str]:
    with create_pipe_input() as pipe:
        return PromptSession(
            completer=WordCompleter(["/context"]),
            bottom_toolbar="toolbar",
            input=pipe,
            output=DummyOutput(),
        )


def test_the_menus_float_over_the_whole_layout_and_the_input_asks_no_rows_to_spare() -> None:
    prompt = session()
    before = prompt.layout.container
    assert isinstance(before, HSplit) and isinstance(before.children[0], ConditionalContainer)
    main = before.children[0].alternative_content
    assert isinstance(main, FloatContainer)
    menus = list(main.floats)

    put_the_toolbar_under_the_prompt(prompt)

    top = prompt.layout.container
    assert isinstance(top, FloatContainer) and isinstance(top.content, HSplit)
    assert [float_ for float_ in menus if float_.ycursor] == top.floats  # both menus
    assert isinstance(top.content.children[0], AsTallAsNeeded)
    assert prompt.reserve_space_for_menu == 0


def test_a_layout_of_another_shape_is_left_as_it_is() -> None:
    prompt = session()
    prompt.layout.container = HSplit([])

    put_the_toolbar_under_the_prompt(prompt)

    assert isinstance(prompt.layout.container, HSplit)
    assert prompt.reserve_space_for_menu == 8


@pytest.mark.parametrize("columns", [80, 40])
def test_the_completion_menu_opens_under_the_prompt_in_the_toolbars_place(
    make_terminal: Callable[..., Terminal], columns: int
) -> None:
    terminal = make_terminal("run", "-c", "8", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()
    terminal.wait_for(lambda: terminal.toolbar().startswith(" ch8 · "), "the toolbar")

    terminal.type("/co")

    terminal.wait_for(lambda: terminal.toolbar().lstrip().startswith("/co"), "the menu")
    assert " ch8 · " not in terminal.text()  # not half a toolbar beside the menu
