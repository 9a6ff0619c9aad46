"""The terminal approval prompt: shows a tool call and asks yes / no / always-for-this-session
/ no-and-do-this-instead, answered with one key on a terminal.

The question and the call's first line are on the screen together: a subject (a command)
too long for the terminal is shown by its first lines and its line count, and the user can
answer `v` to see it whole before deciding."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from agent_tutorial.core.permissions import (
    ApprovalAnswer,
    ApprovalRequest,
    DeclinedWithInstructions,
)
from agent_tutorial.core.text import printable
from agent_tutorial.diff_view import diff_rows
from agent_tutorial.terminal_keys import END_OF_INPUT, ESCAPE, read_key

PROMPT = "Allow? [y]es / [n]o / [a]lways this session (Enter = no): "
PROMPT_WITH_VIEW = "Allow? [y]es / [n]o / [a]lways this session / [v]iew all (Enter = no): "
KEY_PROMPT = "Allow? [y]es [a]lways [n]o [t]ell it what to do instead (Esc = no) "
KEY_PROMPT_WITH_VIEW = (
    "Allow? [y]es [a]lways [n]o [t]ell it what to do instead [v]iew all (Esc = no) "
)
INSTEAD_PROMPT = "What should it do instead? "
_KEY_ANSWERS: dict[str, ApprovalAnswer] = {
    "y": "yes",
    "a": "always",
    "n": "no",
    ESCAPE: "no",
    "\x04": "no",  # Ctrl-D, as at the prompt
    END_OF_INPUT: "no",
}
MAX_SHOWN_LINES = 12
MAX_SHOWN_CHARS = 800
MAX_ATTEMPTS = 3
MAX_DIFF_ROWS = 40

_ANSWERS: dict[str, ApprovalAnswer] = {
    "y": "yes",
    "yes": "yes",
    "n": "no",
    "no": "no",
    "a": "always",
    "always": "always",
}
_VIEW_ANSWERS = ("v", "view")


class TerminalApprover:
    """An `Approver` that asks on the terminal; EOF, Enter or no clear answer = no.

    Ctrl-C is not an answer: it propagates and cancels the whole turn, as it does anywhere
    else in a turn (the loop answers the pending calls as interrupted).

    On a terminal one key answers (`read_key()`, no Enter): y, a, n, Esc (no), or t, then
    a line that goes to the model with the denial. Otherwise `read_line(prompt)` reads a
    line; it defaults to `console.input` and is the seam tests plug into.
    """

    def __init__(
        self,
        console: Console,
        read_line: Callable[[str], str] | None = None,
        read_key: Callable[[], str] | None = None,
    ) -> None:
        self.console = console
        self.read_line = read_line or self._read_from_console
        if read_key is None and read_line is None and sys.stdin.isatty():
            read_key = self._read_key_from_terminal
        self.read_key = read_key

    def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        if self.read_key is not None:
            return self._answer_by_key(self.read_key, request)
        shown = self._fitting_panel(request, PROMPT, PROMPT_WITH_VIEW)
        self.console.print(shown.panel)
        prompt = PROMPT if shown.whole else PROMPT_WITH_VIEW
        for _ in range(MAX_ATTEMPTS):
            try:
                line = self.read_line(prompt)
            except EOFError:
                self.console.print("no")
                return "no"
            except KeyboardInterrupt:
                self.console.print(" cancelled")  # after the ^C the terminal echoed
                raise
            text = line.strip().lower()
            if not text:
                return "no"
            answer = _ANSWERS.get(text)
            if answer is not None:
                return answer
            if text in _VIEW_ANSWERS and not shown.whole:
                # The whole call, then the short one again: its first line is back on the
                # screen with the question.
                self.console.print(describe_request(request))
                self.console.print(shown.panel)
                continue
            choices = "y, n or a" if shown.whole else "y, n, a or v"
            self.console.print(f"Please answer {choices} (got {line.strip()!r}).", markup=False)
        return "no"

    def _fitting_panel(
        self, request: ApprovalRequest, prompt: str, prompt_with_view: str
    ) -> ShownRequest:
        """The call as it fits above the question on this terminal: whole when it does,
        else the longest start of its subject that does, cut at a line's end."""
        height = self.console.size.height
        budget = height - _rows(self.console, Text(prompt_with_view))
        whole = describe_request(request)
        if _rows(self.console, whole) + _rows(self.console, Text(prompt)) <= height:
            return ShownRequest(whole, whole=True)
        subject = request.subject
        end = longest_fitting_prefix(
            len(subject),
            lambda length: (
                _rows(self.console, describe_request(request, shown_subject=length)) <= budget
            ),
        )
        return ShownRequest(
            describe_request(request, shown_subject=at_line_end(subject, end)), whole=False
        )

    def _answer_by_key(self, read: Callable[[], str], request: ApprovalRequest) -> ApprovalAnswer:
        """Keys that are no answer (Enter, an arrow, a letter) are passed over; `v` (when
        the call was cut to fit) shows it whole, then the short one and the question again."""
        shown = self._fitting_panel(request, KEY_PROMPT, KEY_PROMPT_WITH_VIEW)
        keys = set(_KEY_ANSWERS) | {"t"} | (set() if shown.whole else {"v"})
        while True:
            self.console.print(shown.panel)
            question = KEY_PROMPT if shown.whole else KEY_PROMPT_WITH_VIEW
            self.console.print(Text(question, style="bold"), end="")
            key = self._read_one_of(read, keys)
            if key != "v":
                break
            self.console.print("view")
            self.console.print(describe_request(request))
        if key != "t":
            answer = _KEY_ANSWERS[key]
            self.console.print(str(answer))
            return answer
        self.console.print("no, and instead:")
        try:
            instead = self.read_line(INSTEAD_PROMPT).strip()
        except EOFError:
            instead = ""
        return DeclinedWithInstructions(instead) if instead else "no"

    def _read_one_of(self, read: Callable[[], str], keys: set[str]) -> str:
        try:
            key = read().lower()
            while key not in keys:
                key = read().lower()
        except KeyboardInterrupt:
            self.console.print("cancelled")  # the terminal echoes no ^C while a key is read
            raise
        return key

    def _read_key_from_terminal(self) -> str:
        return read_key(sys.stdin.fileno())

    def _read_from_console(self, prompt: str) -> str:
        return self.console.input(Text(prompt, style="bold"))  # Text: "[y]" is not markup


