"""The filesystem as the tools see it: paths confined to the real workspace, atomic writes,
a binary-file test, and a workspace walk that skips tool directories and never follows
symlinks out."""

from __future__ import annotations

import os
import re
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

BINARY_SNIFF_BYTES = 8 * 1024
"""A NUL byte this early in a file marks it as binary."""

SKIPPED_DIRECTORIES = frozenset(
    {
        ".git",
        ".venv",
        "node_modules",
        ".agent_tutorial",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Directories a workspace walk does not enter: version control, environments, caches."""


class WorkspacePathError(ValueError):
    """A path the model gave resolves outside the workspace (or is not a path at all)."""


def resolve_workspace_path(workspace: Path, path: str) -> Path:
    """Return the real path of `path` (relative to the workspace, or absolute) if it lies
    inside the real workspace.

    Symlinks are followed and `..` collapsed, for paths that do not exist yet too (the
    nearest existing parent is resolved). The error names only the path as given, never
    where it leads.
    """
    root = workspace.resolve()
    try:
        real = Path(os.path.realpath(root / path))
    except ValueError:  # an embedded NUL byte
        raise WorkspacePathError(f"{path!r} is not a valid path") from None
    if real != root and not real.is_relative_to(root):
        raise WorkspacePathError(
            f"{path!r} is outside the workspace {root}; only paths inside it can be used"
        )
    return real


def workspace_relative(workspace: Path, real: Path) -> str:
    """How a resolved path is shown to the model: relative to the workspace, `/`-separated."""
    return real.relative_to(workspace.resolve()).as_posix()


def write_text_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` in UTF-8 so that readers see the old file or the new one,
    never a mix.

    The bytes go to a temporary file in the same directory, are fsynced, and the temporary
    file is renamed over `path`. On any failure the temporary file is removed and `path`
    is left untouched. An existing file keeps its permission bits.
    """
    mode = _existing_mode(path)
    # Cut in bytes: with the padding, a long name in a multibyte script would otherwise
    # pass the 255-byte limit on names that `path` itself respects.
    stem = os.fsdecode(os.fsencode(path.name)[:200])
    temporary = path.with_name(f".{stem}.{secrets.token_hex(6)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _existing_mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def is_binary(data: bytes) -> bool:
    """True for data with a NUL byte in its first 8 KiB or that is not valid UTF-8."""
    if data.find(b"\0", 0, BINARY_SNIFF_BYTES) != -1:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


@dataclass(frozen=True, slots=True)
class WorkspaceEntry:
    """One path found by `walk_workspace`; `path` is the entry itself, not its target."""

    path: Path
    is_dir: bool
    is_symlink: bool


def walk_workspace(workspace: Path, start: Path) -> Iterator[WorkspaceEntry]:
    """Every entry below `start`, depth first in name order.

    Skipped directories are neither listed nor entered, symlinks are never entered, and a
    symlink whose target lies outside the workspace (or is missing) is left out.
    """
    yield from _walk(workspace.resolve(), start)


def _walk(root: Path, directory: Path) -> Iterator[WorkspaceEntry]:
    try:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=attrgetter("name"))
    except OSError:  # unreadable or vanished: there is nothing we may list
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.is_symlink():
            if _target_inside(root, path):
                yield WorkspaceEntry(path, is_dir=entry.is_dir(), is_symlink=True)
        elif entry.is_dir():
            if entry.name not in SKIPPED_DIRECTORIES:
                yield WorkspaceEntry(path, is_dir=True, is_symlink=False)
                yield from _walk(root, path)
        else:
            yield WorkspaceEntry(path, is_dir=False, is_symlink=False)


def _target_inside(root: Path, link: Path) -> bool:
    target = Path(os.path.realpath(link))
    return target.exists() and target.is_relative_to(root)


def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a glob over `/`-separated relative paths: `*` and `?` stay within one
    directory, `**` crosses directories (`**/` also matches none), `[abc]`, `[!abc]` and
    `{py,pyi}` work as in a shell. Raises `ValueError` for a pattern with no regex form,
    such as the reversed range in `[z-a]`."""
    try:
        return re.compile(_glob_to_regex(pattern), re.DOTALL)
    except re.error as error:
        raise ValueError(f"{pattern!r} is not a valid glob: {error}") from None


def _glob_to_regex(pattern: str) -> str:
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        step = 1
        if pattern.startswith("**/", index):
            parts.append("(?:.*/)?")
            step = 3
        elif pattern.startswith("**", index):
            parts.append(".*")
            step = 2
        elif char == "*":
            parts.append("[^/]*")
        elif char == "?":
            parts.append("[^/]")
        elif char == "[" and (end := pattern.find("]", index + 2)) != -1:
            parts.append(_character_class(pattern[index + 1 : end]))
            step = end + 1 - index
        elif char == "{" and (end := pattern.find("}", index)) != -1:
            options = pattern[index + 1 : end].split(",")
            parts.append("(?:" + "|".join(_glob_to_regex(option) for option in options) + ")")
            step = end + 1 - index
        else:
            parts.append(re.escape(char))
        index += step
    return "".join(parts)


def _character_class(body: str) -> str:
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    # Escape everything but range dashes so the class cannot turn into regex syntax.
    escaped = "".join(char if char == "-" else re.escape(char) for char in body)
    return f"[{'^/' if negate else ''}{escaped}]"
