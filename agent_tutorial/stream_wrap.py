"""Streamed answer text broken between words on a terminal.

A one-shot run shows the answer piece by piece as it arrives. A piece starts wherever the
last one stopped, so rich cannot wrap it, and left to the terminal a line breaks in the
middle of a word at the right edge (`…the Pyth` / `on files`). `WordWrap` keeps count of
the column instead and holds back the word being written until it ends; a word that would
not fit goes to the next line. A word wider than the terminal (a long URL, a hash) is
shown as it comes, once it is known to be one, and the terminal wraps it: nothing waits
on a word without end, and no more than a line's worth is ever held.
"""

from __future__ import annotations

from rich.cells import cell_len

TAB_STOP = 8


class WordWrap:
    """Turns streamed text into what to print at `width` columns: the same text, with a
    line break before each word that would cross the right edge."""

    def __init__(self, width: int) -> None:
        self.width = max(width, 1)
        self._column = 0
        self._word = ""
        """The word being written: not shown until a space or a line break ends it."""
        self._in_long_word = False
        """The word being written is wider than a line, and shown as it comes."""

    def feed(self, text: str) -> str:
        """What to print now: every word `text` ends, and the spaces between them."""
        shown: list[str] = []
        for char in text:
            if char.isspace():
                shown.append(self.flush())
                shown.append(self._place_space(char))
            else:
                shown.append(self._add_to_word(char))
        return "".join(shown)

    def flush(self) -> str:
        """The word held back, when the answer stops (or something else is shown)."""
        self._in_long_word = False
        return self._place_word()

    def _add_to_word(self, char: str) -> str:
        if self._in_long_word:
            self._column += cell_len(char)
            return char
        self._word += char
        if cell_len(self._word) <= self.width:
            return ""
        self._in_long_word = True
        return self._place_word()

    def _place_word(self) -> str:
        word, self._word = self._word, ""
        if not word:
            return ""
        size = cell_len(word)
        if self._column > 0 and self._column + size > self.width:
            self._column = size
            return "\n" + word
        self._column += size
        return word

    def _place_space(self, char: str) -> str:
        if char == "\n":
            self._column = 0
            return char
        if self._column >= self.width:  # the line is full: the next word starts a new one
            return ""
        self._column += TAB_STOP - self._column % TAB_STOP if char == "\t" else 1
        return char
