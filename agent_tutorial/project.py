"""Which project a command works in, found from wherever it starts, as Codex finds one.

The project root is the nearest folder, from the starting directory up, that holds
`.agent_tutorial/` or `.git`; its `.agent_tutorial/` is the state folder (config, `.env`,
sessions, artifacts, history) for every subdirectory. The search stops at the first `.git`
(a repository is a project even without a state folder of its own), never looks at the
home directory or the filesystem root, and passes over a `.agent_tutorial/` that belongs
to another user (on a shared machine, anyone may create `/tmp/.agent_tutorial`). Without
a marker the starting directory is the root.

The tools' boundary stays the starting directory, as in Claude Code and Codex: a project
root found above it widens what the agent reads its settings from, never what it touches.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agent_tutorial.core.paths import STATE_DIR, VCS_DIR


@dataclass(frozen=True, slots=True)
class Project:
    """Where a command runs: the project root, the directory it started in (the tools'
    boundary) and, from the root, the state folder."""

    root: Path
    """The real path of the project root, whose `.agent_tutorial/` the command uses."""
    workspace: Path
    """The real path of the starting directory: the tools' boundary, at or below `root`."""

    @classmethod
    def at(cls, folder: Path) -> Project:
        """The project that is `folder` alone: its own root and tools' boundary (whatever
        lies above it; `find_project` is the search)."""
        real = folder.resolve()
        return cls(real, real)

    @property
    def state_dir(self) -> Path:
        """The state folder: `.agent_tutorial/` at the root."""
        return self.root / STATE_DIR

    @property
    def state_dir_outside_workspace(self) -> Path | None:
        """The state folder when it lies above the tools' boundary (then the read tools
        reach its `artifacts/` and `skills/` by absolute path), else None."""
        return None if self.root == self.workspace else self.state_dir


def find_project(start: Path, home: Path | None = None) -> Project:
    """The project `start` lies in; `home` defaults to the user's home directory."""
    workspace = start.resolve()
    stops = {Path(workspace.anchor), _home() if home is None else home.resolve()}
    for directory in (workspace, *workspace.parents):
        if directory in stops:
            break
        if _holds_own_state_dir(directory) or _exists(directory / VCS_DIR):
            return Project(directory, workspace)
    return Project(workspace, workspace)


def _home() -> Path:
    try:
        return Path.home().resolve()
    except RuntimeError:  # no HOME and no password entry: only the filesystem root stops
        return Path(Path.cwd().anchor)


def _holds_own_state_dir(directory: Path) -> bool:
    """A `.agent_tutorial` (a real folder, or a symlink that loading then refuses by name)
    owned by the user running the agent."""
    try:
        info = os.lstat(directory / STATE_DIR)
    except OSError:
        return False
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        return False
    return info.st_uid == os.geteuid()


def _exists(path: Path) -> bool:
    """A `.git` folder, or the `.git` file of a worktree or submodule."""
    try:
        os.lstat(path)
    except OSError:
        return False
    return True
