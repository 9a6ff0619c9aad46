"""Project instructions: `AGENTS.md` at the workspace root (or, failing that, `CLAUDE.md`),
read once into the system prompt as always-on knowledge, next to chapter 7's on-demand
skills. The read is bounded, follows no symlink out of the workspace and never blocks on a
FIFO; a file too large is cut at a UTF-8 boundary and says so."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agent_tutorial.adapters.filesystem import (
    ProtectedPathError,
    Target,
    Workspace,
    WorkspacePathError,
    open_for_reading,
)
from agent_tutorial.core.errors import AgentTutorialError

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")  # AGENTS.md wins when both exist


@dataclass(frozen=True, slots=True)
class ProjectInstructions:
    """What was read: the file's name, its text (perhaps cut) and its whole size."""

    file_name: str
    text: str
    size: int
    truncated: bool

    def prompt_text(self) -> str:
        """The system prompt's section for these instructions."""
        header = (
            f"Project instructions from {self.file_name} (written by the project's "
            "maintainers; follow them):"
        )
        return f"{header}\n\n{self.text.strip()}"

    def truncation_note(self, max_bytes: int) -> str | None:
        if not self.truncated:
            return None
        return (
            f"{self.file_name} is {self.size:,} bytes; only its first {max_bytes:,} are in the "
            "system prompt (raise project_instructions_max_bytes to send more)"
        )


class InstructionsError(AgentTutorialError):
    """An instructions file exists but cannot be used; the message says why, in one line."""


def read_project_instructions(workspace: Path, max_bytes: int) -> ProjectInstructions | None:
    """The first of `INSTRUCTION_FILES` at the workspace root, or None when there is none.

    Raises `InstructionsError` for a file that resolves outside the workspace, is not a
    regular file, cannot be read or is not UTF-8 text.
    """
    for name in INSTRUCTION_FILES:
        path = workspace / name
        if path.is_symlink() or path.exists():
            return _read(workspace, name, max_bytes)
    return None


def _read(workspace: Path, name: str, max_bytes: int) -> ProjectInstructions:
    """Read through the file tools' descriptor walk, so a symlink that leads outside the
    workspace, or into the state folder's files (`.agent_tutorial/.env`), is refused however
    it gets there."""
    try:
        with Workspace(workspace).target(name) as target:
            found = _regular_file_prefix(target, max_bytes + 1)
    except ProtectedPathError as error:
        raise InstructionsError(f"{name} ignored: {error}") from None
    except WorkspacePathError:
        raise InstructionsError(f"{name} ignored: it resolves outside the workspace") from None
    except OSError as error:
        raise InstructionsError(f"{name} ignored: {error.strerror or error}") from None
    if found is None:
        raise InstructionsError(f"{name} ignored: not a regular file")
    size, data = found
    truncated = len(data) > max_bytes
    kept = data[:max_bytes]
    try:
        text = kept.decode("utf-8")
    except UnicodeDecodeError as error:
        if not (truncated and error.start >= len(kept) - 3):
            raise InstructionsError(f"{name} ignored: it is not UTF-8 text") from None
        text = kept[: error.start].decode("utf-8")  # the cut fell inside one character
    return ProjectInstructions(
        file_name=name,
        text=text.removeprefix("\ufeff"),
        size=max(size, len(data)),
        truncated=truncated,
    )


def _regular_file_prefix(target: Target, limit: int) -> tuple[int, bytes] | None:
    """(whole size, first `limit` bytes), or None for anything but a regular file; checked
    on the open descriptor, since a FIFO would block the read forever."""
    with os.fdopen(open_for_reading(target), "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            return None
        return status.st_size, file.read(limit)
