"""Project instructions: `AGENTS.md` (or, failing that, `CLAUDE.md`) in each folder from the
project root down to the directory the agent started in, as Codex gathers them, read once
into the project context (sent after the system prompt) as always-on knowledge (the deeper
file, more specific, comes later), next to chapter 7's on-demand skills. Each read is
bounded, follows no symlink out of the project and never blocks on a FIFO; together they
stay within one size cap, and a file cut to fit says so."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

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
class InstructionsFile:
    """One file as read: its path from the project root, its text (perhaps cut) and its
    whole size."""

    file_name: str
    text: str
    size: int
    truncated: bool

    def prompt_text(self) -> str:
        header = (
            f"Project instructions from {self.file_name} (written by the project's "
            "maintainers; follow them):"
        )
        return f"{header}\n\n{self.text.strip()}"


@dataclass(frozen=True, slots=True)
class ProjectInstructions:
    """The files read, root first, and why any other was left out."""

    files: tuple[InstructionsFile, ...] = ()
    problems: tuple[str, ...] = field(default=())
    """One line per file that exists but was not used (or was cut), for a warning."""

    @property
    def file_name(self) -> str:
        return ", ".join(found.file_name for found in self.files)

    @property
    def text(self) -> str:
        return "\n\n".join(found.text for found in self.files)

    @property
    def size(self) -> int:
        return sum(found.size for found in self.files)

    @property
    def truncated(self) -> bool:
        return any(found.truncated for found in self.files)

    def prompt_text(self) -> str:
        """The project context's section for these instructions: one part per file."""
        return "\n\n".join(found.prompt_text() for found in self.files)


class InstructionsError(AgentTutorialError):
    """An instructions file exists but cannot be used; the message says why, in one line."""


def read_project_instructions(
    workspace: Path, max_bytes: int, *, root: Path | None = None
) -> ProjectInstructions:
    """The first of `INSTRUCTION_FILES` in each folder from `root` (the project root; the
    workspace itself by default) down to `workspace`, within `max_bytes` together.

    A file that resolves outside the project, is not a regular file, cannot be read or is
    not UTF-8 text is left out, and `problems` says why.
    """
    root = (root or workspace).resolve()
    files: list[InstructionsFile] = []
    problems: list[str] = []
    budget = max_bytes
    for folder in _folders_down_to(root, workspace.resolve()):
        name = _instructions_name(root / folder)
        if name is None:
            continue
        shown = (folder / name).as_posix()
        if budget <= 0:
            problems.append(f"{shown} left out: the files above it fill {max_bytes:,} bytes")
            continue
        try:
            found = _read(root, shown, budget)
        except InstructionsError as error:
            problems.append(str(error))
            continue
        files.append(found)
        if found.truncated:
            problems.append(
                f"{shown} is {found.size:,} bytes; only its first {budget:,} are sent to the "
                "model (raise project_instructions_max_bytes to send more)"
            )
        budget -= len(found.text.encode())
    return ProjectInstructions(tuple(files), tuple(problems))


def _folders_down_to(root: Path, workspace: Path) -> list[PurePosixPath]:
    """The folders from the root (`.`) down to the workspace, as paths from the root."""
    if not workspace.is_relative_to(root):
        return [PurePosixPath()]
    parts = workspace.relative_to(root).parts
    return [PurePosixPath(*parts[:depth]) for depth in range(len(parts) + 1)]


def _instructions_name(folder: Path) -> str | None:
    for name in INSTRUCTION_FILES:
        path = folder / name
        if path.is_symlink() or path.exists():
            return name
    return None


def _read(root: Path, name: str, max_bytes: int) -> InstructionsFile:
    """Read through the file tools' descriptor walk from the project root, so a symlink
    that leads outside it, or into the state folder's files (`.agent_tutorial/.env`), is
    refused however it gets there."""
    try:
        with Workspace(root).target(name) as target:
            found = _regular_file_prefix(target, max_bytes + 1)
    except ProtectedPathError as error:
        raise InstructionsError(f"{name} ignored: {error}") from None
    except WorkspacePathError:
        raise InstructionsError(f"{name} ignored: it resolves outside the project") from None
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
    return InstructionsFile(
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
