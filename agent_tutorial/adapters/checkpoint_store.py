"""The checkpoint store: content-addressed snapshots of a workspace's files, kept in the
state folder (`.agent_tutorial/checkpoints/`), and the writes that put a file back.

A snapshot is a manifest (path → kind, mode, digest) of the files `.gitignore` does not
exclude; `.git/` and `.agent_tutorial/` are never entered, and only regular files and
symlinks are recorded (a socket, FIFO or device is skipped without being opened). Objects
(file contents, and one tree per folder, as git's) are zlib-compressed and named by the
SHA-256 of what they hold, so a file or folder that did not change is stored once however
many snapshots name it. Of the user's own `.git` only `info/exclude` is read; nothing in it
is written.

Files are read and written through descriptors: each directory is opened below its parent
with `O_NOFOLLOW`, so a directory swapped for a symlink makes the open fail rather than
lead outside the workspace.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, NamedTuple

import orjson

from agent_tutorial.adapters.gitignore import GitIgnore, workspace_ignore_rules
from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.paths import STATE_DIR, VCS_DIR

STORE_DIR = "checkpoints"
"""The store's folder inside the state folder."""
NEVER_RECORDED = frozenset({VCS_DIR, STATE_DIR})
"""Directory names a snapshot never enters, at any depth."""
CACHE_SETTLED_NS = 2_000_000_000
"""A file's digest is cached by its stat only once its times are this much older than the
snapshot: a write in the same clock tick as the snapshot would otherwise go unseen."""
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the walk looked must not block the open.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MODE_BITS = 0o7777
_OBJECT_NAME = re.compile("[0-9a-f]{64}")

Kind = Literal["file", "link"]


class CheckpointStoreError(AgentTutorialError):
    """The store cannot be read or written, or a file cannot be put back."""


class Entry(NamedTuple):
    """One recorded path: a regular file (its permission bits) or a symlink. A named tuple,
    not a frozen dataclass: a snapshot makes one per file, and 10,000 frozen dataclasses
    cost 10 ms a turn."""

    kind: Kind
    mode: int
    """Permission bits of a file; 0 for a symlink."""
    digest: str
    """SHA-256 of the file's bytes, or of the symlink's target."""


Manifest = Mapping[str, Entry]
"""Workspace-relative POSIX path → what was there."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    manifest: Manifest
    digest: str
    """The root tree's object name ("" for a scan that stored nothing)."""
    too_large: tuple[str, ...] = ()
    """Files left out for being over the size limit."""


@dataclass(slots=True)
class _Scan:
    """What one walk collects."""

    entries: dict[str, Entry] = field(default_factory=dict)
    too_large: list[str] = field(default_factory=list)
    cache: dict[str, list[int | str]] = field(default_factory=dict)


