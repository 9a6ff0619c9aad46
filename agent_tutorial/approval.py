"""The terminal approval prompt: shows a tool call and asks yes / no / always-for-this-session
/ no-and-do-this-instead, answered with one key on a terminal."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
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
KEY_PROMPT = "Allow? [y]es [a]lways [n]o [t]ell it what to do instead (Esc = no) "
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
        self.console.print(describe_request(request))
        if self.read_key is not None:
            return self._answer_by_key(self.read_key)
        for _ in range(MAX_ATTEMPTS):
            try:
                line = self.read_line(PROMPT)
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
            self.console.print(f"Please answer y, n or a (got {line.strip()!r}).", markup=False)
        return "no"

    def _answer_by_key(self, read: Callable[[], str]) -> ApprovalAnswer:
        """Keys that are no answer (Enter, an arrow, a letter) are passed over."""
        self.console.print(Text(KEY_PROMPT, style="bold"), end="")
        try:
            key = read().lower()
            while key not in _KEY_ANSWERS and key != "t":
                key = read().lower()
        except KeyboardInterrupt:
            self.console.print("cancelled")  # the terminal echoes no ^C while a key is read
            raise
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

    def _read_key_from_terminal(self) -> str:
        return read_key(sys.stdin.fileno())

    def _read_from_console(self, prompt: str) -> str:
        return self.console.input(Text(prompt, style="bold"))  # Text: "[y]" is not markup


def describe_request(request: ApprovalRequest) -> Panel:
    """The call as the user sees it: the subject in full, other long values abbreviated.

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
        shown = printable(shown)
        if "\n" in shown:  # a multi-line value starts on its own line, indented
            shown = "\n" + textwrap.indent(shown, "  ")
        body.append(shown)
    return _panel(request, body)


def _panel(request: ApprovalRequest, body: Text) -> Panel:
    title = Text(f"{printable(request.tool_name)} wants permission", style="bold yellow")
    return Panel(body, title=title, title_align="left", border_style="yellow")


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _abbreviate(text: str) -> str:
    lines = text.splitlines()
    shown = "\n".join(lines[:MAX_SHOWN_LINES])[:MAX_SHOWN_CHARS]
    if shown == text.rstrip("\n"):  # nothing left out but a final newline
        return shown
    size = len(text.encode())
    return f"{shown}\n… ({len(lines)} lines, {size:,} bytes in all)"
