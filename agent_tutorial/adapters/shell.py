"""Run one shell command the way an agent needs it: bounded in time and output, and never
leaving a process behind (the whole process group goes when the command ends, and so do
the processes that left it, where `processes.become_subreaper()` lets us find them).

With a `SandboxPolicy` that confines, bash starts inside the operating system's sandbox
(`adapters/sandbox.py`); the process group, the timeout and the output handling stay the
same around it.

Output is decoded and filtered (secret redaction) as it arrives. Memory keeps the first
and last halves of the in-memory cap; with a spool, the whole output also goes to an
unnamed private file as it arrives, up to a disk cap, for chapter 8 to persist.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent_tutorial.adapters.escapees import Escapees
from agent_tutorial.adapters.processes import InterruptLatch, exited_by, signal_group
from agent_tutorial.adapters.sandbox import sandboxed
from agent_tutorial.core.sandbox import SandboxPolicy

_CHUNK_BYTES = 64 * 1024
_EXIT_CHECK_INTERVAL_S = 0.1
"""How often to look for bash's exit while a background child keeps the pipe open."""
_TERM_GRACE_S = 1.0
"""How long the process group gets to exit after SIGTERM before SIGKILL."""
OUTPUT_DISK_CAP_BYTES = 256 * 1024 * 1024
"""Whole output a spool keeps on disk; past it, bytes are counted and dropped."""
_SPOOL_READ_BYTES = 1024 * 1024


class TextFilter(Protocol):
    """Rewrites output as it arrives (secret redaction); `finish` returns what it held."""

    def feed(self, text: str) -> str: ...

    def finish(self) -> str: ...


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command did. `exit_code` is None when it timed out; a negative code means
    bash was killed by that signal (in the sandbox it is 128 + the signal, bubblewrap's
    way, as bash reports a killed child). `total_bytes` counts all output, shown or not.
    `whole_output` holds all of it when it was over the cap and a spool was asked for;
    the caller closes it."""

    exit_code: int | None
    timed_out: bool
    output: str
    total_bytes: int
    truncated: bool
    whole_output: OutputSpool | None = None


def run_command(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    output_cap_bytes: int = 30_000,
    spool_cap_bytes: int = 0,
    output_filter: TextFilter | None = None,
    env: Mapping[str, str] | None = None,
    sandbox: SandboxPolicy | None = None,
) -> CommandResult:
    """Run `command` with `bash -c` in `cwd`: stdin empty, stdout and stderr merged, with
    `env` as its environment (default: ours), confined by `sandbox` when given (raises
    `SandboxUnavailableError` when it confines and cannot run).

    Output is decoded as UTF-8 (invalid bytes become U+FFFD) and passed through
    `output_filter` as it arrives. Beyond `output_cap_bytes` memory keeps its first and last
    halves; with `spool_cap_bytes` > 0 the whole output is also spooled to disk up to that
    cap. On timeout, on KeyboardInterrupt (re-raised) and after a normal exit alike, every
    process left in the command's process group, and every escapee (see `Escapees`), is
    terminated and reaped.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
    if output_cap_bytes < 2:
        raise ValueError(f"output_cap_bytes must be at least 2, got {output_cap_bytes!r}")
    output = _CommandOutput(output_cap_bytes, spool_cap_bytes, output_filter)
    try:
        timed_out, exit_code = _run(command, cwd, env, sandbox, timeout_s, output)
        output.finish()
    except BaseException:
        output.discard()
        raise
    return CommandResult(
        exit_code=exit_code,
        timed_out=timed_out,
        output=output.kept.text(),
        total_bytes=output.raw_bytes,
        truncated=output.kept.truncated,
        whole_output=output.spool,
    )


