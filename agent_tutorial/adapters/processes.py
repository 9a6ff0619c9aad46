"""No process outlives the tool call that started it, and SIGTERM or SIGHUP end a run as
Ctrl-C does.

Killing a command's process group misses whatever left the group: `setsid`, `setsid -f`,
`nohup … &` under a new session, double-forked daemons. On Linux the CLI makes itself a
*child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`): an orphan anywhere below it is
re-parented to it instead of to init, where `escapees.Escapees` finds, kills and reaps it.
Only `main()` turns this on; a process that did not (a test runner, another platform)
keeps the process-group kill alone. `InterruptLatch` holds those signals back while a
child starts, so its pid is never lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeAlias

_PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>
TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_subreaper = False
_termination_signal: int | None = None


def signal_group(group_id: int, signal_number: signal.Signals) -> None:
    """Send `signal_number` to the process group `group_id`, if any of it is left."""
    # ProcessLookupError: the whole group is already gone; PermissionError: only members
    # that changed their user id remain, and we may not signal them.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group_id, signal_number)


def exited_by(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Wait until `process` exits or the `time.monotonic()` `deadline` passes; True if it
    exited (and is reaped).

    Its pipes reaching end-of-file is not its exit: a command may close or redirect its
    output and work on, and programs such as `touch` close theirs a moment before they
    exit. Its process group is swept only after this, so the sweep never kills it.
    """
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return False
    return True


def is_subreaper() -> bool:
    return _subreaper


def become_subreaper() -> bool:
    """Adopt orphaned descendants from now on (Linux); False where that is not possible."""
    global _subreaper
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here, not at the top: `--help` and `--version` should not pay for it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return False
    _subreaper = True
    return True


class TerminationRequested(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C would be, so every path that stops a tool's
    processes and pairs history on Ctrl-C does the same for them."""


def _raise_termination(signal_number: int, frame: FrameType | None) -> None:
    global _termination_signal
    _termination_signal = signal_number
    raise TerminationRequested(signal.Signals(signal_number).name)


@contextmanager
def terminate_like_ctrl_c() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise `TerminationRequested` in the main thread."""
    previous = {number: signal.signal(number, _raise_termination) for number in TERMINATING_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)


def termination_exit_code() -> int | None:
    """128 + the signal that asked this process to end (143 SIGTERM, 129 SIGHUP), if one did."""
    return None if _termination_signal is None else 128 + _termination_signal


def termination_name() -> str:
    return "" if _termination_signal is None else signal.Signals(_termination_signal).name


_SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None


class InterruptLatch:
    """Remembers Ctrl-C (and SIGTERM, SIGHUP) instead of acting on it while a child starts.

    A KeyboardInterrupt raised inside `subprocess.Popen` loses the new process's pid, and
    with it any way to stop its group; `release()` hands the signals back to the usual
    handlers once the caller can clean up. Only the main thread ever sees them.
    """

    def __init__(self) -> None:
        self._pressed: list[int] = []
        self._previous: dict[int, _SignalHandler] = {}
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, *TERMINATING_SIGNALS):
                previous = signal.getsignal(number)
                if previous is not None:  # None: set outside Python, so we could not restore it
                    signal.signal(number, self._remember)
                    self._previous[number] = previous

    def _remember(self, signal_number: int, frame: FrameType | None) -> None:
        self._pressed.append(signal_number)

    def release(self) -> None:
        previous, self._previous = self._previous, {}
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(self._pressed):
            signal.raise_signal(number)
