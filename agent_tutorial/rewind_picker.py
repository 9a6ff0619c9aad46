"""`/rewind`: the session's prompts as a list to pick from (as `/resume` offers sessions),
newest first, then what to take back: the files, the conversation or both. Esc or Ctrl-C
leaves both as they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from prompt_toolkit.shortcuts.choice_input import ChoiceInput

from agent_tutorial.core.text import printable
from agent_tutorial.layout import shorten_at_word
from agent_tutorial.session_picker import OPTION_MARGIN, PICKED_SESSIONS, cancel_bindings

Picked = TypeVar("Picked")
RewindScope = Literal["both", "files", "conversation"]
SCOPES: tuple[tuple[RewindScope, str], ...] = (
    ("both", "files and conversation"),
    ("files", "files only"),
    ("conversation", "conversation only"),
)


def pick_turn(
    prompts: Sequence[tuple[int, str]], *, columns: int, input: Input, output: Output
) -> int | None:
    """The history index of the prompt picked from `prompts` ((index, text), newest
    first, the first `PICKED_SESSIONS` offered), or None when the picker was left."""
    width = max(1, columns - OPTION_MARGIN)
    options = [
        (index, shorten_at_word(printable(" ".join(text.split())) or "(empty)", width))
        for index, text in prompts[:PICKED_SESSIONS]
    ]
    picker = ChoiceInput[int | None](
        message="Rewind to before which prompt? (Enter picks, Esc cancels)",
        options=options,
        key_bindings=cancel_bindings(),
    )
    return _asked(picker, input, output)


def pick_scope(*, input: Input, output: Output) -> RewindScope | None:
    picker = ChoiceInput[RewindScope | None](
        message="Take back what? (Enter picks, Esc cancels)",
        options=list(SCOPES),
        key_bindings=cancel_bindings(),
    )
    return _asked(picker, input, output)


def _asked(picker: ChoiceInput[Picked | None], input: Input, output: Output) -> Picked | None:
    with create_app_session(input=input, output=output):
        try:
            return picker.prompt()
        except KeyboardInterrupt:
            return None
