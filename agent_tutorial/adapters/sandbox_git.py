"""Where the repository a workspace belongs to keeps what git obeys, so that the sandbox can
make all of it read-only (Codex's design: the whole repository folder, not a list of the
files in it that matter today), and what `.git` at the top of the workspace was when the
session began, so that the agent can undo a command that replaced or shadowed it.

Git obeys more than hooks and config: `commondir`, `config.worktree`, `worktrees/`,
`modules/` and `objects/info/alternates` each re-point it, and a `.git` folder renamed away
and made anew replaces everything. A read-only bind mount of the whole folder covers them
all, and being a mount point it cannot be renamed or removed either (EBUSY).

Nothing here follows a `.git` symbolic link to write: the target is only read (to find it)
and mounted read-only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from agent_tutorial.adapters.git_index import gitlinks
from agent_tutorial.core.paths import VCS_DIR

_POINTER_BYTES = 4096
"""A `.git` file or a `commondir` holds one short line; more is not git's."""
_GIT_PLACES = frozenset(
    {"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES"}
)
"""Variables that would make git read another repository than the one in its folder."""
_GIT_CONFIG_TIMEOUT_S = 10.0
_MAX_REPOSITORIES = 256
"""How many repositories (the top one and its submodules, nested) are read for submodules:
a bound on the work before each command, whatever a repository's index holds."""


@dataclass(frozen=True, slots=True)
class Repository:
    """A repository as git finds it from a folder: the `.git` there, and the real paths of
    everything git obeys through it."""

    marker: Path
    """The `.git` git finds (a folder, a `gitdir:` file, or a symbolic link), as named."""
    folders: tuple[Path, ...]
    """The real paths to keep read-only: the `.git` folder (or file), the git directory a
    `.git` file points to, and the common directory a linked worktree shares."""
    git_dir: Path | None = None
    """The real path of the git directory, which holds the index; None: there is none."""

    @property
    def top(self) -> Path:
        """The folder holding `.git`: the repository's working tree."""
        return self.marker.parent


def repository_at(folder: Path) -> Repository | None:
    """The repository whose `.git` is directly in `folder`, or None when there is none."""
    marker = folder / VCS_DIR
    try:
        info = os.lstat(marker)
    except OSError:
        return None
    if stat.S_ISREG(info.st_mode):
        git_dir = _pointed_to(marker, marker.parent)
        found = [real_path(marker)]
        if git_dir is not None:
            found += _with_common_dir(git_dir)
        return Repository(marker, _existing(found), git_dir)
    real = real_path(marker)
    if real is None or not real.is_dir():
        return Repository(marker, ())  # a dangling link, a loop, a FIFO: nothing git obeys
    return Repository(marker, _existing(_with_common_dir(real)), real)


def enclosing_repository(workspace: Path) -> Repository | None:
    """The nearest repository above `workspace` (not in it), as git run in the workspace would
    find it when the workspace has no `.git` of its own; the filesystem root is not looked at."""
    real = workspace.resolve()
    for folder in real.parents:
        if folder == Path(folder.anchor):
            break
        repository = repository_at(folder)
        if repository is not None:
            return repository
    return None


def submodule_markers(repository: Repository) -> tuple[Path, ...]:
    """The `.git` of every submodule `git status` at the repository's top would step into
    (and obey the configuration of): each path its index records as a gitlink, and in turn
    the submodules' own, whether that `.git` exists now or not, and even behind a symbolic
    link (git does not step past one, but a command can replace the link). A path leading
    out is left out; the submodules of one behind a link are not read."""
    found: list[Path] = []
    pending, seen = [repository], set[Path]()
    while pending and len(seen) < _MAX_REPOSITORIES:
        current = pending.pop()
        if current.git_dir is None or current.git_dir in seen:
            continue
        seen.add(current.git_dir)
        for link in gitlinks(current.git_dir):
            folder = _folder_below(current.top, link)
            if folder is None:
                continue
            found.append(folder / VCS_DIR)
            inner = repository_at(folder) if stepped_into(folder) else None
            if inner is not None:
                pending.append(inner)
    return tuple(found)


