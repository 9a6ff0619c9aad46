"""`/resume` without an id: the recent sessions as a list to pick from, as Claude Code's
and Codex's /resume do. Up and Down (or the number, or the first letter of an id) move,
Enter resumes, Esc or Ctrl-C leaves the conversation as it is."""

from __future__ import annotations

from collections.abc import Sequence

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.shortcuts.choice_input import ChoiceInput

from agent_tutorial.core.text import printable
from agent_tutorial.features.sessions import SessionInfo
from agent_tutorial.layout import shorten_at_word

PICKED_SESSIONS = 9
"""The newest sessions offered: one digit each picks them."""
OPTION_MARGIN = 10
"""Columns the list takes before and after a label: indent, mark, number, margin."""
DATED_WIDTH = 60
"""A label at least this wide also shows when the session started and its chapter."""


def pick_session(
    sessions: Sequence[SessionInfo], *, columns: int, input: Input, output: Output
) -> SessionInfo | None:
    """The session picked from `sessions` (the first `PICKED_SESSIONS`), or None when the
    picker was left with Esc or Ctrl-C."""
    width = columns - OPTION_MARGIN
    options = [(info, session_label(info, width)) for info in sessions[:PICKED_SESSIONS]]
    picker = ChoiceInput[SessionInfo | None](
        message="Resume which session? (Enter resumes, Esc cancels)",
        options=options,
        key_bindings=cancel_bindings(),
    )
    with create_app_session(input=input, output=output):
        try:
            return picker.prompt()
        except KeyboardInterrupt:
            return None


def session_label(info: SessionInfo, width: int) -> str:
    """`1a2b3c4d  2026-12-01 15:45  ch8  fix the failing test in the…` in `width`
    columns; narrower than `DATED_WIDTH`, the id and the prompt only."""
    label = info.session_id
    if width >= DATED_WIDTH:
        started = info.started.astimezone().strftime("%Y-%m-%d %H:%M")
        label += f"  {started}  ch{'?' if info.chapter is None else info.chapter}"
    prompt = printable(info.first_prompt or "(a long prompt)")
    return f"{label}  {shorten_at_word(prompt, max(1, width - len(label) - 2))}"


def cancel_bindings() -> KeyBindings:
    """Esc leaves a picker with None, as Ctrl-C does."""
    bindings = KeyBindings()

    @bindings.add("escape", eager=True)
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    return bindings
