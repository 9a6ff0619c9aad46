"""Run one shell command the way an agent needs it: bounded in time and output, and never
leaving a process behind (the whole process group goes when the command ends, and so do
the processes that left it, where `processes.become_subreaper()` lets us find them)."""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeAlias

from agent_tutorial.adapters.escapees import Escapees
from agent_tutorial.adapters.processes import TERMINATING_SIGNALS

_SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None

_CHUNK_BYTES = 64 * 1024
_EXIT_CHECK_INTERVAL_S = 0.1
"""How often to look for bash's exit while a background child keeps the pipe open."""
_TERM_GRACE_S = 1.0
"""How long the process group gets to exit after SIGTERM before SIGKILL."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command did. `exit_code` is None when it timed out; a negative code means
    bash was killed by that signal. `total_bytes` counts all output, shown or not."""

    exit_code: int | None
    timed_out: bool
    output: str
    total_bytes: int
    truncated: bool


def run_command(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    output_cap_bytes: int = 30_000,
    env: Mapping[str, str] | None = None,
) -> CommandResult:
    """Run `command` with `bash -c` in `cwd`: stdin empty, stdout and stderr merged, with
    `env` as its environment (default: ours).

    Output beyond `output_cap_bytes` keeps its first and last halves. On timeout, on
    KeyboardInterrupt (re-raised) and after a normal exit alike, every process left in the
    command's process group, and every escapee (see `Escapees`), is terminated and reaped.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
    if output_cap_bytes < 2:
        raise ValueError(f"output_cap_bytes must be at least 2, got {output_cap_bytes!r}")
    output = _HeadTailBuffer(output_cap_bytes)
    latch = _CtrlCLatch()
    try:
        process = _start_bash(command, cwd, env)
    except BaseException:
        latch.release()
        raise
    with process:
        assert process.stdout is not None  # stdout=PIPE guarantees it
        pipe = process.stdout.fileno()
        try:
            escapees = Escapees(process.pid)
            latch.release()  # a Ctrl-C pressed while bash started surfaces here
            timed_out = _pump(process, pipe, output, time.monotonic() + timeout_s)
        finally:
            _stop_everything(process, pipe, output, escapees)
    return CommandResult(
        exit_code=None if timed_out else process.returncode,
        timed_out=timed_out,
        output=output.text(),
        total_bytes=output.total_bytes,
        truncated=output.truncated,
    )


def _start_bash(command: str, cwd: Path, env: Mapping[str, str] | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        bufsize=0,
        # Its own session: Ctrl-C in our terminal reaches us, not the command, and the
        # group id lets us stop everything the command started.
        start_new_session=True,
    )


class _CtrlCLatch:
    """Remembers Ctrl-C (and SIGTERM, SIGHUP) instead of acting on it while bash starts.

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


def _pump(
    process: subprocess.Popen[bytes], pipe: int, output: _HeadTailBuffer, deadline: float
) -> bool:
    """Read output until bash exits; return True if the deadline came first."""
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while process.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            # Wake up now and then even without output: a background child may hold the
            # pipe open long after bash itself has exited.
            ready = selector.select(min(remaining, _EXIT_CHECK_INTERVAL_S))
            if ready and not _read_chunk(pipe, output):
                return _wait_for_exit(process, deadline)
    return False


def _wait_for_exit(process: subprocess.Popen[bytes], deadline: float) -> bool:
    """The pipe closed but bash runs on (it closed its stdout): wait without reading."""
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        return True
    return False


def _stop_everything(
    process: subprocess.Popen[bytes], pipe: int, output: _HeadTailBuffer, escapees: Escapees
) -> None:
    """Terminate whatever is left of the command's process group and its escapees, then
    kill what did not go and reap bash and the escapees."""
    try:
        _signal_group(process.pid, signal.SIGTERM)
        escapees.terminate()
        # The pipe reaches end-of-file once every process holding it has exited; until
        # then keep what the dying processes still write.
        _drain(pipe, output, time.monotonic() + _TERM_GRACE_S, escapees)
    finally:  # even if a second Ctrl-C cuts the grace short
        _signal_group(process.pid, signal.SIGKILL)
        process.wait()
        escapees.kill_and_reap()


def _drain(pipe: int, output: _HeadTailBuffer, deadline: float, escapees: Escapees) -> None:
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            ready = selector.select(min(remaining, _EXIT_CHECK_INTERVAL_S))
            if ready and not _read_chunk(pipe, output):
                return
            # A process that left the group may hold the pipe; bash's death may have just
            # made one an orphan of ours.
            escapees.terminate()


def _read_chunk(pipe: int, output: _HeadTailBuffer) -> bool:
    """Read what is ready; False at end-of-file."""
    chunk = os.read(pipe, _CHUNK_BYTES)
    output.add(chunk)
    return bool(chunk)


def _signal_group(group_id: int, signal_number: signal.Signals) -> None:
    # ProcessLookupError: the group is already gone; PermissionError: only members that
    # changed their user id remain, and we may not signal them.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group_id, signal_number)


class _HeadTailBuffer:
    """Keeps the first half of the cap and a rolling last half; memory stays bounded
    however much a command prints."""

    def __init__(self, cap_bytes: int) -> None:
        self._head_limit = cap_bytes // 2
        self._tail_limit = cap_bytes - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

    @property
    def truncated(self) -> bool:
        return self.total_bytes > len(self._head) + len(self._tail)

    def add(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk[-self._tail_limit :]
            del self._tail[: -self._tail_limit]

    def text(self) -> str:
        if not self.truncated:
            return bytes(self._head + self._tail).decode("utf-8", errors="replace")
        head = _without_partial_last_character(bytes(self._head))
        tail = _without_partial_first_character(bytes(self._tail))
        omitted = self.total_bytes - len(head) - len(tail)
        return (
            head.decode("utf-8", errors="replace")
            + f"\n… [{omitted} bytes omitted] …\n"
            + tail.decode("utf-8", errors="replace")
        )


def _without_partial_last_character(data: bytes) -> bytes:
    """Drop a UTF-8 character cut in half by the head limit (it would decode as U+FFFD)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    decoder.decode(data, final=False)
    pending, _ = decoder.getstate()
    return data[: len(data) - len(pending)]


def _without_partial_first_character(data: bytes) -> bytes:
    """Drop continuation bytes left at the start of the rolling tail (at most three)."""
    start = 0
    while start < min(len(data), 3) and 0x80 <= data[start] <= 0xBF:
        start += 1
    return data[start:]
