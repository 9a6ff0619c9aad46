"""grep's matching: a regular expression searched in each line of a file, within a deadline.

The `regex` module speaks `re`'s syntax and takes a timeout, which `re` cannot offer
mid-match; but the timeout costs microseconds per call, so searching each line of a large
tree separately is slow. Where the pattern cannot tell a line inside a file from the line
alone (see `_LINE_LOCAL`), one search of the whole file decides first whether any line
can match, and files without a match are passed over in one call.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import regex

# Patterns made only of these pieces match inside a single line, and match the same way
# whether the line stands alone or sits between newlines: no piece can consume a newline
# (`.` without the s flag, \d, \w, plain characters, positive classes of plain
# characters), `^` and `$` meet line ends under MULTILINE, and `\b` sees a newline just
# as it sees the start or end of a string. Anything else (\s, negated classes,
# lookarounds, \A, \Z, backreferences, inline flags other than a leading (?i)) skips the
# whole-file pass.
_LINE_LOCAL = regex.compile(
    r"""
    (?:\(\?i\))?
    (?:
        [^\\\[\](){}\x00-\x1f\x7f]                      # a plain character or . * + ? | ^ $
      | \\[.^$*+?()\[\]{}|\\/\-dwb]                     # an escaped mark, \d, \w or \b
      | \((?!\?) | \(\?: | \)                          # a group, not (?s) or (?<=
      | \{\d*,?\d*\}                                    # a counted repeat
      | \[[^\^\\\[\]\x00-\x1f\x7f][^\\\[\]\x00-\x1f\x7f]*\]  # a positive class
    )*
    """,
    regex.VERBOSE,
)


class SearchTimeout(Exception):
    """The deadline passed during a search."""


class InvalidPattern(ValueError):
    """The pattern does not compile; the message says why."""


@dataclass(frozen=True, slots=True)
class LineSearch:
    """One pattern, searched line by line in text after text, against one deadline."""

    pattern: regex.Pattern[str]
    whole_text: regex.Pattern[str] | None
    deadline: float

    @classmethod
    def compile(cls, pattern: str, *, budget_s: float) -> LineSearch:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # "possible nested set" and kin
                compiled = regex.compile(pattern)
                whole_text = None
                if _LINE_LOCAL.fullmatch(pattern):
                    whole_text = regex.compile(pattern, regex.MULTILINE)
        except (regex.error, OverflowError, RecursionError) as error:
            raise InvalidPattern(str(error)) from None
        return cls(compiled, whole_text, time.monotonic() + budget_s)

    def matching_lines(self, text: str) -> Iterator[tuple[int, str]]:
        """(1-based number, line without its line ending) for each line that matches;
        raises `SearchTimeout` once the deadline has passed."""
        if self.whole_text is not None and not self._found(self.whole_text, _joined(text)):
            return
        for number, line in _numbered_lines(text):
            if self._found(self.pattern, line):
                yield number, line

    def _found(self, pattern: regex.Pattern[str], string: str) -> bool:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise SearchTimeout
        try:
            return pattern.search(string, timeout=remaining) is not None
        except TimeoutError:
            raise SearchTimeout from None


def _numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    for number, line in enumerate(lines, start=1):
        yield number, line.removesuffix("\r")


def _joined(text: str) -> str:
    """The text as the lines `_numbered_lines` gives, joined by newlines: one carriage
    return before each line end dropped."""
    joined = text.replace("\r\n", "\n")
    return joined.removesuffix("\r")
