""".gitignore rules for glob and grep, applied as git applies them while walking down.

In a git repository (the workspace root holds `.git`), `.git/info/exclude`, the root
`.gitignore` and each nested `.gitignore` add a layer; the deepest layer with an opinion
on a path decides, as in git. Patterns are matched by `pathspec`, not by hand. Every file
is read through the walk's open directory descriptors, never by name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath

import pathspec

from agent_tutorial.adapters.filesystem import (
    DIRECTORY_FLAGS,
    Target,
    WalkFilter,
    Workspace,
    WorkspaceEntry,
    read_prefix,
    walk_below,
)
from agent_tutorial.core.paths import VCS_DIR

MAX_IGNORE_FILE_BYTES = 1024 * 1024
"""A larger ignore file is read only this far."""


@dataclass(frozen=True, slots=True)
class _Layer:
    base: PurePosixPath
    spec: pathspec.GitIgnoreSpec


@dataclass(frozen=True, slots=True)
class GitIgnore(WalkFilter):
    """The ignore layers in force for the directory being walked, shallowest first."""

    layers: tuple[_Layer, ...]

    def entering(self, directory: int, relative: PurePosixPath) -> GitIgnore:
        layer = _read_layer(directory, ".gitignore", relative)
        return self if layer is None else GitIgnore((*self.layers, layer))

    def excludes(self, relative: PurePosixPath, *, is_dir: bool) -> bool:
        for layer in reversed(self.layers):
            inside = relative.relative_to(layer.base).as_posix()
            decision = layer.spec.check_file(inside + "/" if is_dir else inside).include
            if decision is not None:
                return decision
        return False

    def excludes_text(self, relative: str, *, is_dir: bool) -> bool:
        """`excludes` for a `/`-separated relative path given as text: a checkpoint asks
        this of every file in the workspace, and building a path object for each doubled
        the time of a checkpoint of 10,000 files."""
        for layer in reversed(self.layers):
            base = layer.base.as_posix()
            inside = relative if base == "." else relative[len(base) + 1 :]
            decision = layer.spec.check_file(inside + "/" if is_dir else inside).include
            if decision is not None:
                return decision
        return False


def gitignore_for(workspace: Workspace, start: Target) -> GitIgnore | None:
    """The rules for a walk below `start`, or None when the workspace is not a git
    repository or `start` is itself ignored: a path named explicitly is always searched,
    with everything in it, as ripgrep does."""
    if start.relative.is_absolute():  # the state folder above the workspace: no repository
        return None
    with workspace.opened_root() as root:
        try:
            os.stat(VCS_DIR, dir_fd=root, follow_symlinks=False)
        except FileNotFoundError:
            return None
        rules = GitIgnore(tuple(_exclude_layer(root)))
        return _down_to(root, start.relative, rules)


def workspace_ignore_rules(root: int) -> GitIgnore:
    """The rules at the top of a whole-workspace walk (checkpoints): the repository's
    `info/exclude` when there is one; each directory's `.gitignore` is added on entering
    it, in a plain folder too, since a `.gitignore` there says the same thing."""
    return GitIgnore(tuple(_exclude_layer(root)))


def _down_to(root: int, relative: PurePosixPath, rules: GitIgnore) -> GitIgnore | None:
    """`rules` with the layers of every directory above `relative`, or None when one of
    the directories on the way (or `relative` itself) is ignored."""
    directory = os.dup(root)
    try:
        here = PurePosixPath()
        for name in relative.parts:
            rules = rules.entering(directory, here)
            here /= name
            if rules.excludes(here, is_dir=True):
                return None
            child = os.open(name, DIRECTORY_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = child
        return rules
    finally:
        os.close(directory)


def _exclude_layer(root: int) -> list[_Layer]:
    try:
        git = os.open(VCS_DIR, DIRECTORY_FLAGS, dir_fd=root)
    except OSError:  # a `.git` file (a worktree or submodule): no info/exclude here
        return []
    try:
        info = os.open("info", DIRECTORY_FLAGS, dir_fd=git)
    except OSError:
        return []
    finally:
        os.close(git)
    try:
        layer = _read_layer(info, "exclude", PurePosixPath())
    finally:
        os.close(info)
    return [] if layer is None else [layer]


def _read_layer(directory: int, name: str, base: PurePosixPath) -> _Layer | None:
    try:
        data = read_prefix(directory, name, MAX_IGNORE_FILE_BYTES)
    except OSError:  # unreadable: git would not apply it either
        return None
    if not data:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    return _Layer(base, pathspec.GitIgnoreSpec.from_lines(lines))


def search_walk(
    workspace: Workspace, start: Target, *, include_ignored: bool = False
) -> Iterator[WorkspaceEntry]:
    """The entries below `start` as glob and grep see them."""
    workspace = workspace.holding(start)
    rules = None if include_ignored else gitignore_for(workspace, start)
    yield from walk_below(workspace, start, rules)
