"""What a sandboxed command sees of the filesystem, decided by real paths and written as
bubblewrap mount arguments, in the order bubblewrap applies them (a later mount covers an
earlier one).

The whole system is visible read-only; the workspace (in `workspace-write`) and the
session's private temporary directory are writable; inside the workspace, what the agent or
git would later obey is read-only again; the secrets in the home directory are covered
with empty, read-only mounts. Every path is resolved first, so a symbolic link cannot lead
a rule to the wrong place, and a write that follows a link lands on the link's real target,
which is writable only if that target is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.sandbox import SandboxPolicy

PRIVATE_TMP_BYTES = 512 * 1024 * 1024
"""Size cap of the per-command `/tmp` (kept in memory); big temporary files belong in
`$TMPDIR`, the session's private directory on disk."""

AGENT_STATE = ".agent_tutorial"
GIT_OBEYED = ("hooks", "info", "config")
"""What git runs or obeys from a repository: hooks, the exclude and attributes files under
info/, and the config (fsmonitor, hooksPath, sshCommand, filters…). Git writes none of
them to commit."""
_DIRECTORY_MODE = 0o700


class SandboxPathError(AgentTutorialError):
    """A path the policy depends on cannot be used (missing, or the workspace is `/`)."""


def mount_arguments(policy: SandboxPolicy) -> list[str]:
    """bubblewrap's mount arguments for `policy` (not `off`).

    May create, outside the sandbox, the agent's own state folder (when it belongs in the
    workspace itself) and the hooks and info folders of an existing repository, so that
    each has a place to be mounted read-only: a command cannot then create them itself.
    """
    workspace = _real_directory(policy.workspace, "workspace")
    private_tmp = _real_directory(policy.private_tmp, "private temporary directory")
    writable = policy.mode == "workspace-write"
    if writable and workspace == Path("/"):
        raise SandboxPathError("the workspace is /: there would be nothing left to confine")
    arguments = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    arguments += ["--size", str(PRIVATE_TMP_BYTES), "--tmpfs", "/tmp"]
    if writable:
        arguments += _bind(workspace, read_only=False)
    arguments += _bind(private_tmp, read_only=False)
    state = policy.root.resolve() / AGENT_STATE
    if writable:
        for protected in _protected_in(workspace, state):
            arguments += _bind(protected, read_only=True)
    for secret in _secrets(policy, state):
        arguments += _cover(secret)
    return arguments


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


def _protected_in(workspace: Path, state: Path) -> Iterator[Path]:
    """The real paths inside the writable workspace that stay read-only: the agent's state
    folder (created if missing, when it belongs in the workspace: one at a project root
    above is outside, and read-only already) and what git obeys in the workspace's
    repository."""
    if state.parent == workspace and not state.exists() and not state.is_symlink():
        state.mkdir(mode=_DIRECTORY_MODE)
    yield from _inside(workspace, [state])
    yield from _inside(workspace, _git_obeyed(workspace / ".git"))


def _git_obeyed(git: Path) -> list[Path]:
    """`.git` itself when it is a file (its `gitdir:` line says which repository git
    obeys), else hooks, info and config, each created (empty) if missing."""
    if git.is_file():
        return [git]
    if not git.is_dir():
        return []  # no repository yet: see the limits in adapters/sandbox.py
    obeyed = [git / name for name in GIT_OBEYED]
    for path in obeyed:
        if not path.exists() and not path.is_symlink():
            if path.name == "config":
                path.touch(mode=0o644)  # an empty config is git's default one
            else:
                path.mkdir(mode=_DIRECTORY_MODE)
    return obeyed


def _inside(workspace: Path, paths: Iterable[Path]) -> Iterator[Path]:
    """The real targets of `paths` that lie in the workspace (elsewhere is read-only anyway)."""
    for path in paths:
        real = path.resolve()
        if real.exists() and real.is_relative_to(workspace):
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
        real = candidate.resolve()
        if real in seen or not os.path.lexists(real):
            continue
        seen.add(real)
        yield real
