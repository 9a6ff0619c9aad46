"""Streamed text with tool calls written as text held back: the renderer receives each
piece as it arrives, so a call the model writes as text would be on screen before anyone
knew it was a call. Text is passed on up to where a call block may begin, held from there
until it is known not to be one, and dropped when the whole reply turns out to be calls (or
a repeated tool list, which `auto` asks again for).
"""

from __future__ import annotations

from collections.abc import Callable

from agent_tutorial.adapters.text_calls import (
    Offered,
    calls_from,
    echoes_tool_list,
    partial_trigger_length,
    trigger_positions,
)

# Pieces that can end a call block; without one, a long held block cannot have changed.
_CLOSERS = frozenset("}`>:")
_RECHECKED_ALWAYS = 64
"""A held block shorter than this is checked at every piece, so prose with a brace in it
("a {x} here") is let through as soon as it cannot be a call."""


class HeldCallText:
    """An `on_text` that passes text on to `on_text`, except what may be a call block."""

    def __init__(self, on_text: Callable[[str], None], offered: Offered) -> None:
        self._on_text = on_text
        self._offered = offered
        self._text = ""
        self._shown = 0  # `_text[:_shown]` has been passed on
        self._holding = False  # a block that may be a call starts at `_shown`

    def __call__(self, piece: str) -> None:
        if not piece:
            return
        self._text += piece
        held = len(self._text) - self._shown
        if self._holding and held > _RECHECKED_ALWAYS and _CLOSERS.isdisjoint(piece):
            return
        self._show_until(self._safe_end())

    def finish(self, *, were_calls: bool) -> None:
        """The reply is complete: what was held is dropped if it was calls, else shown."""
        if not were_calls:
            self._show_until(len(self._text))

    def _safe_end(self) -> int:
        """Where text stops being safe to show: the first place a call block may begin."""
        text = self._text
        for start in trigger_positions(text, self._shown):
            # A repeated tool list is held too: in `auto` the request goes again instead.
            if calls_from(text, start, self._offered) is not None or echoes_tool_list(
                text, self._offered, start
            ):
                self._holding = True
                return start
        self._holding = False
        return len(text) - partial_trigger_length(text, self._shown)

    def _show_until(self, end: int) -> None:
        if end > self._shown:
            self._on_text(self._text[self._shown : end])
            self._shown = end