class CheckpointStore:
    """One project's store. Every method that writes holds the store's lock."""

    def __init__(
        self, directory: Path, *, max_file_bytes: int, settled_ns: int = CACHE_SETTLED_NS
    ) -> None:
        self.directory = directory
        self.max_file_bytes = max_file_bytes
        self.settled_ns = settled_ns
        """How old a file's times must be before the stat cache trusts them."""
        self._in_use: int | None = None
        self._written: list[Path] = []
        """Objects the snapshot in progress stored, made durable before it returns."""
        self._cache_generation = b""
        self._cache: dict[str, list[int | str]] | None = None

    @classmethod
    def in_state_folder(cls, project_root: Path, *, max_file_bytes: int) -> CheckpointStore:
        return cls(project_root / STATE_DIR / STORE_DIR, max_file_bytes=max_file_bytes)

    # Snapshots

    def snapshot(self, workspace: Path) -> Snapshot:
        """Record the workspace's files now; returns the manifest and its object name."""
        with self._locked():
            self._written = []
            scan = self._scan(workspace, store_objects=True)
            digest = self._put_trees(scan.entries)
            _make_durable(self._written)
            self._save_cache(scan.cache)
        return Snapshot(scan.entries, digest, tuple(scan.too_large))

    def scan(self, workspace: Path, *, max_file_bytes: int) -> Snapshot:
        """The workspace's files as a snapshot with this size limit would record them,
        storing nothing."""
        limited = CheckpointStore(
            self.directory, max_file_bytes=max_file_bytes, settled_ns=self.settled_ns
        )
        scan = limited._scan(workspace, store_objects=False)
        return Snapshot(scan.entries, "", tuple(scan.too_large))

    def manifest(self, digest: str) -> Manifest:
        return self._read_trees(digest)[0]

    def _put_trees(self, entries: Mapping[str, Entry]) -> str:
        """Store the manifest as one tree object per folder, deepest first, as git does: a
        snapshot that changed one file stores only the trees on that file's path (a flat
        manifest of 10,000 files cost half a megabyte a turn). Returns the root's name."""
        files: dict[str, list[list[object]]] = {"": []}
        for path, entry in entries.items():
            folder, _, name = path.rpartition("/")
            rows = files.get(folder)
            if rows is None:  # a folder first seen: its parents too, up to one known
                rows = files[folder] = []
                while folder and (folder := folder.rpartition("/")[0]) not in files:
                    files[folder] = []
            rows.append([name, entry.kind, entry.mode, entry.digest])
        folders: dict[str, list[list[object]]] = {folder: [] for folder in files}
        for folder in sorted(files, key=lambda name: name.count("/") + bool(name), reverse=True):
            tree = {"files": sorted(files[folder]), "folders": sorted(folders[folder])}
            digest = self._put(_json(tree))
            if folder:
                parent, _, name = folder.rpartition("/")
                folders[parent].append([name, digest])
            else:
                return digest
        raise AssertionError("the root folder is always stored last")

    def _read_trees(self, root: str) -> tuple[dict[str, Entry], list[str]]:
        """The manifest a root tree names, and the names of every tree in it."""
        entries: dict[str, Entry] = {}
        trees: list[str] = []
        pending = [("", root)]
        while pending:
            prefix, digest = pending.pop()
            trees.append(digest)
            try:
                tree = _loads(self.read_object(digest))
                for name, kind, mode, file_digest in tree["files"]:
                    entry_kind: Kind = "link" if kind == "link" else "file"
                    entries[prefix + _part(name)] = Entry(entry_kind, int(mode), str(file_digest))
                pending += [(f"{prefix}{_part(name)}/", str(sub)) for name, sub in tree["folders"]]
            except (KeyError, TypeError, ValueError):
                raise CheckpointStoreError(f"checkpoint tree {digest[:12]} is damaged") from None
        return entries, trees

    def _scan(self, workspace: Path, *, store_objects: bool) -> _Scan:
        cache = self._load_cache()
        scan = _Scan()
        settled_before = time.time_ns() - self.settled_ns
        try:
            root = os.open(workspace, _DIRECTORY_FLAGS)
        except OSError as error:
            raise CheckpointStoreError(f"cannot open the workspace {workspace}: {error}") from None
        try:
            rules = workspace_ignore_rules(root)
            fingerprint = _root_fingerprint(root, settled_before)
            for found in _walk(root, rules, fingerprint, settled_before):
                info, path = found.info, found.path
                if info.st_size > self.max_file_bytes and stat.S_ISREG(info.st_mode):
                    scan.too_large.append(path)
                    continue
                cached = cache.get(path)
                if cached is not None and _vouches(cached, found):
                    scan.cache[path] = cached
                    scan.entries[path] = _entry(info.st_mode, str(cached[-1]))
                else:
                    self._scan_changed(scan, found, settled_before, store_objects=store_objects)
        finally:
            os.close(root)
        return scan

    def _scan_changed(
        self, scan: _Scan, found: _Found, settled_before: int, *, store_objects: bool
    ) -> None:
        """A file the stat cache does not vouch for: asked of the ignore rules, read (and
        stored when asked), and cached once its times have settled."""
        info, path, fingerprint = found.info, found.path, found.level.fingerprint
        if found.level.rules.excludes_text(path, is_dir=False):
            return
        digest = self._read_entry(found, store_objects=store_objects)
        if digest is None:
            return
        if max(info.st_mtime_ns, info.st_ctime_ns) < settled_before and fingerprint:
            scan.cache[path] = [*_cache_key(found), digest]
        scan.entries[path] = _entry(info.st_mode, digest)

    def _read_entry(self, found: _Found, *, store_objects: bool) -> str | None:
        """The digest of a file's bytes or a link's target (stored when asked); None for
        one that vanished or turned into something else since the walk saw it."""
        data: bytes | None
        directory, name = found.level.directory, found.name
        try:
            if stat.S_ISLNK(found.info.st_mode):
                data = os.fsencode(os.readlink(name, dir_fd=directory))
            else:
                data = _read_regular_file(directory, name, self.max_file_bytes)
        except OSError:
            return None
        if data is None:
            return None
        return self._put(data) if store_objects else _digest(data)

    # Objects

    def read_object(self, digest: str) -> bytes:
        """An object's bytes, checked against its name."""
        try:
            data = zlib.decompress(self._object_path(digest).read_bytes())
        except (OSError, zlib.error) as error:
            message = f"checkpoint object {digest[:12]} unreadable: {error}"
            raise CheckpointStoreError(message) from None
        if _digest(data) != digest:
            raise CheckpointStoreError(f"checkpoint object {digest[:12]} is damaged")
        return data

    def _put(self, data: bytes) -> str:
        digest = _digest(data)
        if not self._has(digest):
            target = self._object_path(digest)
            try:
                target.parent.mkdir(mode=0o700, parents=True)
            except FileExistsError:
                pass
            else:  # a new folder's name in objects/ must reach the disk with its object
                self._written.append(target.parent)
            _publish(target, zlib.compress(data, 1))
            self._written.append(target)
        return digest

    def _has(self, digest: str) -> bool:
        return self._object_path(digest).is_file()

    def _object_path(self, digest: str) -> Path:
        if not _OBJECT_NAME.fullmatch(digest):
            raise CheckpointStoreError(f"not an object name: {digest!r}")
        return self.directory / "objects" / digest[:2] / digest[2:]

    # Records: one JSON line per event of a session (a checkpoint, an undo)

    def append_record(self, session_id: str, record: Mapping[str, object]) -> None:
        path = self._records_path(session_id)
        with self._locked():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, _json(record) + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)

    def records(self, session_id: str) -> list[dict[str, object]]:
        path = self._records_path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as error:
            raise CheckpointStoreError(f"cannot read {path}: {error}") from None
        records: list[dict[str, object]] = []
        for line in data.splitlines():
            with suppress(ValueError):  # a torn last line: the write never finished
                record = _loads(line)
                if isinstance(record, dict):
                    records.append(record)
        return records

    def sessions(self) -> list[str]:
        """Ids of the sessions that have records."""
        folder = self.directory / "sessions"
        try:
            return sorted(path.stem for path in folder.glob("*.jsonl"))
        except OSError:
            return []

    def forget(self, session_ids: Sequence[str]) -> None:
        """Remove these sessions' records, then every object no remaining record names."""
        if not self.directory.is_dir():
            return
        with self._locked():
            for session_id in session_ids:
                with suppress(FileNotFoundError):
                    self._records_path(session_id).unlink()
            self._collect_garbage()

    def size_bytes(self) -> int:
        total = 0
        for folder, _, names in os.walk(self.directory):
            for name in names:
                with suppress(OSError):
                    total += (Path(folder) / name).lstat().st_size
        return total

    def _collect_garbage(self) -> None:
        """Remove the objects no record names, unless an agent is running in the project:
        its stat cache and its turn's first snapshot may name objects no record names
        yet. They are collected by a later prune."""
        if not self._nobody_in_use():
            return
        kept: set[str] = set()
        for session_id in self.sessions():
            for record in self.records(session_id):
                for side in ("before", "after"):
                    digest = record.get(side)
                    if isinstance(digest, str):
                        with suppress(CheckpointStoreError):
                            entries, trees = self._read_trees(digest)
                            kept.update(trees)
                            kept.update(entry.digest for entry in entries.values())
        objects = self.directory / "objects"
        for path in objects.glob("*/*"):
            if path.parent.name + path.name not in kept:
                with suppress(OSError):
                    path.unlink()
        self._save_cache({})
        # Another process's stat cache may name what was just removed: it reads this.
        _publish(self.directory / "generation", secrets.token_hex(8).encode(), replace=True)

    def hold(self) -> None:
        """Keep the objects of a turn in progress: between its first snapshot and the
        record that names it, `forget` removes records but no objects (a shared lock on
        `in-use`, until `release`)."""
        if self._in_use is not None:
            return
        with self._locked():
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            self._in_use = os.open(self.directory / "in-use", flags, 0o600)
            fcntl.flock(self._in_use, fcntl.LOCK_SH)

    def release(self) -> None:
        in_use, self._in_use = self._in_use, None
        if in_use is not None:
            os.close(in_use)

    def _nobody_in_use(self) -> bool:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.directory / "in-use", flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)  # closing drops the lock: a snapshot starting now holds the store lock
        return True

    def _records_path(self, session_id: str) -> Path:
        if not session_id.isalnum():
            raise CheckpointStoreError(f"not a session id: {session_id!r}")
        return self.directory / "sessions" / f"{session_id}.jsonl"

    # The stat cache: a file whose size, times, inode and mode are as last seen keeps its
    # digest, so a snapshot reads only what changed.

    def _load_cache(self) -> dict[str, list[int | str]]:
        generation = self._generation()
        if generation != self._cache_generation:
            self._cache, self._cache_generation = None, generation
        if self._cache is None:
            try:
                loaded = _loads((self.directory / "stat-cache.json").read_bytes())
            except (OSError, ValueError):
                loaded = {}
            self._cache = loaded if isinstance(loaded, dict) else {}
        return self._cache

    def _generation(self) -> bytes:
        """Changes whenever objects are removed; a cache loaded before is dropped."""
        try:
            return (self.directory / "generation").read_bytes()
        except OSError:
            return b""

    def _save_cache(self, cache: dict[str, list[int | str]]) -> None:
        if cache == self._cache:
            return
        self._cache = cache
        with suppress(OSError):  # a lost cache only costs reading the files again
            _publish(self.directory / "stat-cache.json", _json(cache), replace=True)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's lock, held while it is written (two agents in one project). A state
        folder or store that is a symlink is refused: a repository could commit one that
        leads the agent's writes elsewhere."""
        try:
            _refuse_symlink(self.directory.parent)
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            _refuse_symlink(self.directory)
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(self.directory / "lock", flags, 0o600)
        except OSError as error:
            raise CheckpointStoreError(f"cannot open the checkpoint store: {error}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # Putting files back

    def restore(self, workspace: Path, path: str, entry: Entry | None) -> None:
        """Make `path` in the workspace what `entry` records; None removes it."""
        parts = PurePosixPath(path).parts
        if not parts or any(part in ("..", ".", "") for part in parts) or path.startswith("/"):
            raise CheckpointStoreError(f"not a workspace path: {path!r}")
        with ExitStack() as stack:
            directory = _open_parent(workspace, parts[:-1], create=entry is not None, stack=stack)
            if directory is None:
                return  # removing a file whose folder is gone: nothing to do
            name = parts[-1]
            if entry is None:
                _remove(directory, name)
            else:
                self._write(directory, name, entry)

    def _write(self, directory: int, name: str, entry: Entry) -> None:
        data = self.read_object(entry.digest)
        temporary = f".{name[:200]}.{secrets.token_hex(4)}.undo"
        if entry.kind == "link":
            os.symlink(os.fsdecode(data), temporary, dir_fd=directory)
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o600, dir_fd=directory)
            try:
                _write_all(fd, data)
                os.fchmod(fd, entry.mode & _MODE_BITS)
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                with suppress(OSError):
                    os.unlink(temporary, dir_fd=directory)
                raise
            os.close(fd)
        try:
            os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError:
            with suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise

    def remove_empty_folders(self, workspace: Path, folders: Sequence[str]) -> None:
        """Remove each folder (deepest first) if it is empty now: undo removes the folders
        the undone turns made along with their files."""
        for folder in sorted(folders, key=lambda name: name.count("/"), reverse=True):
            parts = PurePosixPath(folder).parts
            with ExitStack() as stack:
                parent = _open_parent(workspace, parts[:-1], create=False, stack=stack)
                if parent is not None:
                    with suppress(OSError):
                        os.rmdir(parts[-1], dir_fd=parent)