def _run(
    command: str,
    cwd: Path,
    env: Mapping[str, str] | None,
    sandbox: SandboxPolicy | None,
    timeout_s: float,
    output: _CommandOutput,
) -> tuple[bool, int | None]:
    """Start bash, pump its output until it exits or times out, stop its group; return
    (timed out, exit code)."""
    latch = InterruptLatch()
    try:
        process = _start_bash(command, cwd, env, sandbox)
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
    return timed_out, None if timed_out else process.returncode


def _start_bash(
    command: str, cwd: Path, env: Mapping[str, str] | None, sandbox: SandboxPolicy | None
) -> subprocess.Popen[bytes]:
    argv = ["bash", "-c", command]
    if sandbox is None:
        return _start(argv, cwd, env)
    with sandboxed(sandbox, argv, cwd=cwd) as launch:  # the filter's pipe closes after start
        return _start(list(launch.argv), cwd, env, pass_fds=launch.pass_fds)


def _start(
    argv: list[str], cwd: Path, env: Mapping[str, str] | None, pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        bufsize=0,
        pass_fds=pass_fds,
        # Its own session: Ctrl-C in our terminal reaches us, not the command, and the
        # group id lets us stop everything the command started (in the sandbox too: bwrap
        # runs without --new-session, so the command stays in this group), and the command
        # has no controlling terminal to read from or signal.
        start_new_session=True,
    )