def _folder_below(top: Path, relative: str) -> Path | None:
    """`top/relative` if it is a relative path of plain names (it need not exist)."""
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or {".", "..", "", VCS_DIR} & set(parts):
        return None
    return top.joinpath(*parts)


def stepped_into(folder: Path) -> bool:
    """Whether git would step into the submodule at `folder` (a real path's child): not
    when a symbolic link is on the way, nor when it is one."""
    return real_path(folder) == folder


def git_hooks_folder(workspace: Path) -> Path | None:
    """The folder `core.hooksPath` names for the repository `workspace` belongs to (husky's
    `.husky/_`, a project's `.githooks`), as git run there would read it: the hooks the
    user's next `git commit` runs, which the sandbox keeps read-only where they lie in the
    workspace (`.git/hooks` is read-only with the repository). None: no repository, no
    such setting, or no git to ask (the user's git would then not run them either)."""
    real = workspace.resolve()
    repository = repository_at(real) or enclosing_repository(real)
    if repository is None:
        return None
    # Where the repository is is said by the folder git runs in, not by what the agent's
    # own environment may name; git reads the configuration, it runs nothing.
    environment = {name: value for name, value in os.environ.items() if name not in _GIT_PLACES}
    try:
        found = subprocess.run(
            ["git", "config", "--get", "core.hooksPath"],
            cwd=repository.top,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_GIT_CONFIG_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    named = found.stdout.decode(errors="surrogateescape").strip()
    if found.returncode != 0 or not named:
        return None
    return real_path(repository.top / Path(named).expanduser())


def real_path(path: Path) -> Path | None:
    """`path` with every symbolic link resolved, or None when the links loop: there is no
    real path to decide by (a command can leave such a loop behind)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # a loop: RuntimeError before Python 3.13, then OSError
        return None


def _with_common_dir(git_dir: Path) -> list[Path | None]:
    """`git_dir`, and the common directory its `commondir` file names (a linked worktree's
    shared repository, whose config and hooks it obeys)."""
    common = _pointed_to(git_dir / "commondir", git_dir, prefix="")
    return [git_dir] if common is None else [git_dir, common]


def _pointed_to(pointer: Path, base: Path, prefix: str = "gitdir:") -> Path | None:
    """The real path a one-line pointer file names (relative to `base`), or None."""
    text = _small_regular_file(pointer)
    line = text.splitlines()[0].strip() if text.strip() else ""
    if not line.startswith(prefix):
        return None
    named = line.removeprefix(prefix).strip()
    return real_path(base / named) if named else None


def _small_regular_file(path: Path) -> str:
    """The start of `path` if it is a regular file, else "". Opened without waiting, so a
    FIFO a command left in the name cannot block the agent (and every later command)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return ""
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return ""
        return file.read(_POINTER_BYTES).decode(errors="replace")


def _existing(paths: list[Path | None]) -> tuple[Path, ...]:
    unique = dict.fromkeys(path for path in paths if path is not None and path.exists())
    return tuple(unique)


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
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
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
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)
        _open_up(name, parent)
        shutil.rmtree(name, dir_fd=parent)


def _is_real_folder(name: str, parent: int) -> bool:
    return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)


def _open_up(name: str, parent: int) -> None:
    """Give each real folder under `name` (never a link's target) its owner's rights back,
    which rmtree needs to empty it; fwalk opens a folder only after yielding its parent."""
    for _folder, subfolders, _files, folder_fd in os.fwalk(name, dir_fd=parent):
        for subfolder in subfolders:
            with contextlib.suppress(OSError):
                if _is_real_folder(subfolder, folder_fd):
                    os.chmod(subfolder, stat.S_IRWXU, dir_fd=folder_fd)
