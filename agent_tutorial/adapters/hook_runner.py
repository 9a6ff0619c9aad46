"""The process side of command hooks (chapter 4): run the configured command with the
event on stdin, read what it prints within a time limit and a size cap, and leave no
process behind. What the exit code and the printed JSON mean is `core.hooks`' business.

A hook runs in the project root (never the folder the agent was started in, which may be
a downloaded `evil-1.0/` with a `hooks/guard.py` of its own), and only while the project
files its command names (`adapters.hook_scripts`) hold what they held when the session
started: one changed since, by a command or by anyone, is not run, and the hook fails
(a PreToolUse hook's call does not run, as for any failed hook).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

from agent_tutorial.adapters.escapees import Escapees
from agent_tutorial.adapters.hook_scripts import changed_scripts, script_digests, scripts_of
from agent_tutorial.adapters.processes import InterruptLatch, exited_by, signal_group
from agent_tutorial.core.hooks import (
    CommandHookConfig,
    CommandHookFactory,
    HookCallback,
    HookError,
    HookInput,
    HookOutcome,
    command_outcome,
)
from agent_tutorial.core.text import plain_json

MAX_HOOK_OUTPUT_BYTES = 1 << 20
"""Per stream: a hook that prints more on stdout or on stderr fails, so a chatty or
runaway hook costs at most this much memory."""
_CHUNK_BYTES = 64 * 1024
_EXIT_POLL_S = 0.05  # how often a hook whose pipes stay open is checked for having exited


@dataclass(frozen=True, slots=True)
class CommandHook:
    """A `HookCallback` that runs a shell command (see `core.hooks` for the protocol)."""

    config: CommandHookConfig
    workspace: Path
    project_root: Path | None = None
    """Where the command runs and its scripts are found; None: the workspace."""
    scripts: Mapping[str, str] | None = None
    """The digests of the command's scripts as trusted (`hook_scripts.hook_snapshot`);
    None: taken when the hook is made."""

    def __post_init__(self) -> None:
        if self.scripts is None:  # frozen: set once, here, before the hook can run
            found = scripts_of(self.root, [self.config.command])
            object.__setattr__(self, "scripts", script_digests(self.root, found))

    def __call__(self, hook_input: HookInput) -> HookOutcome:
        self._check_scripts()
        # plain_json: a workspace path that is not UTF-8 goes as `\\xe9` text, not a crash.
        stdout, stderr, status = self._run(orjson.dumps(plain_json(hook_input.to_json())))
        return command_outcome(self.name, status, stdout, stderr)

    @property
    def root(self) -> Path:
        return self.project_root or self.workspace

    def _check_scripts(self) -> None:
        changed = changed_scripts(self.root, self.config.command, self.scripts or {})
        if changed:
            raise HookError(
                f"{self.name} was not run: {', '.join(changed)} changed since the session "
                "started (check it, run `agent-tutorial trust`, then start the agent again)"
            )

    @property
    def name(self) -> str:
        return f"hook {self.config.command!r}"

    def _run(self, payload: bytes) -> tuple[bytes, bytes, int]:
        latch = InterruptLatch()  # Ctrl-C or SIGTERM inside Popen would lose the pid
        try:
            process = subprocess.Popen(
                ["bash", "-c", self.config.command],
                cwd=self.root,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, so everything it starts can go
                env={
                    **os.environ,
                    "AGENT_TUTORIAL_WORKSPACE": str(self.workspace),
                    "AGENT_TUTORIAL_PROJECT_ROOT": str(self.root),
                },
            )
        except OSError as error:
            latch.release()
            raise HookError(f"{self.name} could not start: {error}") from error
        except BaseException:
            latch.release()
            raise
        with process:
            escapees = Escapees(process.pid)
            try:
                latch.release()
                stdout, stderr = self._exchange(process, payload, escapees)
            finally:  # done, failed, timed out or interrupted: nothing it started stays
                signal_group(process.pid, signal.SIGKILL)
                process.wait()
                escapees.kill_and_reap()
        return stdout, stderr, process.returncode

    def _exchange(
        self, process: subprocess.Popen[bytes], payload: bytes, escapees: Escapees
    ) -> tuple[bytes, bytes]:
        """Write `payload` to the hook's stdin and read its stdout and stderr until both
        close, within `timeout_s` and `MAX_HOOK_OUTPUT_BYTES` per stream.

        A hook that exits but leaves a background child holding its pipes (`notify &`, a
        daemon) would otherwise keep the run waiting for the whole timeout; once the hook
        itself has exited, the rest of its process group and its escapees are killed, so
        the pipes close. Both pipes closed, the hook is waited for in turn: only its exit
        ends the exchange, so the caller's sweep never kills the hook itself.
        """
        assert process.stdin and process.stdout and process.stderr  # all three are PIPEs
        streams = _Streams(process.stdin, payload)
        output = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
        deadline = time.monotonic() + self.config.timeout_s
        with selectors.DefaultSelector() as selector:
            streams.register(selector, output)
            while selector.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timed_out()
                for key, _ in selector.select(min(remaining, _EXIT_POLL_S)):
                    streams.serve(selector, key.fd, output.get(key.fd))
                self._check_size(output[process.stdout.fileno()], "stdout")
                self._check_size(output[process.stderr.fileno()], "stderr")
                if process.poll() is not None:
                    signal_group(process.pid, signal.SIGKILL)
                    escapees.kill_and_reap()
        if not exited_by(process, deadline):
            raise self._timed_out()
        return bytes(output[process.stdout.fileno()]), bytes(output[process.stderr.fileno()])

    def _timed_out(self) -> HookError:
        return HookError(f"{self.name} timed out after {self.config.timeout_s:g} s and was killed")

    def _check_size(self, data: bytearray, stream: str) -> None:
        if len(data) > MAX_HOOK_OUTPUT_BYTES:
            raise HookError(
                f"{self.name} printed more than {MAX_HOOK_OUTPUT_BYTES:,} bytes on {stream} "
                "and was killed"
            )


class _Streams:
    """The hook's three pipes: stdin written once, without blocking; stdout and stderr read
    in chunks of at most `_CHUNK_BYTES` into their buffers."""

    def __init__(self, stdin: IO[bytes], payload: bytes) -> None:
        self._stdin = stdin
        self._pending = memoryview(payload)

    def register(self, selector: selectors.BaseSelector, output: dict[int, bytearray]) -> None:
        os.set_blocking(self._stdin.fileno(), False)
        selector.register(self._stdin, selectors.EVENT_WRITE)
        for fd in output:
            selector.register(fd, selectors.EVENT_READ)

    def serve(self, selector: selectors.BaseSelector, fd: int, into: bytearray | None) -> None:
        if into is None:
            self._write(selector)
            return
        chunk = os.read(fd, _CHUNK_BYTES)
        if chunk:
            into += chunk
        else:
            selector.unregister(fd)

    def _write(self, selector: selectors.BaseSelector) -> None:
        try:
            written = os.write(self._stdin.fileno(), self._pending[:_CHUNK_BYTES])
        except BlockingIOError:
            return
        except BrokenPipeError:  # the hook does not read its input; that is its choice
            written = len(self._pending)
        self._pending = self._pending[written:]
        if not self._pending:
            selector.unregister(self._stdin)
            self._stdin.close()  # end-of-file for the hook


def command_hook(config: CommandHookConfig, workspace: Path) -> HookCallback:
    """A hook that runs in `workspace`, its own project root."""
    return CommandHook(config, workspace)


def command_hooks_in(
    project_root: Path, snapshot: Mapping[str, Mapping[str, str]] | None = None
) -> CommandHookFactory:
    """Makes the hooks of a session whose project root is `project_root` (at or above the
    workspace): they run there, whatever folder the agent was started in, and only while
    their scripts match `snapshot` (`hook_scripts.hook_snapshot`, taken once per process,
    so a later session does not trust what a command wrote meanwhile; None: now)."""

    def make(config: CommandHookConfig, workspace: Path) -> HookCallback:
        trusted = None if snapshot is None else snapshot.get(config.command, {})
        return CommandHook(config, workspace, project_root, trusted)

    return make
