"""A file change as a coloured unified diff for the terminal: each row the line number, then
`-` or `+` (a space for context), then the text, with nothing between; a new file as its
size and first lines."""

from __future__ import annotations

import difflib

from rich.text import Text

from agent_tutorial.core.text import printable
from agent_tutorial.core.tools import FileChange

CONTEXT_LINES = 2
"""Unchanged lines shown around each change."""
NEW_FILE_LINES = 10
"""Lines of a new file shown under its size."""
_STYLES = {"-": "red", "+": "green", " ": "dim"}


def diff_rows(change: FileChange, *, max_rows: int) -> Text:
    """The change in at most `max_rows` rows (and a line saying how many more there were)."""
    if change.before is None:
        return _new_file(change.after, max_rows=min(max_rows, NEW_FILE_LINES))
    rows = list(_changed_rows(change.before.splitlines(), change.after.splitlines()))
    if not rows:
        return Text("no change", style="dim")
    width = len(str(max(number for number, _, _ in rows)))
    shown = Text()
    for number, sign, line in rows[:max_rows]:
        shown.append(f"{number:>{width}} {sign}{printable(line)}\n", style=_STYLES[sign])
    if len(rows) > max_rows:
        shown.append(f"… {len(rows) - max_rows} more rows\n", style="dim")
    shown.rstrip()
    return shown


def _changed_rows(before: list[str], after: list[str]) -> list[tuple[int, str, str]]:
    """(line number, sign, text): old numbers for removed lines, new ones otherwise."""
    rows: list[tuple[int, str, str]] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT_LINES):
        for tag, old_start, old_end, new_start, new_end in group:
            if tag == "equal":
                rows += _numbered(after, new_start, new_end, " ")
            else:
                rows += _numbered(before, old_start, old_end, "-")
                rows += _numbered(after, new_start, new_end, "+")
    return rows


def _numbered(lines: list[str], start: int, end: int, sign: str) -> list[tuple[int, str, str]]:
    return [(number + 1, sign, lines[number]) for number in range(start, end)]


def _new_file(text: str, *, max_rows: int) -> Text:
    lines = text.splitlines()
    shown = Text(f"new file, {len(lines)} lines, {len(text.encode()):,} bytes\n", style="bold")
    width = len(str(min(len(lines), max_rows) or 1))
    for number, line in enumerate(lines[:max_rows], start=1):
        shown.append(f"{number:>{width}} +{printable(line)}\n", style="green")
    if len(lines) > max_rows:
        shown.append(f"… {len(lines) - max_rows} more lines\n", style="dim")
    shown.rstrip()
    return shown
