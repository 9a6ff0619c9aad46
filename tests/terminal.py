"""A real pseudo-terminal for tests: `agent-tutorial` runs as a child process on a pty
(pexpect) and a pyte screen interprets what it writes, as a terminal emulator would.

The screen answers cursor-position requests, as real terminals do, so prompt-toolkit
draws its prompt and toolbar normally. Waiting is always on screen content with a
timeout, never a fixed sleep.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pyte

WAIT_S = 20.0
SCROLLBACK_LINES = 5000


class _Screen(pyte.HistoryScreen):
    """A pyte screen with scrollback that answers the child's status requests."""

    def __init__(self, columns: int, lines: int, reply: Callable[[str], object]) -> None:
        super().__init__(columns, lines, history=SCROLLBACK_LINES)
        self._reply = reply

    def write_process_input(self, data: str) -> None:
        self._reply(data)


def _default_sigint() -> None:
    """The child gets Ctrl-C's default behaviour even if the test runner ignores SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """`python -m agent_tutorial ARGS` on a pty of `columns` × `lines`.

    `fixed_size` also exports COLUMNS and LINES, which pins rich's width; leave it off to
    test a resize, where only the pty size (and SIGWINCH) may tell the program.
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        columns: int = 80,
        lines: int = 30,
        fixed_size: bool = True,
    ) -> None:
        environment = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}}
        environment.update(env)
        environment["TERM"] = "xterm-256color"
        if fixed_size:
            environment.update(COLUMNS=str(columns), LINES=str(lines))
        self.child = pexpect.spawn(
            sys.executable,
            ["-m", "agent_tutorial", *args],
            cwd=str(cwd),
            env=environment,
            dimensions=(lines, columns),
            encoding="utf-8",
            codec_errors="replace",
            preexec_fn=_default_sigint,
        )
        self.screen = _Screen(columns, lines, self.child.send)
        self._stream = pyte.Stream(self.screen)

    # -- input ---------------------------------------------------------------------
    def type(self, text: str) -> None:
        self.child.send(text)

    def enter(self, line: str) -> None:
        self.child.send(line + "\r")

    def resize(self, columns: int, lines: int) -> None:
        self.screen.resize(lines, columns)
        self.child.setwinsize(lines, columns)  # the child gets SIGWINCH

    # -- output --------------------------------------------------------------------
    def lines(self) -> list[str]:
        """Everything the screen has shown: scrollback, then the visible lines."""
        columns = self.screen.columns
        scrolled = [
            "".join(line[x].data for x in range(columns)) for line in self.screen.history.top
        ]
        return [line.rstrip() for line in [*scrolled, *self.screen.display]]

    def text(self) -> str:
        return "\n".join(self.lines())

    def flat_text(self) -> str:
        """The transcript with every run of whitespace (line ends too) as one space."""
        return " ".join(self.text().split())

    def unwrapped_text(self) -> str:
        """`flat_text`, but a line that fills the whole width continues the next one
        without a space: the terminal wrapped it there, maybe mid-word."""
        columns = self.screen.columns
        joined = "".join(line + ("" if len(line) == columns else "\n") for line in self.lines())
        return " ".join(joined.split())

    def cursor_line(self) -> str:
        return self.screen.display[self.screen.cursor.y].rstrip()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
        """Read the child's output into the screen until `condition()` holds."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; screen:\n{self.text()}")
            if not self._read(min(0.1, max(0.0, deadline - time.monotonic()))):
                if not condition():
                    raise AssertionError(f"the program ended before {what}; screen:\n{self.text()}")
                return

    def wait_for_text(self, text: str, timeout_s: float = WAIT_S) -> None:
        self.wait_for(lambda: text in self.text(), repr(text), timeout_s)

    def wait_for_prompt(self, timeout_s: float = WAIT_S) -> None:
        """Until the REPL's prompt is where the cursor is: the last turn is over."""
        self.wait_for(lambda: self.cursor_line().startswith("›"), "the prompt", timeout_s)

    def wait_for_exit(self, timeout_s: float = WAIT_S) -> int:
        """Read to the end of the output; the exit status (-signal if a signal ended it)."""
        deadline = time.monotonic() + timeout_s
        while self._read(0.1):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for the exit; screen:\n{self.text()}")
        self.child.wait()
        status = self.child.exitstatus
        return status if status is not None else -(self.child.signalstatus or 0)

    def hang_up(self, timeout_s: float = WAIT_S) -> int:
        """What closing the terminal window does: SIGHUP, then the exit status."""
        self.child.kill(signal.SIGHUP)
        return self.wait_for_exit(timeout_s)

    def close(self) -> None:
        # Hang up first and let the program clean up (its sandbox's temporary directory);
        # pexpect's terminate() follows SIGHUP with SIGINT and SIGKILL a tenth of a second
        # later, which cut that short and left the directory behind.
        if self.child.isalive():
            try:
                self.hang_up(timeout_s=5.0)
            except AssertionError:
                self.child.terminate(force=True)
        self.child.close()

    def _read(self, timeout_s: float) -> bool:
        """Feed whatever arrives within `timeout_s` to the screen; False once the child's
        side of the pty is closed."""
        try:
            self._stream.feed(self.child.read_nonblocking(65536, timeout=timeout_s))
        except pexpect.TIMEOUT:
            pass
        except pexpect.EOF:
            return False
        return True


@dataclass
class PtyRun:
    exit_code: int
    stdout: bytes
    stderr: bytes


def run_on_two_terminals(
    args: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float = WAIT_S,
    columns: int = 80,
) -> PtyRun:
    """`python -m agent_tutorial ARGS` with stdout and stderr each on its own pty of
    `columns` (stdin empty), read to the end as the exact bytes written: the ptys are raw,
    so the terminal adds no carriage returns, and nothing interprets an escape sequence."""
    masters, slaves = zip(*(pty.openpty() for _ in range(2)), strict=True)
    for slave in slaves:
        tty.setraw(slave)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}}
    environment.update({"TERM": "xterm-256color", **env})
    child = subprocess.Popen(
        [sys.executable, "-m", "agent_tutorial", *args],
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=slaves[0],
        stderr=slaves[1],
    )
    for slave in slaves:
        os.close(slave)
    received = {master: bytearray() for master in masters}
    open_masters = list(masters)
    deadline = time.monotonic() + timeout_s
    try:
        while open_masters:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; stderr so far: {bytes(received[masters[1]])!r}")
            ready, _, _ = select.select(open_masters, [], [], 0.1)
            for master in ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed its side
                    data = b""
                if data:
                    received[master] += data
                else:
                    open_masters.remove(master)
        exit_code = child.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for master in masters:
            os.close(master)
    return PtyRun(exit_code, bytes(received[masters[0]]), bytes(received[masters[1]]))
