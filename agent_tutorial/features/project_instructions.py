"""Project instructions: `AGENTS.md` at the workspace root (or, failing that, `CLAUDE.md`),
read once into the system prompt as always-on knowledge, next to chapter 7's on-demand
skills. The read is bounded, follows no symlink out of the workspace and never blocks on a
FIFO; a file too large is cut at a UTF-8 boundary and says so."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agent_tutorial.adapters.filesystem import WorkspacePathError, resolve_workspace_path

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


class InstructionsError(Exception):
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
    try:
        real = resolve_workspace_path(workspace, name)
    except WorkspacePathError:
        raise InstructionsError(f"{name} ignored: it resolves outside the workspace") from None
    try:
        # O_NOFOLLOW: the real path has no symlink left; one swapped in since is refused.
        # O_NONBLOCK: a FIFO put there must not stall the start-up.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise InstructionsError(f"{name} ignored: {error.strerror or error}") from None
    with os.fdopen(fd, "rb") as file:
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise InstructionsError(f"{name} ignored: not a regular file")
        data = file.read(max_bytes + 1)
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
        size=max(status.st_size, len(data)),
        truncated=truncated,
    )
