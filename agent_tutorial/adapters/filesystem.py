"""The filesystem as the tools see it, reached through open directory descriptors.

A path is walked one component at a time from a descriptor of the real workspace, each
directory opened with `O_NOFOLLOW`, and symlinks are resolved here by hand: every hop is
read with `readlink` relative to the directory it sits in and must stay inside. Tools then
read and write through what the walk opened, never through a name walked again, so a
directory swapped for a symlink mid-call makes the open fail instead of leading outside.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections import deque
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path, PurePosixPath
from typing import Protocol

from agent_tutorial.core.paths import (
    STATE_DIR,
    STATE_READABLE,
    VCS_DIR,
    Location,
    ProtectedPathError,
    WorkspacePathError,
    read_refusal,
    write_refusal,
)
from agent_tutorial.core.text import name_from_shown

__all__ = ["ProtectedPathError", "WorkspacePathError"]  # re-exported for the tools

BINARY_SNIFF_BYTES = 8 * 1024
"""A NUL byte this early in a file marks it as binary."""
MAX_SYMLINK_HOPS = 40
"""Symlinks followed for one path before it counts as a loop (the kernel's own limit)."""
MAX_WALK_DEPTH = 256
"""Directory levels a walk enters below its start; deeper ones are listed, not entered."""

SKIPPED_DIRECTORIES = frozenset(
    {
        VCS_DIR,
        ".venv",
        "node_modules",
        STATE_DIR,
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)
"""Directories a workspace walk does not enter: version control, environments, caches."""

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a directory is opened below another: never through a symlink."""
# O_NONBLOCK: opening a named pipe must not wait forever for a writer.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

FileId = tuple[int, int]
"""(st_dev, st_ino): what a file or directory is, whatever name reaches it."""


def _file_id(info: os.stat_result) -> FileId:
    return (info.st_dev, info.st_ino)


@dataclass(frozen=True, slots=True)
class Target:
    """Where a path leads, held open: `directory` is a descriptor of the deepest existing
    real directory on the way, `missing` the directories still to create below it, and
    `name` the final entry (None for the workspace root itself)."""

    directory: int
    missing: tuple[str, ...]
    name: str | None
    info: os.stat_result | None
    """The final entry as it was found (never a symlink), or None when it does not exist."""
    relative: PurePosixPath
    chain: tuple[FileId, ...]
    """The real directories from the workspace root down to the target, itself included."""

    @property
    def exists(self) -> bool:
        return self.info is not None


class Workspace:
    """The workspace directory; every operation opens it afresh by descriptor.

    `state_dir` is the project's state folder when it may lie above the workspace (the
    project root is a parent, `project.find_project`): then an absolute path into it is
    walked from the folder itself, where the tools read its `artifacts/` and `skills/` and
    nothing else, as they do in a state folder inside the workspace.
    """

    shown_prefix = PurePosixPath()
    """What a found path is shown under: nothing, so paths read workspace-relative."""

    def __init__(
        self, root: Path, *, state_dir: Path | None = None, protected: Sequence[Path] = ()
    ) -> None:
        self.given = root.absolute()
        self.root = root.resolve()
        self.outer_state: Workspace | None = None
        if state_dir is not None and not state_dir.resolve().is_relative_to(self.root):
            self.outer_state = _OuterStateFolder(state_dir)
        self.protected = _ProtectedFiles.of(self.root, protected)
        """Files no tool may write (hook scripts), by real path and by identity, and the
        folders holding them."""

    def locate(self, given: str) -> Location:
        walked = self._walked_from(given)
        with ExitStack() as stack:
            root = stack.enter_context(walked.opened_root())
            target = stack.enter_context(walked.resolve(root, given))
            return walked.location(root, target)

    @contextmanager
    def target(self, given: str, *, for_writing: bool = False) -> Iterator[Target]:
        """Resolve `given` and hold it open; refuses what the tools may not touch there."""
        walked = self._walked_from(given)
        with walked.opened_root() as root, walked.resolve(root, given) as target:
            location = walked.location(root, target)
            refusal = write_refusal(location) if for_writing else read_refusal(location)
            if refusal is not None:
                verb = "write into" if for_writing else "read"
                raise ProtectedPathError(f"tools may not {verb} {given!r}: {refusal}")
            protected = self.protected.refusal(self.root / target.relative, target)
            if for_writing and protected is not None:
                raise ProtectedPathError(
                    f"tools may not write {given!r}: {protected} that runs outside the "
                    "sandbox; only the user changes it"
                )
            yield target

    def outside_error(self, given: str) -> WorkspacePathError:
        return WorkspacePathError(
            f"{given!r} is outside the workspace {self.root}; only paths inside it can be used"
        )

    def holding(self, target: Target) -> Workspace:
        """The workspace a target was found in: the outer state folder's for a path shown
        absolute, so a walk below it starts from there."""
        if self.outer_state is not None and target.relative.is_absolute():
            return self.outer_state
        return self

    def _walked_from(self, given: str) -> Workspace:
        """Where `given` is walked from: the outer state folder for an absolute path that
        leads into it and not into the workspace, else the workspace."""
        if self.outer_state is None or not given.startswith("/"):
            return self
        path = name_from_shown(given)
        if self.inside_parts(path) is None and self.outer_state.inside_parts(path) is not None:
            return self.outer_state
        return self

    @contextmanager
    def opened_root(self) -> Iterator[int]:
        descriptor = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            yield descriptor
        finally:
            os.close(descriptor)

    @contextmanager
    def resolve(self, root: int, given: str) -> Iterator[Target]:
        """Walk to `given`, written as tools show names: `\\xe9` stands for a byte that is
        not UTF-8 (`name_from_shown`)."""
        if "\0" in given:
            raise WorkspacePathError(f"{given!r} is not a valid path")
        walk = _Walk(root, given, self)  # its errors quote the path as the model wrote it
        try:
            parts = self.inside_parts(name_from_shown(given))
            if parts is None:
                raise walk.outside()
            yield walk.run(parts)
        finally:
            walk.close()

    def inside_parts(self, path: str) -> list[str] | None:
        """The components of `path` below the workspace root, or None if it leads elsewhere.
        An absolute path may name the root as given, as its real path, or through links."""
        if not path.startswith("/"):
            return path.split("/")
        pure = PurePosixPath(path)
        for root in (self.root, self.given):
            if pure.is_relative_to(root):
                return list(pure.relative_to(root).parts)
        real = Path(os.path.realpath(path))
        if real.is_relative_to(self.root):
            return list(real.relative_to(self.root).parts)
        return None

    def location(self, root: int, target: Target) -> Location:
        ids = target.chain
        state = self.identity(root, STATE_DIR)
        vcs = self.identity(root, VCS_DIR)
        in_state = None
        if state in ids:
            in_state = PurePosixPath(*target.relative.parts[ids.index(state) :])
        return Location(target.relative, in_state, vcs is not None and vcs in ids)

    def identity(self, root: int, name: str) -> FileId | None:
        """The identity of the directory `name` at the root leads to, if it is inside."""
        try:
            with self.resolve(root, name) as found:
                if found.info is None or not stat.S_ISDIR(found.info.st_mode):
                    return None
                return _file_id(found.info)
        except (WorkspacePathError, OSError):
            return None


@dataclass(frozen=True, slots=True)
class _ProtectedFiles:
    """Files the tools may not write, known by their real paths and by what they were when
    the session began (a hard link or a bind mount reaches the same file by another name),
    and the folders whose every file is refused with them."""

    paths: frozenset[Path]
    identities: frozenset[FileId]
    folders: Mapping[FileId, str]
    """The topmost folder below the workspace holding each file, by name, as the sandbox
    keeps it read-only (`SandboxPolicy.protected`): what lies beside a hook script runs
    with it, as `hooks/json.py` does, found before the standard library's by
    `python3 hooks/guard.py`."""

    @classmethod
    def of(cls, root: Path, files: Sequence[Path]) -> _ProtectedFiles:
        identities, folders = set(), {}
        for path in files:
            with suppress(OSError):
                identities.add(_file_id(path.stat()))
            parts = _parts_below(root, path.resolve())
            if len(parts) > 1 or (parts and path.is_dir()):
                with suppress(OSError):
                    folders[_file_id((root / parts[0]).stat())] = parts[0]
        paths = frozenset(path.resolve() for path in files)
        return cls(paths, frozenset(identities), folders)

    def refusal(self, real_path: Path, target: Target) -> str | None:
        """Why a tool may not write `target` (at `real_path`), or None."""
        info = target.info
        if real_path in self.paths or (info is not None and _file_id(info) in self.identities):
            return "it is a hook script"
        folder = next((self.folders[held] for held in target.chain if held in self.folders), None)
        return None if folder is None else f"it lies in {folder}/, which holds a hook"


def _parts_below(root: Path, real: Path) -> tuple[str, ...]:
    return real.relative_to(root).parts if real.is_relative_to(root) else ()


class _OuterStateFolder(Workspace):
    """The project's state folder above the workspace, walked from itself: its paths are
    shown absolute (as the tools take them), every one of them counts as inside the state
    folder, so `read_refusal` opens only `artifacts/` and `skills/`, and nothing is
    writable. A symlink in it that leads out of it leads nowhere."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.shown_prefix = PurePosixPath(self.root)

    @contextmanager
    def opened_root(self) -> Iterator[int]:
        # O_NOFOLLOW: a state folder swapped for a symlink since start-up is not followed.
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(self.root, flags)
        try:
            yield descriptor
        finally:
            os.close(descriptor)

    def outside_error(self, given: str) -> WorkspacePathError:
        return WorkspacePathError(
            f"{given!r} leads out of {self.root}; of it, tools may read only "
            f"{' and '.join(name + '/' for name in STATE_READABLE)}"
        )

    def location(self, root: int, target: Target) -> Location:
        inside = target.relative.relative_to(self.shown_prefix)
        return Location(target.relative, inside, in_vcs_dir=False)


class _Walk:
    """One path's walk from the root: a stack of open real directories."""

    def __init__(self, root: int, given: str, workspace: Workspace) -> None:
        self.given = given
        self.workspace = workspace
        root_info = os.fstat(root)
        self.stack: list[tuple[int, str, FileId]] = [(os.dup(root), "", _file_id(root_info))]

    def close(self) -> None:
        for descriptor, _, _ in self.stack:
            os.close(descriptor)
        self.stack.clear()

    def run(self, parts: list[str]) -> Target:
        pending = deque(_names(parts))
        missing: list[str] = []
        hops = 0
        while pending:
            part = pending.popleft()
            if part == "..":
                self._up(missing)
                continue
            if missing:
                missing.append(part)
                continue
            info = self._lstat(part)
            if info is None:
                missing.append(part)
            elif stat.S_ISLNK(info.st_mode):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise OSError(errno.ELOOP, "too many levels of symbolic links", self.given)
                pending.extendleft(reversed(self._link_parts(part)))
            elif not pending:
                return self._target(part, info, missing)
            else:
                self._enter(part, info)
        return self._target(None, None, missing)

    def _up(self, missing: list[str]) -> None:
        if missing:
            missing.pop()
        elif len(self.stack) == 1:
            raise self.outside()
        else:
            os.close(self.stack.pop()[0])

    def _lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=self.stack[-1][0], follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _link_parts(self, name: str) -> list[str]:
        link = os.readlink(name, dir_fd=self.stack[-1][0])
        if not link.startswith("/"):
            return _names(link.split("/"))
        parts = self.workspace.inside_parts(link)
        if parts is None:
            raise self.outside()
        while len(self.stack) > 1:  # an absolute link starts again from the root
            os.close(self.stack.pop()[0])
        return _names(parts)

    def _enter(self, name: str, info: os.stat_result) -> None:
        if not stat.S_ISDIR(info.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "a parent of it is not a directory", self.given)
        # Swapped for a symlink since the lstat: O_NOFOLLOW makes this fail, not follow.
        descriptor = os.open(name, DIRECTORY_FLAGS, dir_fd=self.stack[-1][0])
        self.stack.append((descriptor, name, _file_id(os.fstat(descriptor))))

    def _target(self, name: str | None, info: os.stat_result | None, missing: list[str]) -> Target:
        names = [entry_name for _, entry_name, _ in self.stack[1:]]
        chain = tuple(identity for _, _, identity in self.stack)
        if missing:
            name, missing = missing[-1], missing[:-1]
        elif name is None and len(self.stack) > 1:  # the path ends at a directory we entered
            descriptor, name, _ = self.stack.pop()
            info = os.fstat(descriptor)
            os.close(descriptor)
            names.pop()
        elif name is None:  # the workspace root itself
            info = os.fstat(self.stack[0][0])
        if info is not None and name is not None:
            chain += (_file_id(info),) if stat.S_ISDIR(info.st_mode) else ()
        shown_under = self.workspace.shown_prefix
        relative = shown_under.joinpath(*names, *missing, *([name] if name else []))
        directory = self.stack[-1][0]
        return Target(directory, tuple(missing), name, info, relative, chain)

    def outside(self) -> WorkspacePathError:
        return self.workspace.outside_error(self.given)


def _names(parts: list[str]) -> list[str]:
    return [part for part in parts if part not in ("", ".")]


def resolve_workspace_path(workspace: Path, path: str) -> Path:
    """The real path of `path` (relative to the workspace, or absolute) if it lies inside
    the real workspace; symlinks are followed and `..` collapsed, for paths that do not
    exist yet too. The error names only the path as given, never where it leads."""
    return workspace.resolve() / Workspace(workspace).locate(path).relative


# Reading and writing what a walk found


def open_for_reading(target: Target) -> int:
    """A read-only descriptor of the target (file or directory), opened in its directory
    without following a symlink; the caller checks what it is with `fstat`."""
    if target.name is None:
        return os.open(".", _READ_FLAGS, dir_fd=target.directory)
    if not target.exists:
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", target.name)
    return os.open(target.name, _READ_FLAGS, dir_fd=target.directory)


def read_prefix(directory: int, name: str, limit: int) -> bytes | None:
    """Up to `limit` bytes of the regular file `name` in `directory`, or None when it is
    missing or not a regular file (a symlink, a pipe)."""
    try:
        descriptor = os.open(name, _READ_FLAGS, dir_fd=directory)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:  # a symlink
            return None
        raise
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        return handle.read(limit)


def replace_file(target: Target, data: bytes) -> None:
    """Put `data` at the target so that readers see the old file or the new one, never a
    mix: missing directories are created, the bytes go to a temporary file in the same
    opened directory, are fsynced, and the temporary file is renamed over the name. On
    any failure the temporary file is removed and the old file is untouched.

    An existing file keeps its permission bits, and its owner when we run as root. Other
    hard links to it keep the old content: writing through them in place would not be
    atomic, and a link could lead to a file outside the workspace.
    """
    if target.name is None:
        raise IsADirectoryError(errno.EISDIR, "is a directory", ".")
    with _parent_directory(target) as directory:
        # Cut in bytes: with the padding, a long name in a multibyte script would otherwise
        # pass the 255-byte limit on names that the target itself respects.
        stem = os.fsdecode(os.fsencode(target.name)[:200])
        temporary = f".{stem}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        descriptor = os.open(temporary, flags, 0o666, dir_fd=directory)
        try:
            with os.fdopen(descriptor, "wb") as handle:
                _keep_mode_and_owner(handle.fileno(), target.info)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(temporary, target.name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=directory)
            raise
        with suppress(OSError):  # make the rename itself durable where the system allows
            os.fsync(directory)


def _keep_mode_and_owner(descriptor: int, existing: os.stat_result | None) -> None:
    if existing is None:
        return
    os.fchmod(descriptor, stat.S_IMODE(existing.st_mode))
    if os.geteuid() == 0:  # root's new file would otherwise take a user's file from them
        os.fchown(descriptor, existing.st_uid, existing.st_gid)


@contextmanager
def _parent_directory(target: Target) -> Iterator[int]:
    """The opened directory the target's name goes in, creating missing ones one at a time
    (each opened with O_NOFOLLOW, so a symlink planted meanwhile fails the write)."""
    if not target.missing:
        yield target.directory
        return
    with ExitStack() as opened:
        directory = target.directory
        for name in target.missing:
            with suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=directory)
            directory = os.open(name, DIRECTORY_FLAGS, dir_fd=directory)
            opened.callback(os.close, directory)
        yield directory


