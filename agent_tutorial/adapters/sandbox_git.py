"""Where the repository a workspace belongs to keeps what git obeys, so that the sandbox can
make all of it read-only (Codex's design: the whole repository folder, not a list of the
files in it that matter today): its folder, its submodules' `.git`, the folder its
`core.hooksPath` names. What a mount cannot hold is undone after each command
(`git_watch`).

Git obeys more than hooks and config: `commondir`, `config.worktree`, `worktrees/`,
`modules/` and `objects/info/alternates` each re-point it, and a `.git` folder renamed away
and made anew replaces everything. A read-only bind mount of the whole folder covers them
all, and being a mount point it cannot be renamed or removed either (EBUSY).

Nothing here follows a `.git` symbolic link to write: the target is only read (to find it)
and mounted read-only.
"""

from __future__ import annotations

import os
import stat
import subprocess
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
    """`top/relative` if it is a relative path of plain names (it need not exist); the
    parts hold no `.` or empty name, which PurePosixPath leaves out."""
    parts = PurePosixPath(relative).parts
    if not parts or relative.startswith("/") or {"..", VCS_DIR} & set(parts):
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
    shared repository, whose config and hooks it obeys; None: it names none)."""
    return [git_dir, _pointed_to(git_dir / "commondir", git_dir, prefix="")]


def _pointed_to(pointer: Path, base: Path, prefix: str = "gitdir:") -> Path | None:
    """The real path a one-line pointer file names (relative to `base`), or None."""
    text = _small_regular_file(pointer)
    if text is None or not text.strip():
        return None
    line = text.splitlines()[0].strip()
    if not line.startswith(prefix):
        return None
    named = line.removeprefix(prefix).strip()
    return real_path(base / named) if named else None


def _small_regular_file(path: Path) -> str | None:
    """The start of `path` if it is a regular file, else None. Opened without waiting, so a
    FIFO a command left in the name cannot block the agent (and every later command)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        # Kept by its bytes, as a path's name is: a folder named in bytes that are not
        # UTF-8 is still found, and kept read-only.
        return file.read(_POINTER_BYTES).decode(errors="surrogateescape")


def _existing(paths: list[Path | None]) -> tuple[Path, ...]:
    unique = dict.fromkeys(path for path in paths if path is not None and path.exists())
    return tuple(unique)
