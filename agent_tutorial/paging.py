"""A pager for output taller than the terminal (`sessions show`, `artifacts show`), as git
pages its log: `$PAGER`, else `less` with `LESS=FRX` unless the user set `LESS` (colours
kept, the text left on the screen after `q`). To a pipe, or when it fits, output is
printed as it is."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess

from rich.cells import cell_len
from rich.console import Console, RenderableType

COLOURS = re.compile(r"\x1b\[[0-9;]*m")
"""What rich writes for a style: no width on the screen."""
DEFAULT_LESS_OPTIONS = "FRX"
"""git's: quit at once if it fits, keep colours (-R), leave the text on the screen (-X)."""


def print_paged(console: Console, shown: RenderableType) -> None:
    """`shown` on `console`, through the pager when it is a terminal `shown` is taller
    than."""
    if not console.is_terminal:
        console.print(shown)
        return
    with console.capture() as captured:
        console.print(shown)
    _show(console, captured.get())


def write_paged(console: Console, text: str) -> None:
    """`text` as it is (a file's), through the pager when `console` is a terminal it is
    taller than."""
    if console.is_terminal:
        _show(console, text)
    else:
        console.file.write(text)
        console.file.flush()


def _show(console: Console, text: str) -> None:
    if _rows(text, console.width) < console.height or not _page(text):
        console.file.write(text)
        console.file.flush()


def _rows(text: str, width: int) -> int:
    """The terminal rows `text` takes, a line wider than `width` wrapping onto more."""
    lines = COLOURS.sub("", text).splitlines()
    return sum(max(1, -(-cell_len(line) // max(1, width))) for line in lines)


def _page(text: str) -> bool:
    """Whether a pager showed `text`: False when there is none to run."""
    command = os.environ.get("PAGER") or shutil.which("less")
    if not command:
        return False
    environment = dict(os.environ)
    environment.setdefault("LESS", DEFAULT_LESS_OPTIONS)
    try:  # $PAGER is a shell command (`less -S`), run as git runs it
        pager = subprocess.Popen(
            command, shell=True, stdin=subprocess.PIPE, env=environment, errors="replace"
        )
    except OSError:
        return False
    assert pager.stdin is not None  # stdin=PIPE
    # The user may quit before the end: the rest is not wanted, and no error.
    with contextlib.suppress(BrokenPipeError):
        pager.stdin.write(text)
    with contextlib.suppress(BrokenPipeError):
        pager.stdin.close()
    _wait_through_interrupts(pager)
    return True


def _wait_through_interrupts(pager: subprocess.Popen[str]) -> None:
    """Ctrl-C in the pager reaches this process too; the pager decides what it means
    (less stays), and the terminal is the pager's until it leaves."""
    while True:
        try:
            pager.wait()
            return
        except KeyboardInterrupt:
            continue