@dataclass(frozen=True, slots=True)
class _Level:
    """A directory the walk is in: open, with the ignore rules in force there."""

    directory: int
    relative: str
    rules: GitIgnore
    fingerprint: str
    """Names the ignore files in force here by their stat ("" while one is too recent to
    trust): a file cached under the same fingerprint was not ignored, and is not now."""


class _Found(NamedTuple):
    """A file the walk found (a tuple: the walk makes one per file, every snapshot)."""

    level: _Level
    name: str
    path: str
    info: os.stat_result


def _walk(root: int, rules: GitIgnore, fingerprint: str, settled_before: int) -> Iterator[_Found]:
    """Every regular file and symlink below `root`, depth first, in directories the rules
    leave in (the files themselves are the caller's to check); each level's descriptor is
    valid until the next item. Paths are plain `/`-joined text: path objects for 10,000
    files cost more than the walk's system calls."""
    levels: list[tuple[_Level, Iterator[os.DirEntry[str]]]] = []

    def enter(fd: int, relative: str, parent: GitIgnore, parent_fingerprint: str) -> None:
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:  # unreadable: nothing in it can be recorded
            entries = []
        rules = parent.entering(fd, PurePosixPath(relative or "."))
        here = _fingerprint(parent_fingerprint, fd, ".gitignore", relative, settled_before)
        levels.append((_Level(fd, relative, rules, here), iter(entries)))

    enter(os.dup(root), "", rules, fingerprint)
    try:
        while levels:
            level, entries = levels[-1]
            prefix = f"{level.relative}/" if level.relative else ""
            # One loop over the level's entries until a folder to enter: the walk's cost is
            # per file, 10,000 times a snapshot.
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if _recorded_kind(info):
                    yield _Found(level, entry.name, prefix + entry.name, info)
                elif stat.S_ISDIR(info.st_mode):
                    child = _open_folder(level, entry.name, prefix + entry.name)
                    if child is not None:
                        enter(child, prefix + entry.name, level.rules, level.fingerprint)
                        break
            else:
                levels.pop()
                os.close(level.directory)
    finally:
        for level, _ in levels:
            os.close(level.directory)