@dataclass(frozen=True, slots=True)
class ShownRequest:
    panel: Panel
    whole: bool
    """False: the subject was cut to fit, and `v` shows it whole."""


def describe_request(request: ApprovalRequest, *, shown_subject: int | None = None) -> Panel:
    """The call as the user sees it: the subject in full (or its first `shown_subject`
    characters, with its line count and size), other long values abbreviated.

    Everything is plain `Text`, so brackets in a command are never read as rich markup,
    and control characters are shown escaped, so an escape sequence in a command cannot
    erase or hide part of what the user approves.
    """
    body = Text()
    body.append(printable(request.reason), style="dim")
    if request.sandbox is not None:
        body.append(f"\nruns sandboxed ({printable(request.sandbox)})", style="green")
    if request.change is not None:  # write_file, edit_file: the diff says what changes
        body.append(f"\n{printable(request.change.path)}\n", style="bold")
        body.append_text(diff_rows(request.change, max_rows=MAX_DIFF_ROWS))
        return _panel(request, body)
    for name, value in request.arguments.items():
        body.append("\n")
        body.append(f"{printable(name)}: ", style="bold")
        shown = _as_text(value)
        if shown != request.subject:
            shown = _abbreviate(shown)
        elif shown_subject is not None:
            shown = _first_part(shown, shown_subject)
        shown = printable(shown)
        if "\n" in shown:  # a multi-line value starts on its own line, indented
            shown = "\n" + textwrap.indent(shown, "  ")
        body.append(shown)
    return _panel(request, body)


def _panel(request: ApprovalRequest, body: Text) -> Panel:
    title = Text(f"{printable(request.tool_name)} wants permission", style="bold yellow")
    return Panel(body, title=title, title_align="left", border_style="yellow")


def longest_fitting_prefix(length: int, fits: Callable[[int], bool]) -> int:
    """The largest `n` in 1..`length` with `fits(n)`, for a `fits` that holds up to some
    point and not after it; 1 when none does (a line is shown however small the screen)."""
    low, high = 1, length
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def at_line_end(text: str, end: int) -> int:
    """`end`, moved back to the end of the last whole line before it when it falls inside
    a line that is not the first."""
    if end == len(text) or text[end] == "\n":
        return end
    newline = text.rfind("\n", 0, end)
    return end if newline == -1 else newline


def _first_part(text: str, end: int) -> str:
    """`text[:end]` between its line count and size and what is left out."""
    lines = text.count("\n") + 1
    shown = text[:end].count("\n") + 1
    plural = "" if lines == 1 else "s"
    head = f"({lines:,} line{plural}, {len(text.encode()):,} bytes; v shows it all)"
    more = f"{lines - shown:,} more line{'' if lines - shown == 1 else 's'}"
    if end == len(text) or text[end] == "\n":
        return f"{head}\n{text[:end]}\n… {more}"
    rest = "the rest of this line" + (f" and {more}" if lines > shown else "")
    return f"{head}\n{text[:end]}\n… {rest}"


def _rows(console: Console, renderable: Panel | Text) -> int:
    """How many terminal rows `renderable` takes on `console`."""
    return len(console.render_lines(renderable, console.options, pad=False))


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _abbreviate(text: str) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[:MAX_SHOWN_LINES])[:MAX_SHOWN_CHARS]
    if shown == text.rstrip("\n"):  # nothing left out but a final newline
        return shown
    size = len(text.encode())
    return f"{shown}\n… ({len(lines)} lines, {size:,} bytes in all)"
