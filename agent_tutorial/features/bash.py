"""The bash tool: one shell command in the workspace, confined by the sandbox when the
session has one, its output redacted as it arrives and cut to fit in memory, its whole
output spooled for chapter 8, and an environment without the secret-looking variables."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent_tutorial.adapters.git_watch import (
    GitMarkerWatch,
    SubmoduleLook,
    SubmoduleWatch,
    git_marker_watch,
)
from agent_tutorial.adapters.sandbox import SandboxUnavailableError, sandbox_denial_hint
from agent_tutorial.adapters.shell import (
    OUTPUT_DISK_CAP_BYTES,
    CommandResult,
    OutputSpool,
    run_command,
)
from agent_tutorial.core.sandbox import SandboxPolicy
from agent_tutorial.core.tools import (
    CommandOutcome,
    ToolDefinition,
    ToolResult,
    tool_error,
    tool_success,
)
from agent_tutorial.features.redaction import Redactor
from agent_tutorial.features.shell_environment import shell_environment

BASH_OUTPUT_CAP_BYTES = 30_000
"""Output kept in memory for one command: the first and the last 15,000 bytes."""
TAIL_LINES = 5
"""Lines of a command's output shown under its activity line."""
TAIL_LINE_CHARS = 500
"""Each is kept to this many characters; the terminal cuts it again to its width."""
TAIL_SCAN_CHARS = 8_000
"""Only the output's end is searched for those lines (a long one-line output stays cheap)."""


class BashInput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str = Field(min_length=1, description="The command line, run with `bash -c`.")
    timeout_s: int = Field(
        default=120,
        ge=1,
        le=600,
        description="Seconds before the command and everything it started are killed.",
    )


@dataclass(frozen=True, slots=True)
class BashSettings:
    """What commands see and what becomes of what they print."""

    include_env: frozenset[str] = frozenset()
    """Secret-looking variables commands may still see (`[shell_environment] include`)."""
    hidden_env: frozenset[str] = frozenset()
    """More variables commands must not see: the agent's API key, whatever its name."""
    redactor: Redactor | None = None
    """Masks secrets in the output as it arrives, before it is cut or spooled."""
    disk_cap_bytes: int = OUTPUT_DISK_CAP_BYTES
    """Whole output spooled to disk for chapter 8's artifacts (0: none)."""
    sandbox: SandboxPolicy | None = None
    """The operating system's sandbox every command runs in; None (or `off`): unconfined."""

    @property
    def confinement(self) -> SandboxPolicy | None:
        """The sandbox, if it confines at all."""
        return self.sandbox if self.sandbox is not None and self.sandbox.confined else None


def bash_tool(workspace: Path, settings: BashSettings | None = None) -> ToolDefinition:
    settings = settings or BashSettings()
    return ToolDefinition(
        name="bash",
        description=(
            "Run a shell command with bash in the workspace directory and return its combined "
            "stdout and stderr, its exit code and the output size. Stdin is empty, so "
            "interactive programs cannot prompt. Background processes are stopped when the "
            "command ends. Output over 30,000 bytes keeps its beginning and end. Prefer "
            "read_file, glob and grep for reading and searching files."
        ),
        input_model=BashInput,
        handler=partial(_run_bash, workspace, settings, *_watches(workspace, settings)),
        effect="execute",
        subject_field="command",
        sandbox=settings.confinement,
        unconfined=None
        if settings.confinement is None
        else partial(_run_bash, workspace, replace(settings, sandbox=None), None, None),
    )


def _watches(
    workspace: Path, settings: BashSettings
) -> tuple[GitMarkerWatch | None, SubmoduleWatch | None]:
    """What a sandboxed command could still change in a `.git` that the mounts cannot
    hold, where its workspace is writable: `.git` at the top as it was when the session's
    tool was made, and each submodule's, looked at before each command (the user may add
    a submodule meanwhile)."""
    sandbox = settings.confinement
    if sandbox is None or sandbox.mode != "workspace-write":
        return None, None
    return git_marker_watch(workspace), SubmoduleWatch(workspace)