def _open_folder(level: _Level, name: str, path: str) -> int | None:
    """The folder `name` below `level`, opened; None for one never recorded, ignored, or
    that cannot be opened."""
    if name in NEVER_RECORDED or level.rules.excludes_text(path, is_dir=True):
        return None
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=level.directory)
    except OSError:
        return None


def _root_fingerprint(root: int, settled_before: int) -> str:
    return _fingerprint("root", root, f"{VCS_DIR}/info/exclude", "", settled_before)


def _fingerprint(parent: str, directory: int, name: str, relative: str, settled: int) -> str:
    """The parent's fingerprint, extended by the ignore file `name` if there is one."""
    if not parent:
        return ""
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except OSError:
        return parent
    if max(info.st_mtime_ns, info.st_ctime_ns) >= settled:
        return ""
    identity = f"{parent}/{relative}/{info.st_size}/{info.st_mtime_ns}/{info.st_ctime_ns}"
    return hashlib.sha256(f"{identity}/{info.st_ino}".encode()).hexdigest()[:16]


DURABLE_ONE_BY_ONE = 64
"""Up to this many new objects are synced one by one (a turn's few); more (a first
snapshot's thousands) with one `sync` of everything, far cheaper than thousands of fsyncs."""


def _make_durable(written: Sequence[Path]) -> None:
    """The snapshot's new objects and folders, and their names, on disk before a record can
    name them: after a crash an object must be whole or absent, never empty under its name."""
    if len(written) > DURABLE_ONE_BY_ONE:
        os.sync()
        return
    for path in [*written, *{path.parent for path in written}]:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _refuse_symlink(folder: Path) -> None:
    if folder.is_symlink():
        raise CheckpointStoreError(f"{folder} is a symlink; not writing through it")


