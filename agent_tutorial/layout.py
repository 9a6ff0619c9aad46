"""Text laid out for a terminal of any width, 40 columns included: a number stays on the
line of the word after it (`1.2 KB`, `3 messages`), and no line ends in spaces.

rich wraps at every space (a non-breaking one too: Python's `\\s` matches it), and pads a
table's cells to their column's width; these two renderables do neither.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

# A run of characters a line may not break inside: spaces count as part of it only after
# a digit ("1.2 KB", "46×, 12 item(s)" keep each number with what it counts).
UNBROKEN = re.compile(r"(?:\S|(?<=\d) (?=\S))+")


class KeepUnits:
    """`text` wrapped to the width at spaces, except after a number. Where the console
    does not wrap (a pipe), each line is printed whole."""

    def __init__(self, text: Text | str) -> None:
        self.text = Text(text) if isinstance(text, str) else text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.text.split("\n", allow_blank=True):
            if options.no_wrap:
                yield line
            else:
                yield from wrap_keeping_units(line, options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        plain = self.text.plain
        chunks = [cell_len(match.group()) for match in UNBROKEN.finditer(plain)]
        longest = max((cell_len(line) for line in plain.splitlines()), default=0)
        return Measurement(max(chunks, default=0), longest).clamp(max_width=options.max_width)


def wrap_keeping_units(line: Text, width: int) -> list[Text]:
    """One line of text as lines of at most `width` cells, broken only between unbroken
    runs (a run wider than `width` alone is cut, as a terminal would)."""
    offsets: list[int] = []
    start = 0  # where the current line starts in `line`
    for match in UNBROKEN.finditer(line.plain):
        if match.start() > start and cell_len(line.plain[start : match.end()]) > width:
            offsets.append(match.start())
            start = match.start()
        while cell_len(line.plain[start : match.end()]) > width:
            start += _fitting_prefix(line.plain[start : match.end()], width)
            offsets.append(start)
    pieces = list(line.divide(offsets))
    for piece in pieces:
        piece.rstrip()  # the space the line broke at
    return pieces


def _fitting_prefix(text: str, width: int) -> int:
    """How many characters of `text` fit in `width` cells (at least one)."""
    used = 0
    for taken, character in enumerate(text):
        used += cell_len(character)
        if used > width:
            return max(1, taken)
    return max(1, len(text))


class Trimmed:
    """`renderable` with the spaces at each line's end removed (rich pads every cell of a
    table to its column's width, the last one included)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            yield from _without_trailing_spaces(line)
            yield Segment.line()

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)


def _without_trailing_spaces(line: Iterable[Segment]) -> Iterator[Segment]:
    segments = list(line)
    while segments and not segments[-1].control and not segments[-1].text.rstrip(" "):
        segments.pop()
    if segments and not segments[-1].control:
        last = segments.pop()
        segments.append(Segment(last.text.rstrip(" "), last.style))
    return iter(segments)


def shorten_at_word(text: str, width: int) -> str:
    """`text` cut to `width` cells with an ellipsis, at a space when one is near the end
    (a cut word reads as a typo: `repositor…`)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    cut = text[: _fitting_prefix(text, width - 1)]
    space = cut.rfind(" ")
    if space >= width * 2 // 3:
        cut = cut[:space]
    return cut.rstrip() + "…"


def pack_cells(cells: Sequence[str], width: int, separator: str) -> list[str]:
    """`cells` joined by `separator` into lines of at most `width` cells, never splitting
    a cell (one wider than `width` has a line of its own)."""
    lines: list[str] = []
    for cell in cells:
        if lines and cell_len(lines[-1] + separator + cell) <= width:
            lines[-1] += separator + cell
        else:
            lines.append(cell)
    return lines
