"""A streamed answer cut into Markdown blocks that are complete, for a one-shot run on a
terminal: each is rendered (bold as bold, bullets as •) once it is whole and printed below
the last, so nothing is redrawn. The REPL's live display repaints the answer as it grows;
a one-shot run's output is written once, as a log is (a terminal's scrollback, `script`),
and rich's cursor moves would leave every repaint in it.

A block is complete when a line that starts a new one (not indented: an indented line may
continue a list item) follows a blank line outside a code fence.
"""

from __future__ import annotations

import re

FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


class MarkdownBlocks:
    """Holds streamed text until the blocks it ends are complete."""

    def __init__(self) -> None:
        self._pending = ""
        self._scanned = 0
        """Where the next line to look at starts in `_pending`."""
        self._fence = ""
        """The fence the scanned lines are inside (its first characters), or none."""
        self._after_blank = False

    def feed(self, text: str) -> str:
        """The complete blocks `text` ends, as Markdown source ('' while none is)."""
        self._pending += text
        cut = self._find_cut()
        done, self._pending = self._pending[:cut], self._pending[cut:]
        self._scanned -= cut
        return done

    def flush(self) -> str:
        """The rest, when the answer ends."""
        rest, self._pending = self._pending, ""
        self._scanned, self._fence, self._after_blank = 0, "", False
        return rest

    def _find_cut(self) -> int:
        """Where the last complete block ends among the whole lines not yet looked at: 0
        when none does."""
        cut = 0
        while (end := self._pending.find("\n", self._scanned)) != -1:
            start, self._scanned = self._scanned, end + 1
            line = self._pending[start:end]
            if self._starts_a_block(line):
                cut = start
            self._follow(line)
        if self._scanned < len(self._pending) and self._starts_a_block(self._partial_line()):
            cut = self._scanned
            self._after_blank = False
        return cut

    def _partial_line(self) -> str:
        return self._pending[self._scanned :]

    def _starts_a_block(self, line: str) -> bool:
        return self._after_blank and not self._fence and bool(line) and not line[0].isspace()

    def _follow(self, line: str) -> None:
        """Note whether `line` opens or closes a fence, or is blank."""
        fence = FENCE.match(line)
        if fence is not None and (not self._fence or fence[1].startswith(self._fence)):
            self._fence = "" if self._fence else fence[1][:3]
        self._after_blank = not self._fence and not line.strip()