def _vouches(cached: list[int | str], found: _Found) -> bool:
    """Whether the stat cache's line for a file still holds: the same size, times, inode,
    mode and ignore files as when it was cached. Its times had settled then, it was not
    ignored under those ignore files, and its object is there (`forget` empties the
    cache), so the file needs neither reading nor asking the ignore rules again."""
    return bool(found.level.fingerprint) and cached[:-1] == _cache_key(found)


def _cache_key(found: _Found) -> list[int | str]:
    """What the stat cache keeps a file's digest under."""
    info = found.info
    return [
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
        info.st_ino,
        info.st_mode,
        found.level.fingerprint,
    ]


def _entry(st_mode: int, digest: str) -> Entry:
    if stat.S_ISLNK(st_mode):
        return Entry("link", 0, digest)
    return Entry("file", stat.S_IMODE(st_mode), digest)


def _recorded_kind(info: os.stat_result) -> bool:
    """Regular files and symlinks; never a socket, FIFO or device."""
    return stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)


def _read_regular_file(directory: int, name: str, limit: int) -> bytes | None:
    fd = os.open(name, _READ_FLAGS, dir_fd=directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1024 * 1024):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open_parent(
    workspace: Path, folders: Sequence[str], *, create: bool, stack: ExitStack
) -> int | None:
    """The folder holding a path, opened one name at a time without following a symlink
    (made when `create`); None when a folder on the way is missing and not to be made."""
    try:
        directory = os.open(workspace, _DIRECTORY_FLAGS)
    except OSError as error:
        raise CheckpointStoreError(f"cannot open the workspace {workspace}: {error}") from None
    stack.callback(os.close, directory)
    for name in folders:
        if name in NEVER_RECORDED:
            raise CheckpointStoreError(f"refusing to write inside {name}/")
        try:
            child = os.open(name, _DIRECTORY_FLAGS, dir_fd=directory)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(name, 0o777, dir_fd=directory)
            child = os.open(name, _DIRECTORY_FLAGS, dir_fd=directory)
        stack.callback(os.close, child)
        directory = child
    return directory


