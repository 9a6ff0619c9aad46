"""A real pseudo-terminal for tests: `agent-tutorial` runs as a child process on a pty
(see `tests.launcher`) and a pyte screen interprets what it writes, as a terminal emulator
would.

The screen answers cursor-position requests, as real terminals do, so prompt-toolkit
draws its prompt and toolbar normally. Waiting is always on screen content with a
timeout, never a fixed sleep.
"""

from __future__ import annotations

import codecs
import errno
import fcntl
import io
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
import tty
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyte

from tests.launcher import launch

WAIT_S = 20.0
SCROLLBACK_LINES = 5000


class _Screen(pyte.HistoryScreen):
    """A pyte screen with scrollback that answers the child's status requests."""

    def __init__(self, columns: int, lines: int, reply: Callable[[str], object]) -> None:
        super().__init__(columns, lines, history=SCROLLBACK_LINES)
        self._reply = reply

    def write_process_input(self, data: str) -> None:
        self._reply(data)


def _set_size(descriptor: int, columns: int, lines: int) -> None:
    fcntl.ioctl(descriptor, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))


class Terminal:
    """`python -m agent_tutorial ARGS` (or `python PROGRAM ARGS`) on a pty of `columns` ×
    `lines`, in its own session with the pty as its controlling terminal.

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
        program: Sequence[str] = ("-m", "agent_tutorial"),
    ) -> None:
        environment = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}}
        environment.update(env)
        environment["TERM"] = "xterm-256color"
        if fixed_size:
            environment.update(COLUMNS=str(columns), LINES=str(lines))
        self._master, child_side = pty.openpty()
        _set_size(child_side, columns, lines)
        try:
            self.process = launch(
                [*program, *args],
                cwd=cwd,
                env=environment,
                stdio=(child_side, child_side, child_side),
                controlling_terminal=True,
            )
        finally:
            os.close(child_side)
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._recording: io.StringIO | None = None
        self.screen = _Screen(columns, lines, self.type)
        self._stream = pyte.Stream(self.screen)

    # -- input ---------------------------------------------------------------------
    def type(self, text: str) -> None:
        data = text.encode()
        while data:
            data = data[os.write(self._master, data) :]

    def enter(self, line: str) -> None:
        self.type(line + "\r")

    def resize(self, columns: int, lines: int) -> None:
        self.screen.resize(lines, columns)
        _set_size(self._master, columns, lines)  # the child gets SIGWINCH

    def kill(self, signal_number: int) -> None:
        self.process.send_signal(signal_number)

    # -- output --------------------------------------------------------------------
    def lines(self) -> list[str]:
        """Everything the screen has shown: scrollback, then the visible lines."""
        columns = self.screen.columns
        scrolled = [
            "".join(line[x].data for x in range(columns)) for line in self.screen.history.top
        ]
        return [line.rstrip() for line in [*scrolled, *self.screen.display]]

    def record(self) -> io.StringIO:
        """Everything the program writes from now on, as written (escapes included)."""
        self._recording = io.StringIO()
        return self._recording

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

    def toolbar(self) -> str:
        """The REPL's toolbar: the line right under the prompt the cursor is on."""
        below = self.screen.cursor.y + 1
        return self.screen.display[below].rstrip() if below < self.screen.lines else ""

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

    def wait_for_text(self, text: str, timeout_s: float = WAIT_S, *, times: int = 1) -> None:
        """Until `text` has been shown `times` times."""
        self.wait_for(lambda: self.text().count(text) >= times, f"{text!r} × {times}", timeout_s)

    def wait_for_question(self, times: int = 1, timeout_s: float = WAIT_S) -> None:
        """Until the approval question has been shown `times` times and the program reads
        single keys (the pty neither echoes nor edits lines): a key typed sooner is dropped,
        by design, so a test must not answer a question the program has not started
        reading."""
        self.wait_for(
            lambda: self.text().count("(Esc = no)") >= times and self._reads_single_keys(),
            f"the question ({times}) read a key at a time",
            timeout_s,
        )

    def _reads_single_keys(self) -> bool:
        local_modes = termios.tcgetattr(self._master)[3]  # a pty's two ends share them
        return not local_modes & (termios.ICANON | termios.ECHO)

    def wait_for_prompt(self, timeout_s: float = WAIT_S) -> None:
        """Until the REPL's prompt is where the cursor is: the last turn is over."""
        self.wait_for(lambda: self.cursor_line().startswith("›"), "the prompt", timeout_s)

    def wait_for_exit(self, timeout_s: float = WAIT_S) -> int:
        """Read to the end of the output; the exit status (-signal if a signal ended it)."""
        deadline = time.monotonic() + timeout_s
        while self._read(0.1):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for the exit; screen:\n{self.text()}")
        try:
            return self.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as ran_on:
            screen = self.text()
            message = f"the pty closed but the program ran on; screen:\n{screen}"
            raise AssertionError(message) from ran_on

    def hang_up(self, timeout_s: float = WAIT_S) -> int:
        """What closing the terminal window does: SIGHUP, then the exit status."""
        self.kill(signal.SIGHUP)
        return self.wait_for_exit(timeout_s)

    def close(self) -> None:
        # Hang up first and let the program clean up (its sandbox's temporary directory);
        # only a program that outlives that gets SIGKILL.
        if self.process.poll() is None:
            try:
                self.hang_up(timeout_s=5.0)
            except AssertionError:
                self.kill(signal.SIGKILL)
                self.process.wait()
        os.close(self._master)

    def _read(self, timeout_s: float) -> bool:
        """Feed whatever arrives within `timeout_s` to the screen; False once the child's
        side of the pty is closed."""
        if not select.select([self._master], [], [], timeout_s)[0]:
            return True
        try:
            data = os.read(self._master, 65536)
        except OSError as error:  # EIO: every process on the child's side closed it
            if error.errno != errno.EIO:
                raise
            data = b""
        if not data:
            return False
        text = self._decoder.decode(data)
        if self._recording is not None:
            self._recording.write(text)
        self._stream.feed(text)
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
        _set_size(slave, columns, 30)
    environment = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES"}}
    environment.update({"TERM": "xterm-256color", **env})
    child = launch(["-m", "agent_tutorial", *args], cwd=cwd, env=environment, stdio=(None, *slaves))
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
            child.send_signal(signal.SIGKILL)
            child.wait()
        for master in masters:
            os.close(master)
    return PtyRun(exit_code, bytes(received[masters[0]]), bytes(received[masters[1]]))