def is_binary(data: bytes) -> bool:
    """True for data with a NUL byte in its first 8 KiB or that is not valid UTF-8."""
    if data.find(b"\0", 0, BINARY_SNIFF_BYTES) != -1:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# Walking


@dataclass(frozen=True, slots=True)
class WorkspaceEntry:
    """One entry found by `Workspace.walk`. `directory` is an open descriptor of the
    directory that holds it, valid only until the walk moves on."""

    relative: PurePosixPath
    directory: int
    is_dir: bool
    is_symlink: bool

    @property
    def name(self) -> str:
        return self.relative.name


class WalkFilter(Protocol):
    """Leaves entries out of a walk (`.gitignore` rules); learns each directory entered."""

    def entering(self, directory: int, relative: PurePosixPath) -> WalkFilter: ...

    def excludes(self, relative: PurePosixPath, *, is_dir: bool) -> bool: ...


def walk_below(
    workspace: Workspace, start: Target, walk_filter: WalkFilter | None = None
) -> Iterator[WorkspaceEntry]:
    """Every entry below the directory `start`, depth first in name order.

    Skipped directories (by name, and the state folder and `.git` by identity, whatever
    they are called) are neither listed nor entered. Symlinks are never entered, and are
    listed only when they lead to something inside that the tools may read.
    """
    with ExitStack() as stack:
        root = stack.enter_context(workspace.opened_root())
        skipped = {
            identity
            for name in (STATE_DIR, VCS_DIR)
            if (identity := workspace.identity(root, name)) is not None
        }
        top = open_for_reading(start)
        stack.callback(os.close, top)
        if not stat.S_ISDIR(os.fstat(top).st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", start.name)
        walk = _DirectoryWalk(workspace, root, skipped)
        yield from walk.below(top, start.relative, walk_filter)


@dataclass(slots=True)
class _Level:
    """One open directory on the walk's way down, and the entries in it still to visit."""

    directory: int
    relative: PurePosixPath
    entries: Iterator[os.DirEntry[str]]
    walk_filter: WalkFilter | None


@dataclass(frozen=True, slots=True)
class _DirectoryWalk:
    workspace: Workspace
    root: int
    skipped: set[FileId]

    def below(
        self, top: int, relative: PurePosixPath, walk_filter: WalkFilter | None
    ) -> Iterator[WorkspaceEntry]:
        """A loop over a stack of open directories rather than recursion, so a tree nested
        thousands deep cannot exhaust Python's stack; below `MAX_WALK_DEPTH` levels
        directories are listed but not entered (each level holds a descriptor)."""
        levels = [self._level(top, relative, walk_filter)]
        try:
            while levels:
                level = levels[-1]
                entry = next(level.entries, None)
                if entry is None:
                    done = levels.pop()
                    if levels:  # the top directory belongs to the caller
                        os.close(done.directory)
                    continue
                child = yield from self._visit(level, entry)
                if child is not None and len(levels) <= MAX_WALK_DEPTH:
                    levels.append(
                        self._level(child, level.relative / entry.name, level.walk_filter)
                    )
                elif child is not None:
                    os.close(child)
        finally:
            for level in levels[1:]:
                os.close(level.directory)

    def _level(
        self, directory: int, relative: PurePosixPath, walk_filter: WalkFilter | None
    ) -> _Level:
        try:
            with os.scandir(directory) as scan:
                entries = sorted(scan, key=attrgetter("name"))
        except OSError:  # unreadable or vanished: there is nothing we may list
            entries = []
        if walk_filter is not None:
            walk_filter = walk_filter.entering(directory, relative)
        return _Level(directory, relative, iter(entries), walk_filter)

    def _visit(
        self, level: _Level, entry: os.DirEntry[str]
    ) -> Generator[WorkspaceEntry, None, int | None]:
        """Yield what `entry` shows; return an open descriptor when it is a directory to
        enter."""
        path = level.relative / entry.name
        is_dir = entry.is_dir(follow_symlinks=False)
        if level.walk_filter is not None and level.walk_filter.excludes(path, is_dir=is_dir):
            return None
        if entry.is_symlink():
            leads_to_directory = self._readable_link(path)
            if leads_to_directory is not None:
                yield WorkspaceEntry(path, level.directory, leads_to_directory, is_symlink=True)
            return None
        if not is_dir:
            yield WorkspaceEntry(path, level.directory, is_dir=False, is_symlink=False)
            return None
        if entry.name in SKIPPED_DIRECTORIES:
            return None
        try:
            child = os.open(entry.name, DIRECTORY_FLAGS, dir_fd=level.directory)
        except OSError:  # swapped for a symlink, unreadable or gone: not ours to enter
            return None
        if _file_id(os.fstat(child)) in self.skipped:
            os.close(child)
            return None
        try:
            yield WorkspaceEntry(path, level.directory, is_dir=True, is_symlink=False)
        except BaseException:  # the caller stopped walking (GeneratorExit) while we held it
            os.close(child)
            raise
        return child

    def _readable_link(self, path: PurePosixPath) -> bool | None:
        """Whether the link leads to a directory; None when it leads nowhere we may read."""
        try:
            with self.workspace.resolve(self.root, path.as_posix()) as target:
                location = self.workspace.location(self.root, target)
                if target.info is None or read_refusal(location) is not None:
                    return None
                return stat.S_ISDIR(target.info.st_mode)
        except (WorkspacePathError, OSError):
            return None


def open_entry(entry: WorkspaceEntry) -> int:
    """A read-only descriptor of a walked entry, opened without following a symlink."""
    return os.open(entry.name, _READ_FLAGS, dir_fd=entry.directory)


# Globs


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
