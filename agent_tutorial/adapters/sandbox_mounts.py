"""What a sandboxed command sees of the filesystem, decided by real paths and written as
bubblewrap mount arguments, in the order bubblewrap applies them (a later mount covers an
earlier one).

The whole system is visible read-only; the session's private temporary directory is `/tmp`;
the workspace is writable in `workspace-write` (and seen read-only in `read-only`, even
under `/tmp`); inside the workspace, what the agent or git would later obey (the
repository folder, and the `.git` of each submodule `git status` steps into) and the
policy's `protected` paths are read-only again; the secrets in the home directory are covered
with empty, read-only mounts. Every path is resolved first, so a symbolic link cannot lead
a rule to the wrong place, and a write that follows a link lands on the link's real target,
which is writable only if that target is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from agent_tutorial.adapters.sandbox_git import (
    Repository,
    enclosing_repository,
    real_path,
    repository_at,
    stepped_into,
    submodule_markers,
)
from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.sandbox import SandboxPolicy

SANDBOX_TMP = Path("/tmp")
"""Where a command finds the session's private temporary directory (`$TMPDIR` names it too):
what one command leaves there the next one finds, and the host's `/tmp` is out of sight."""
AGENT_STATE = ".agent_tutorial"
_DIRECTORY_MODE = 0o700


class SandboxPathError(AgentTutorialError):
    """A path the policy depends on cannot be used (missing, or the workspace is `/`)."""


def mount_arguments(policy: SandboxPolicy) -> list[str]:
    """bubblewrap's mount arguments for `policy` (not `off`).

    May create, outside the sandbox, the agent's own state folder when it belongs in the
    workspace itself, so that it has a place to be mounted read-only: a command cannot then
    create it itself.
    """
    workspace = _real_directory(policy.workspace, "workspace")
    private_tmp = _real_directory(policy.private_tmp, "private temporary directory")
    writable = policy.mode == "workspace-write"
    if writable and workspace == Path("/"):
        raise SandboxPathError("the workspace is /: there would be nothing left to confine")
    arguments = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    arguments += ["--bind", str(private_tmp), str(SANDBOX_TMP)]
    repository = repository_at(workspace) or enclosing_repository(workspace)
    if repository is not None and _under_tmp(repository.top) and repository.top != workspace:
        arguments += _bind(repository.top, read_only=True)  # seen again, so git finds it
    for path in _seen_again(policy.visible, workspace):
        arguments += _bind(path, read_only=True)
    # Bound even read-only: under /tmp the private one would hide it.
    arguments += _bind(workspace, read_only=not writable)
    state = policy.root.resolve() / AGENT_STATE
    if writable:
        for protected in _protected_in(workspace, state, policy.protected):
            arguments += _bind(protected, read_only=True)
    if repository is not None:
        for folder in _repository_folders(workspace, repository):
            arguments += _bind(folder, read_only=True)
        for folder in _submodule_folders(workspace, repository):
            arguments += _bind(folder, read_only=True)
    for secret in _secrets(policy, state):
        arguments += _cover(secret)
    return arguments


def _seen_again(paths: tuple[Path, ...], workspace: Path) -> Iterator[Path]:
    """Each of `paths` that exists and that the private /tmp would hide, by its real path;
    one inside the workspace is seen already."""
    for path in dict.fromkeys(path.resolve() for path in paths):
        if path.exists() and _under_tmp(path) and not path.is_relative_to(workspace):
            yield path


def _under_tmp(path: Path) -> bool:
    return path != SANDBOX_TMP and path.is_relative_to(SANDBOX_TMP)


def _repository_folders(workspace: Path, repository: Repository) -> Iterator[Path]:
    """What git obeys, read-only where it lies in the workspace (a mount point, so it cannot
    be renamed or replaced either) and seen again where it lies under /tmp. Never a folder
    holding the workspace: a `gitdir:` line naming one would make the workspace read-only."""
    for folder in repository.folders:
        if workspace.is_relative_to(folder):
            continue
        if folder.is_relative_to(workspace) or _under_tmp(folder):
            yield folder


def _submodule_folders(workspace: Path, repository: Repository) -> Iterator[Path]:
    """What git obeys in each submodule that `git status` at the top steps into, read-only
    as the repository's own is: a `.git` file re-pointed, or a `.git` folder's config, would
    run a command there. Not again what the repository's folders hold already (a submodule's
    git directory in `.git/modules/`)."""
    for marker in submodule_markers(repository):
        inner = repository_at(marker.parent) if stepped_into(marker.parent) else None
        for folder in () if inner is None else _repository_folders(workspace, inner):
            if not any(folder.is_relative_to(held) for held in repository.folders):
                yield folder


def _real_directory(path: Path, what: str) -> Path:
    real = path.resolve()
    if not real.is_dir():
        raise SandboxPathError(f"the {what} {str(path)!r} is not a directory")
    return real


def _bind(path: Path, *, read_only: bool) -> list[str]:
    return ["--ro-bind" if read_only else "--bind", str(path), str(path)]


def _cover(secret: Path) -> list[str]:
    """An empty read-only folder over a folder, an empty file (/dev/null) over anything else."""
    if secret.is_dir():
        return ["--tmpfs", str(secret), "--remount-ro", str(secret)]
    return ["--ro-bind", "/dev/null", str(secret)]


def _protected_in(workspace: Path, state: Path, protected: Iterable[Path]) -> Iterator[Path]:
    """The real paths inside the writable workspace that stay read-only: the agent's state
    folder (created if missing, when it belongs in the workspace: one at a project root
    above is outside, and read-only already) and the topmost folder holding each
    `protected` path."""
    if state.parent == workspace and not state.exists() and not state.is_symlink():
        state.mkdir(mode=_DIRECTORY_MODE)
    yield from _inside(workspace, [state])
    yield from _inside(workspace, _topmost(workspace, protected))


def _topmost(workspace: Path, paths: Iterable[Path]) -> Iterator[Path]:
    """For each real path below the workspace, its first component there: `hooks` for
    `hooks/guard.py`, `guard.py` itself for a file directly in the workspace."""
    for path in paths:
        real = real_path(path)
        if real is not None and real != workspace and real.is_relative_to(workspace):
            yield workspace / real.relative_to(workspace).parts[0]


def _inside(workspace: Path, paths: Iterable[Path]) -> Iterator[Path]:
    """The real targets of `paths` that lie in the workspace (elsewhere is read-only anyway)."""
    for path in paths:
        real = real_path(path)
        if real is not None and real.exists() and real.is_relative_to(workspace):
            yield real


def _secrets(policy: SandboxPolicy, state: Path) -> Iterator[Path]:
    """The real paths of the secrets that exist: the listed ones in the home directory, the
    policy's others, the state folder's `.env`, and its checkpoint store, which keeps copies
    of files the workspace no longer has. A missing one has nothing to read (see the limits
    in `adapters/sandbox.py` for a workspace holding the home)."""
    home = policy.home.resolve()
    candidates = [home / name for name in policy.hidden_home_paths]
    candidates += [*policy.also_hidden, state / ".env", state / "checkpoints"]
    seen: set[Path] = set()
    for candidate in candidates:
        real = real_path(candidate)
        if real is None or real in seen or not os.path.lexists(real):
            continue
        seen.add(real)
        yield real
