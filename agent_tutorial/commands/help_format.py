"""Help pages that fit the terminal they are shown on, down to 40 columns.

Click lays help out at least 50 columns wide and puts each option's text in a column
beside it: on a 40-column terminal the terminal then wrapped every line again, mid-word
(`Show t` / `his`). Here the width is the terminal's, and when the side column would be
too narrow to read, an option's text goes under its name instead, as `man` does.
"""

from __future__ import annotations

import inspect
import shutil
import sys
import textwrap
from collections.abc import Sequence

from typer._click.core import Command, Context
from typer._click.formatting import HelpFormatter, wrap_text
from typer._click.utils import make_default_short_help

NARROWEST_HELP = 20
"""Columns below which help is laid out as if there were this many (the terminal wraps)."""
SIDE_COLUMN_MIN = 30
"""An option's text beside its name needs this many columns, or it goes under the name."""
UNDER_INDENT = 4


class FittedHelpFormatter(HelpFormatter):
    """Click's formatter at the terminal's width, with an option's text under its name
    when there is no room beside it."""

    def __init__(self, width: int | None = None, max_width: int | None = None) -> None:
        if width is None:
            columns = shutil.get_terminal_size().columns  # COLUMNS, else the terminal's
            width = max(min(columns, max_width or 80) - 2, NARROWEST_HELP)
        super().__init__(width=width, max_width=max_width)

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        """Click's usage line; a command name too long to leave the arguments room beside it
        is broken at its spaces, not wherever the terminal's edge falls."""
        prefix = "Usage: " if prefix is None else prefix
        if len(prefix) + len(prog) + 21 <= self.width - self.current_indent:
            super().write_usage(prog, args, prefix)
            return
        indent = " " * self.current_indent
        for line in _wrapped(f"{prefix}{prog} {args}", self.width, indent, indent + "    "):
            self.write(f"{line}\n")

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        widest = max((len(term) for term, _ in rows), default=0)
        side = self.width - self.current_indent - min(widest, col_max) - col_spacing
        if side >= SIDE_COLUMN_MIN:
            super().write_dl(rows, col_max, col_spacing)
            return
        for term, text in rows:
            self._write_under(term, text)

    def _write_under(self, term: str, text: str) -> None:
        """`term` on its own lines (broken at its spaces), then `text` indented below it."""
        indent = " " * self.current_indent
        for line in _wrapped(term, self.width, indent, indent + "  "):
            self.write(f"{line}\n")
        if text:
            under = indent + " " * UNDER_INDENT
            wrapped = wrap_text(
                text,
                self.width,
                initial_indent=under,
                subsequent_indent=under,
                preserve_paragraphs=True,
            )
            self.write(f"{wrapped}\n")


def _wrapped(text: str, width: int, first: str, then: str) -> list[str]:
    """`text` broken at its spaces only: an option's name or `<a|b|c>` stays whole."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=then,
        break_long_words=False,
        break_on_hyphens=False,
    )


class FittedHelpContext(Context):
    formatter_class = FittedHelpFormatter


def fit_help_to_the_terminal(command: Command) -> None:
    """Every command under `command` (itself included) lays its help out to fit. A
    command listed under Commands: gets its first sentence as its summary: click cut it
    to the room beside the name (`Trust this...` at 40 columns), which the text under
    the name does not need."""
    command.context_class = FittedHelpContext
    if command.short_help is None and command.help:
        command.short_help = make_default_short_help(inspect.cleandoc(command.help), sys.maxsize)
    for child in getattr(command, "commands", {}).values():
        fit_help_to_the_terminal(child)