def _pump(
    process: subprocess.Popen[bytes], pipe: int, output: _CommandOutput, deadline: float
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
                return not exited_by(process, deadline)  # bash may run on without stdout
    return False


def _stop_everything(
    process: subprocess.Popen[bytes], pipe: int, output: _CommandOutput, escapees: Escapees
) -> None:
    """Terminate whatever is left of the command's process group and its escapees, then
    kill what did not go and reap bash and the escapees."""
    try:
        signal_group(process.pid, signal.SIGTERM)
        escapees.terminate()
        # The pipe reaches end-of-file once every process holding it has exited; until
        # then keep what the dying processes still write.
        _drain(pipe, output, time.monotonic() + _TERM_GRACE_S, escapees)
    finally:  # even if a second Ctrl-C cuts the grace short
        signal_group(process.pid, signal.SIGKILL)
        process.wait()
        escapees.kill_and_reap()


def _drain(pipe: int, output: _CommandOutput, deadline: float, escapees: Escapees) -> None:
    with selectors.DefaultSelector() as selector:
        selector.register(pipe, selectors.EVENT_READ)
        while (remaining := deadline - time.monotonic()) > 0:
            ready = selector.select(min(remaining, _EXIT_CHECK_INTERVAL_S))
            if ready and not _read_chunk(pipe, output):
                return
            # A process that left the group may hold the pipe; bash's death may have just
            # made one an orphan of ours.
            escapees.terminate()


def _read_chunk(pipe: int, output: _CommandOutput) -> bool:
    """Read what is ready; False at end-of-file."""
    chunk = os.read(pipe, _CHUNK_BYTES)
    output.add(chunk)
    return bool(chunk)


class _CommandOutput:
    """Where a command's output goes: decoded, filtered, kept within the in-memory cap and,
    once it passes that cap, spooled whole (with a spool cap)."""

    def __init__(self, cap_bytes: int, spool_cap_bytes: int, text_filter: TextFilter | None):
        # A byte that is not UTF-8 (a file name `ls` lists) reads as `\\xe9`, the form the
        # file tools show such a name in and accept back.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")
        self._filter = text_filter
        self._spool_cap_bytes = spool_cap_bytes
        self.kept = _HeadTailBuffer(cap_bytes)
        self.spool: OutputSpool | None = None
        self.raw_bytes = 0
        """Bytes the command printed, before decoding and filtering."""

    def add(self, chunk: bytes) -> None:
        self.raw_bytes += len(chunk)
        text = self._decoder.decode(chunk)
        self._keep(self._filter.feed(text) if self._filter else text)

    def finish(self) -> None:
        text = self._decoder.decode(b"", final=True)
        if self._filter:
            text = self._filter.feed(text) + self._filter.finish()
        self._keep(text)
        if self.spool is not None:
            self.spool.finish(self.kept.tail_bytes())

    def discard(self) -> None:
        if self.spool is not None:
            self.spool.close()
            self.spool = None

    def _keep(self, text: str) -> None:
        if not text:
            return
        data = text.encode()
        if self.spool is None and self._spool_cap_bytes > 0 and self.kept.overflows(len(data)):
            self._start_spool()
        if self.spool is not None:
            self.spool.write(data)
        self.kept.add(data)

    def _start_spool(self) -> None:
        try:
            self.spool = OutputSpool(self._spool_cap_bytes)
        except OSError:  # no usable temporary directory: keep the head and tail only
            self._spool_cap_bytes = 0
            return
        # Until now everything fit in memory, so the spool starts from the first byte.
        self.spool.write(self.kept.everything())


class OutputSpool:
    """A command's whole output on disk, written as it arrives, in a private file that never
    has a name (or loses it at once), so it is gone when closed and no one else can open it.

    Bytes past `cap_bytes` are counted, not written; what is read back then ends with a
    note of how many were dropped and the output's last bytes (kept in memory anyway).
    """

    def __init__(self, cap_bytes: int) -> None:
        self.cap_bytes = cap_bytes
        self._descriptor = _private_temporary_file()
        self._closer = weakref.finalize(self, os.close, self._descriptor)
        self.stored_bytes = 0
        self.total_bytes = 0
        """Every byte written to the spool, stored or dropped."""
        self._full = False
        self._problem = ""
        self._tail = b""

    @property
    def dropped_bytes(self) -> int:
        return self.total_bytes - self.stored_bytes - len(self._tail)

    def write(self, data: bytes) -> None:
        self.total_bytes += len(data)
        if self._full:
            return
        part = data[: self.cap_bytes - self.stored_bytes]
        if len(part) < len(data):
            part = _without_partial_last_character(part)
            self._full = True
        try:
            _write_all(self._descriptor, part)
        except OSError as error:  # a full disk: keep what is stored, count the rest
            self._full, self._problem = True, f"; could not write more: {error.strerror}"
            return
        self.stored_bytes += len(part)

    def finish(self, tail: bytes) -> None:
        """Remember the output's last bytes, those of them past what is stored."""
        after_stored = self.total_bytes - self.stored_bytes
        if after_stored > 0:
            self._tail = _without_partial_first_character(tail[-after_stored:])

    def chunks(self) -> Iterator[bytes]:
        offset = 0
        while offset < self.stored_bytes:
            data = os.pread(self._descriptor, _SPOOL_READ_BYTES, offset)
            if not data:
                return
            yield data
            offset += len(data)
        if self.dropped_bytes:
            yield (
                f"\n… [{self.dropped_bytes} bytes dropped: the output passed the "
                f"{self.cap_bytes}-byte disk cap{self._problem}] …\n"
            ).encode()
        yield self._tail

    def close(self) -> None:
        self._closer()


def _private_temporary_file() -> int:
    """A read-write descriptor to a new 0600 file that has no name in any directory."""
    directory = tempfile.gettempdir()
    if hasattr(os, "O_TMPFILE"):
        with contextlib.suppress(OSError):  # not every filesystem supports O_TMPFILE
            return os.open(directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
    descriptor, name = tempfile.mkstemp(prefix="agent-tutorial-output-", dir=directory)
    Path(name).unlink()
    return descriptor


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


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

    def overflows(self, more_bytes: int) -> bool:
        return self.total_bytes + more_bytes > self._head_limit + self._tail_limit

    def everything(self) -> bytes:
        """All bytes added so far; only while nothing has been cut."""
        assert not self.truncated
        return bytes(self._head + self._tail)

    def tail_bytes(self) -> bytes:
        return bytes(self._tail)

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