def _remove(directory: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        raise CheckpointStoreError(f"{name} is a folder now; not removed")
    os.unlink(name, dir_fd=directory)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _publish(target: Path, data: bytes, *, replace: bool = False) -> None:
    """Write `data` to a temporary file beside `target`, then give it the name: a reader
    never sees half an object. An object already there (same name, same bytes) stays."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    try:
        if replace:
            temporary.replace(target)
        else:
            with suppress(FileExistsError):  # another process stored the same bytes
                os.link(temporary, target)
    finally:
        with suppress(FileNotFoundError):
            temporary.unlink()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json(value: object) -> bytes:
    """`value` as compact JSON that keeps every file name. orjson writes it (the standard
    library's encoder took about 25 ms a snapshot for the stat cache of 10,000 files); a
    name that is not UTF-8 is a string with lone surrogates (`os.fsdecode`), which orjson
    refuses, and the standard library writes as `\\udcxx` escapes and reads back the same."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def _loads(data: bytes) -> Any:
    """What `_json` wrote: orjson reads it, unless it holds a lone surrogate's escape (or
    is not JSON at all: then the standard library's `ValueError` says so)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _part(name: object) -> str:
    """A name in a tree: one path component, never `..` or a path."""
    text = str(name)
    if not text or text in (".", "..") or "/" in text or "\0" in text:
        raise ValueError(f"not a file name: {text!r}")
    return text
