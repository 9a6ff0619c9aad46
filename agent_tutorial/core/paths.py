"""Pure rules about workspace paths: which real paths the tools may read and write.

The filesystem adapter finds where a path really leads (a `Location`); the rules here
decide what may be done there, so the permission policy and the tools agree and core
never touches the filesystem itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from agent_tutorial.core.errors import AgentTutorialError

STATE_DIR = ".agent_tutorial"
"""The agent's own folder in the workspace: settings, keys, sessions, history, artifacts."""
VCS_DIR = ".git"
STATE_READABLE = ("artifacts", "skills")
"""The only parts of the state folder tools may read: persisted results (chapter 8) and
skills (chapter 7). Settings, `.env`, sessions and history stay out of the conversation."""


class WorkspacePathError(AgentTutorialError):
    """A path the model gave resolves outside the workspace (or is not a path at all). A
    "tell the model" error: the tools turn it into a tool error, never a crash."""


class ProtectedPathError(WorkspacePathError):
    """A path inside the workspace that the tools may not read or write there."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a path really leads, found by the filesystem adapter."""

    relative: PurePosixPath
    """The real path, relative to the workspace root (`.` for the root itself)."""
    in_state_dir: PurePosixPath | None
    """The path inside the real state folder (`.` for the folder itself), or None when it
    is not in it. Decided by the folder's identity, so a symlink to it counts too."""
    in_vcs_dir: bool
    """Inside the workspace's real `.git`, or inside any folder named `.git`."""


class WorkspacePaths(Protocol):
    """Finds where a path the model gave really leads (the filesystem adapter)."""

    def locate(self, given: str) -> Location:
        """Raises `WorkspacePathError` for a path outside, `OSError` when it cannot look."""
        ...


def write_refusal(location: Location) -> str | None:
    """Why no tool may write at `location`, or None. Writes there would let the agent
    rewrite git hooks or its own configuration and hooks."""
    # casefold: on case-insensitive filesystems `.GIT/config` is `.git/config`.
    names = {part.casefold() for part in location.relative.parts}
    if location.in_vcs_dir or VCS_DIR in names:
        return f"{VCS_DIR}/"
    if location.in_state_dir is not None or STATE_DIR in names:
        return f"{STATE_DIR}/"
    return None


def read_refusal(location: Location) -> str | None:
    """Why no tool may read at `location`, or None: of the state folder, only
    `artifacts/` and `skills/` are open to the tools."""
    inner = location.in_state_dir
    if inner is None or (inner.parts and inner.parts[0] in STATE_READABLE):
        return None
    readable = " and ".join(f"{STATE_DIR}/{name}/" for name in STATE_READABLE)
    return (
        f"{STATE_DIR}/ holds the agent's own settings, keys and sessions; "
        f"tools may read only {readable} in it"
    )
