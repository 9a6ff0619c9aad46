"""What a sandboxed command can still change in a `.git` though the sandbox mounts what git
obeys read-only, undone by the agent right after the command: a `.git` symbolic link (the
kernel mounts on no link), a `.git` made at the top of a workspace inside a repository (it
would shadow the repository), and a submodule's `.git` made anew (where it had none, or
after the folder holding the read-only one was moved away). Every entry is reached and
removed without following a link: the agent never deletes through one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_tutorial.adapters.sandbox_git import (
    enclosing_repository,
    repository_at,
    submodule_markers,
)
from agent_tutorial.core.paths import VCS_DIR


@dataclass(frozen=True, slots=True)
class GitMarkerWatch:
    """What `.git` at the top of the workspace was when the session began, where a command
    can change it though the sandbox protects the repository: a symbolic link (the kernel
    cannot mount on a link, so the link itself can be replaced), or no `.git` at all in a
    workspace inside a repository (a new one would shadow the repository for git run here
    later). Around each command: `as_at_start` before, and if it was, `undo_change` after.
    A change made between commands (by the user, outside) is theirs and left alone."""

    marker: Path
    """`.git` at the top of the workspace."""
    link_text: str | None
    """What the link said, when `.git` was a symbolic link; None: there was no `.git`."""
    repository_top: Path | None = None
    """The repository the workspace lies in, when it had no `.git` of its own."""

    def as_at_start(self) -> bool:
        if self.link_text is None:
            return not os.path.lexists(self.marker)
        try:
            return str(self.marker.readlink()) == self.link_text
        except OSError:  # gone, or no longer a link
            return False

    def undo_change(self) -> str | None:
        """After a command that began with `.git` as at the start: None when it still is,
        else a note of what was undone (or why it could not be)."""
        if self.as_at_start():
            return None
        if self.link_text is not None:
            return self._restore_link(self.link_text)
        return self._remove_shadow()

    def _restore_link(self, link_text: str) -> str:
        try:
            _remove(self.marker)
            self.marker.symlink_to(link_text)
        except OSError as error:
            return f"the command replaced the .git link, and it could not be put back: {error}"
        return (
            "the command replaced the .git link (to "
            f"{link_text}); the agent removed what replaced it and put the link back"
        )

    def _remove_shadow(self) -> str:
        try:
            _remove(self.marker)
        except OSError as error:
            return (
                f"the command made a .git here, which shadows the repository at "
                f"{self.repository_top}, and it could not be removed: {error}; remove it "
                "before running git here"
            )
        return (
            "the command made a .git here, which would shadow the repository at "
            f"{self.repository_top} for git run here later; the agent removed it"
        )


def git_marker_watch(workspace: Path) -> GitMarkerWatch | None:
    """The watch `workspace` needs, or None: a `.git` folder or file is a mount point in the
    sandbox already, and a workspace outside any repository has nothing to shadow."""
    marker = workspace / VCS_DIR
    try:
        link_text = str(marker.readlink())
    except FileNotFoundError:
        repository = enclosing_repository(workspace)
        if repository is None:
            return None
        return GitMarkerWatch(marker, None, repository.top)
    except OSError:  # EINVAL: a folder or a file, which the sandbox mounts read-only
        return None
    return GitMarkerWatch(marker, link_text)


_Entry = tuple[int, int, int]
"""A directory entry's device, inode and type: what it is, whatever name it has."""


_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_PINNED_FOLDER_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class SubmoduleLook:
    """Each submodule's `.git` in the workspace as it was right before one command."""

    top: Path
    """The repository's top, from which each `.git` is reached without following a link."""
    before: Mapping[Path, _Entry | None]
    """Each `.git` as it was (None: absent, or behind a link git does not follow)."""