def _run_bash(
    workspace: Path,
    settings: BashSettings,
    watch: GitMarkerWatch | None,
    submodules: SubmoduleWatch | None,
    arguments: BashInput,
) -> ToolResult:
    if "\0" in arguments.command:  # no program can receive one in its arguments
        return tool_error("invalid_command", "the command contains a NUL character")
    stream = settings.redactor.stream() if settings.redactor else None
    sandbox = settings.confinement
    watching = watch if watch is not None and watch.as_at_start() else None
    look = submodules.look() if submodules is not None else None
    try:
        result = run_command(
            arguments.command,
            cwd=workspace,
            timeout_s=arguments.timeout_s,
            output_cap_bytes=BASH_OUTPUT_CAP_BYTES,
            spool_cap_bytes=settings.disk_cap_bytes,
            output_filter=stream,
            env=shell_environment(
                os.environ, include=settings.include_env, hidden=settings.hidden_env
            ),
            sandbox=sandbox,
        )
    except SandboxUnavailableError as error:  # e.g. the workspace was removed meanwhile
        return tool_error("sandbox_unavailable", f"the command did not run: {error}")
    preface = (
        f"the command ran longer than {arguments.timeout_s} s and was killed with "
        "everything it started. Output so far:\n"
        if result.timed_out
        else ""
    )
    body = result.output or "(no output)"
    ending = ("" if body.endswith("\n") else "\n") + _status_line(result, sandbox)
    hint = _denial_hint(result, sandbox)
    ending += "" if hint is None else f"\n[sandbox] {hint}"
    ending += _undone(watching, submodules, look)
    content = preface + body + ending
    outcome = tool_error("timeout", content) if result.timed_out else tool_success(content)
    whole = result.whole_output
    return replace(
        outcome,
        redactions=stream.count if stream else 0,
        whole_output=None if whole is None else _framed(outcome.content, body, whole, ending),
        sandboxed=sandbox is not None,
        command=command_outcome(result, sandbox, denied=hint is not None),
    )


def _undone(
    watching: GitMarkerWatch | None, submodules: SubmoduleWatch | None, look: SubmoduleLook | None
) -> str:
    """Notes of what the agent undid after the command: a `.git` it made or replaced, which
    git run later outside the sandbox would obey."""
    notes = [watching.undo_change()] if watching is not None else []
    notes += submodules.undo_changes(look) if submodules is not None and look is not None else []
    return "".join(f"\n[sandbox] {note}" for note in notes if note is not None)


def command_outcome(
    result: CommandResult, sandbox: SandboxPolicy | None, *, denied: bool
) -> CommandOutcome:
    """How the command ended, in the shell's terms: a command killed by a signal exits
    with 128 + the signal, confined or not."""
    code = result.exit_code
    killed_by = _killing_signal(code, sandbox)
    if code is not None and code < 0:
        code = 128 - code
    return CommandOutcome(
        exit_code=code,
        signal=killed_by,
        sandbox_denied=denied,
        output_tail=output_tail(result.output),
    )


def _killing_signal(code: int | None, sandbox: SandboxPolicy | None) -> int | None:
    if code is None:
        return None
    if code < 0:
        return -code
    # bubblewrap reports a command killed by a signal as 128 + the signal, as bash does
    # for a killed child; a command could also exit with that code itself.
    if sandbox is not None and 128 < code < 128 + signal.NSIG:
        return code - 128
    return None


def output_tail(output: str) -> tuple[str, ...]:
    """The last `TAIL_LINES` lines of `output` that hold something, each at most
    `TAIL_LINE_CHARS` characters: what the activity line shows under a command."""
    lines = [line.rstrip() for line in output[-TAIL_SCAN_CHARS:].splitlines()]
    kept = [line[:TAIL_LINE_CHARS] for line in lines if line.strip()]
    return tuple(kept[-TAIL_LINES:])


def _status_line(result: CommandResult, sandbox: SandboxPolicy | None) -> str:
    code = result.exit_code
    killed_by = _killing_signal(code, sandbox)
    if code is None:
        status = "timed out"
    elif code < 0:
        status = f"killed by signal {-code}"
    elif killed_by is not None:
        status = f"exit code {code} = 128 + signal {signal_name(killed_by)}"
    else:
        status = f"exit code {code}"
    return f"[{status} · {result.total_bytes} bytes of output]"


def signal_name(number: int) -> str:
    """`9 (SIGKILL)`; a real-time signal, which has no name of its own, as its number."""
    try:
        return f"{number} ({signal.Signals(number).name})"
    except ValueError:  # a real-time signal has no name of its own
        return str(number)


def _denial_hint(result: CommandResult, sandbox: SandboxPolicy | None) -> str | None:
    """For a command that failed in the sandbox with a sign of one of its denials: what the
    user could loosen, so the model can ask (and a PostToolUse hook can see it)."""
    if sandbox is None or result.exit_code == 0 or result.timed_out:
        return None
    return sandbox_denial_hint(result.output, sandbox)


def _framed(content: str, body: str, spool: OutputSpool, ending: str) -> FramedOutput:
    """The whole text the content cuts short: what the tool says before the output (an
    error's explanation), the spooled output, and the status line after it."""
    before = content[: len(content) - len(body) - len(ending)]
    return FramedOutput(before.encode(), spool, ending.encode())


@dataclass(frozen=True, slots=True)
class FramedOutput:
    """A spool with the text the tool wraps around it (a `WholeOutput`)."""

    prefix: bytes
    body: OutputSpool
    suffix: bytes

    @property
    def total_bytes(self) -> int:
        return len(self.prefix) + self.body.total_bytes + len(self.suffix)

    def chunks(self) -> Iterator[bytes]:
        yield self.prefix
        yield from self.body.chunks()
        yield self.suffix

    def close(self) -> None:
        self.body.close()
