"""The REPL's toolbar directly under the prompt, not at the bottom of the screen.

prompt_toolkit fills the screen below the prompt (its input window takes every row under
the cursor) and keeps eight rows for the completion menu under the input, so its bottom
toolbar sat at the screen's last row, or seven blank rows under the prompt once the screen
had scrolled. Here the prompt and its toolbar take only the rows they need, the rest is
left blank below the toolbar, and the completion menus float over the toolbar and the
rows under it (kept for them while a menu is open).
"""

from __future__ import annotations

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import Condition
from prompt_toolkit.layout import (
    ConditionalContainer,
    Container,
    Dimension,
    FloatContainer,
    HSplit,
    Window,
)
from prompt_toolkit.layout.mouse_handlers import MouseHandlers
from prompt_toolkit.layout.screen import Screen, WritePosition

MENU_ROWS = 8
"""Rows kept under the prompt while a completion menu is open (prompt_toolkit's own)."""


class AsTallAsNeeded(Container):
    """`content`, never given more rows than it asks for: rows to spare go elsewhere."""

    def __init__(self, content: Container) -> None:
        self.content = content

    def reset(self) -> None:
        self.content.reset()

    def preferred_width(self, max_available_width: int) -> Dimension:
        return self.content.preferred_width(max_available_width)

    def preferred_height(self, width: int, max_available_height: int) -> Dimension:
        wanted = self.content.preferred_height(width, max_available_height)
        return Dimension(min=wanted.min, max=wanted.preferred, preferred=wanted.preferred)

    def write_to_screen(
        self,
        screen: Screen,
        mouse_handlers: MouseHandlers,
        write_position: WritePosition,
        parent_style: str,
        erase_bg: bool,
        z_index: int | None,
    ) -> None:
        self.content.write_to_screen(
            screen, mouse_handlers, write_position, parent_style, erase_bg, z_index
        )

    def get_children(self) -> list[Container]:
        return [self.content]


def put_the_toolbar_under_the_prompt(session: PromptSession[str]) -> None:
    """Rearrange `session`'s layout as the module says. It relies on the layout's shape
    (the prompt's input in a `FloatContainer` holding the completion menus, first in the
    top `HSplit`, whose last child is the toolbar; tests/test_prompt_layout.py checks it):
    of another shape, the layout is left as it is."""
    layout = session.layout
    top = layout.container
    children = top.children if isinstance(top, HSplit) else []
    if len(children) < 2:
        return
    framed, toolbar = children[0], children[-1]
    main = framed.alternative_content if isinstance(framed, ConditionalContainer) else None
    if not (isinstance(main, FloatContainer) and isinstance(toolbar, ConditionalContainer)):
        return
    menus = [float_ for float_ in main.floats if float_.ycursor]
    main.floats = [float_ for float_ in main.floats if not float_.ycursor]
    session.reserve_space_for_menu = 0
    buffer = session.default_buffer
    menu_open = Condition(lambda: buffer.complete_state is not None)
    toolbar.filter = toolbar.filter & ~menu_open  # the menu takes its row: no half toolbar
    menu_rows = Window(height=lambda: Dimension(min=MENU_ROWS if menu_open() else 0))
    layout.container = FloatContainer(HSplit([AsTallAsNeeded(top), menu_rows]), menus)