class SubmoduleWatch:
    """What the read-only mounts of the submodules' `.git` (`submodule_markers`) cannot stop,
    undone after each command of a session: a `.git` made where a submodule has none (git
    would step into it), or one put in place of another after the folder holding the
    read-only one was renamed away (`mv libs l && mkdir -p libs/sub && git init libs/sub`).
    A `.git` seen before any command of the session (one the user made, or the submodule's
    own moved back) is left alone: only what a command made is removed."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace.resolve()
        self._seen: dict[Path, set[_Entry | None]] = {}

    def look(self) -> SubmoduleLook | None:
        """Before a command: each submodule's `.git` in the workspace now (None: none)."""
        repository = repository_at(self.workspace) or enclosing_repository(self.workspace)
        if repository is None:
            return None
        markers = submodule_markers(repository)
        inside = [marker for marker in markers if marker.is_relative_to(self.workspace)]
        before = {marker: _entry(repository.top, marker) for marker in inside}
        for marker, entry in before.items():
            self._seen.setdefault(marker, set()).add(entry)
        return SubmoduleLook(repository.top, before) if before else None

    def undo_changes(self, look: SubmoduleLook) -> list[str]:
        """After the command: a note for each `.git` it made, which is removed."""
        notes = []
        for marker in look.before:
            now = _entry(look.top, marker)
            if now is not None and now not in self._seen[marker]:
                notes.append(_remove_submodule_git(look.top, marker))
        return notes


def _remove_submodule_git(top: Path, marker: Path) -> str:
    shown = marker.relative_to(top)
    parent = _folder_descriptor(top, marker.parent)
    try:
        if parent is None:
            raise FileNotFoundError(marker.parent)
        _remove_at(parent, VCS_DIR)
    except OSError as error:
        return (
            f"the command made {shown}, which git run at {top} would obey as a submodule's "
            f"repository, and it could not be removed: {error}; remove it before running "
            "git there"
        )
    finally:
        if parent is not None:
            os.close(parent)
    return (
        f"the command made {shown}, which git run at {top} would obey as a submodule's "
        "repository; the agent removed it"
    )


def _entry(top: Path, path: Path) -> _Entry | None:
    """What `path` below `top` is, reached without following a link (None: nothing there,
    or a link on the way, past which git does not look either)."""
    parent = _folder_descriptor(top, path.parent)
    if parent is None:
        return None
    try:
        info = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(parent)
    return (info.st_dev, info.st_ino, stat.S_IFMT(info.st_mode))


def _folder_descriptor(top: Path, folder: Path) -> int | None:
    """`folder` (at or below `top`) opened one name at a time, never through a link."""
    try:
        descriptor = os.open(top, _FOLDER_FLAGS)
    except OSError:
        return None
    for name in folder.relative_to(top).parts:
        try:
            below = os.open(name, _FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=descriptor)
        except OSError:
            below = None
        os.close(descriptor)
        if below is None:
            return None
        descriptor = below
    return descriptor


def _remove(path: Path) -> None:
    """Remove `path` without following it (see `_remove_at`)."""
    parent = os.open(path.parent, _FOLDER_FLAGS)
    try:
        _remove_at(parent, path.name)
    finally:
        os.close(parent)


def _remove_at(parent: int, name: str) -> None:
    """Remove `name` in the folder `parent` without following it: a link or file is
    unlinked, a folder removed with everything in it, even folders a command left without
    permissions for their owner."""
    with contextlib.suppress(FileNotFoundError):
        if not _is_real_folder(name, parent):
            os.unlink(name, dir_fd=parent)
            return
        _give_owner_rights(name, parent)
        _open_up(name, parent)
        shutil.rmtree(name, dir_fd=parent)


def _is_real_folder(name: str, parent: int) -> bool:
    return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)


def _open_up(name: str, parent: int) -> None:
    """Give each real folder under `name` (never a link's target) its owner's rights back,
    which rmtree needs to empty it; fwalk opens a folder only after yielding its parent."""
    for _folder, subfolders, _files, folder_fd in os.fwalk(name, dir_fd=parent):
        for subfolder in subfolders:
            with contextlib.suppress(OSError):  # a link (ENOTDIR), or not ours (EPERM)
                _give_owner_rights(subfolder, folder_fd)


def _give_owner_rights(name: str, parent: int) -> None:
    """`chmod 700` the folder `name` in `parent`, never through a link: chmod follows one,
    and what the agent saw as a folder may be a link by now (a confined MCP server shares
    the workspace). The folder is pinned by a descriptor opened without following a link,
    which refuses a link (ENOTDIR), and changed through it: `/proc/self/fd`, since an
    `O_PATH` descriptor, the one kind a folder without rights gives its owner, cannot be
    passed to fchmod."""
    pinned = os.open(name, _PINNED_FOLDER_FLAGS, dir_fd=parent)
    try:
        Path(f"/proc/self/fd/{pinned}").chmod(stat.S_IRWXU)
    finally:
        os.close(pinned)
