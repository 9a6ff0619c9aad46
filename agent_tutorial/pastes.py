"""Large pastes in the REPL's editor, as Claude Code and Codex show them: a paste of more
than `COLLAPSE_LINES` lines or `COLLAPSE_CHARS` characters appears as one placeholder,
`[pasted 800 lines, 58.6 KB]`, and the prompt is sent with the paste in its place.

What the placeholder does in the editor:
- it is text like any other: type before or after it, paste again (each paste gets its
  own placeholder; the same text pasted twice shares one);
- Backspace just after it, or Delete just before it, removes it whole;
- typing inside it turns it into plain text, sent as typed (the paste is dropped);
- Ctrl-C discards the draft, its pastes with it.
A sent prompt's pastes are kept while the REPL runs, so Up brings the prompt back still
collapsed; the history file stores the prompt as sent, with the pastes in full.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from prompt_toolkit.application import get_app
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import History
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from agent_tutorial.render import format_bytes

COLLAPSE_LINES = 10
"""A paste of more lines than this is collapsed; a few lines of code stay editable."""
COLLAPSE_CHARS = 1_000
"""A paste of more characters than this is collapsed, even on one line (Codex's figure)."""


class CollapsedPastes:
    """The pastes behind the placeholders in the editor, and the expansion on send."""

    def __init__(self) -> None:
        self._drafted: dict[str, str] = {}  # placeholder -> paste, not yet sent
        self._sent: dict[str, str] = {}  # placeholders of sent prompts (Up recalls them)

    def paste(self, data: str) -> str:
        """What a paste puts in the editor: itself, or a placeholder standing for it."""
        data = data.replace("\r\n", "\n").replace("\r", "\n")  # as prompt-toolkit's own paste
        if _line_count(data) <= COLLAPSE_LINES and len(data) <= COLLAPSE_CHARS:
            return data
        known = self._known()
        for placeholder, text in known.items():
            if text == data:
                return placeholder
        label = _label(data)
        placeholder, number = f"[{label}]", 1
        while placeholder in known:
            number += 1
            placeholder = f"[{label} #{number}]"
        self._drafted[placeholder] = data
        return placeholder

    def expand(self, text: str) -> str:
        """`text` with every placeholder it still holds replaced by its paste."""
        known = self._known()
        if not known:
            return text
        longest_first = sorted(known, key=len, reverse=True)
        pattern = re.compile("|".join(re.escape(placeholder) for placeholder in longest_first))
        return pattern.sub(lambda match: known[match.group()], text)

    def send(self, text: str) -> str:
        """`text` expanded; its pastes are kept, pastes discarded from drafts forgotten."""
        kept = {
            placeholder: paste
            for placeholder, paste in self._drafted.items()
            if placeholder in text
        }
        self._sent.update(kept)
        self._drafted.clear()
        return self.expand(text)

    def placeholder_ending_at(self, document: Document) -> str | None:
        return _first(p for p in self._known() if document.text_before_cursor.endswith(p))

    def placeholder_starting_at(self, document: Document) -> str | None:
        return _first(p for p in self._known() if document.text_after_cursor.startswith(p))

    def _known(self) -> dict[str, str]:
        return {**self._sent, **self._drafted}


def paste_bindings(pastes: CollapsedPastes) -> KeyBindings:
    """Bracketed paste through `pastes`; Backspace and Delete take a placeholder whole."""
    bindings = KeyBindings()

    @bindings.add(Keys.BracketedPaste)
    def _paste(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text(pastes.paste(event.data))

    def document() -> Document:
        return get_app().current_buffer.document

    @bindings.add("backspace", filter=Condition(lambda: _ending(pastes, document())))
    def _delete_before(event: KeyPressEvent) -> None:
        placeholder = pastes.placeholder_ending_at(event.current_buffer.document) or ""
        event.current_buffer.delete_before_cursor(len(placeholder))

    @bindings.add("delete", filter=Condition(lambda: _starting(pastes, document())))
    def _delete_after(event: KeyPressEvent) -> None:
        placeholder = pastes.placeholder_starting_at(event.current_buffer.document) or ""
        event.current_buffer.delete(len(placeholder))

    return bindings


class SentPromptHistory(History):
    """A history that remembers this session's prompts as typed (placeholders and all) and
    stores them as sent (pastes in full), so a later session can still send them."""

    def __init__(self, stored: History, expand: Callable[[str], str]) -> None:
        super().__init__()
        self._stored = stored
        self._expand = expand

    def load_history_strings(self) -> Iterable[str]:
        return self._stored.load_history_strings()

    def store_string(self, string: str) -> None:
        self._stored.store_string(self._expand(string))


def _line_count(data: str) -> int:
    """Lines as an editor counts them: a last line without its newline counts too."""
    return data.count("\n") + (0 if data.endswith("\n") else 1)


def _label(data: str) -> str:
    lines = _line_count(data)
    size = format_bytes(len(data.encode(errors="surrogatepass")))
    return f"pasted {lines} line{'' if lines == 1 else 's'}, {size}"


def _ending(pastes: CollapsedPastes, document: Document) -> bool:
    return pastes.placeholder_ending_at(document) is not None


def _starting(pastes: CollapsedPastes, document: Document) -> bool:
    return pastes.placeholder_starting_at(document) is not None


def _first(placeholders: Iterable[str]) -> str | None:
    return next(iter(placeholders), None)
