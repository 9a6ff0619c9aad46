"""The submodules a repository's index records (its gitlinks), read from the index file
itself, so that the sandbox knows every `.git` that `git status` run later at the top will
step into, without running git.

The index format (git's `Documentation/gitformat-index.txt`), versions 2 to 4: a header
(`DIRC`, the version, the entry count), then each entry: ten 32-bit fields (the mode is
the fifth), the object name (20 bytes for SHA-1, 32 for SHA-256), 16 bits of flags (the low
twelve the path's length), 16 more in version 3 and up when the extended flag is set, then
the path: NUL-terminated and padded to a multiple of 8 in versions 2 and 3; in version 4 a
number of bytes to drop from the end of the previous path and what follows it. Extensions
come last, each a signature and a size, and the file ends with a checksum of the object
name's size. Which size the repository uses is found by reading the file with each: only
the right one lands every entry and extension where the next begins. A split index
(`link` extension) keeps most entries in a shared index file beside it, read too.

What is not an index (damaged, a newer version, too short) has no gitlinks: the caller's
protection is then what it was before submodules were known.
"""

from __future__ import annotations

import functools
import os
import struct
from pathlib import Path

_SIGNATURE = b"DIRC"
_VERSIONS = (2, 3, 4)
_HASH_SIZES = (20, 32)
_FIXED_FIELDS = 40
_MODE_OFFSET = 24
_GITLINK = 0o160000
_TYPE_MASK = 0o170000
_NAME_LENGTH = 0x0FFF
_EXTENDED = 0x4000
_LINK_EXTENSION = b"link"
_MAX_INDEX_BYTES = 1 << 30
"""An index larger than this is not read (git's own limit on entries is far below it)."""


class _NotAnIndex(ValueError):
    """The bytes are not an index read with this object-name size (never shown: it only
    sends `_parsed` on to the next size, so it carries no message)."""


def gitlinks(git_dir: Path) -> tuple[str, ...]:
    """The paths (relative to the working tree, `/`-separated, as git keeps them) of the
    submodules the index in `git_dir` records; () when there is no readable index."""
    index = git_dir / "index"
    try:
        info = index.stat()
    except OSError:
        return ()
    # The key changes whenever the file does (it is replaced, never written in place), so
    # a large index is read once, not before every command.
    return _gitlinks_of(index, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


@functools.lru_cache(maxsize=32)
def _gitlinks_of(index: Path, *_identity: int) -> tuple[str, ...]:
    links, shared = _parsed(_read(index))
    if shared is not None:
        links += _parsed(_read(index.parent / f"sharedindex.{shared}"))[0]
    return tuple(dict.fromkeys(links))


def _parsed(data: bytes) -> tuple[tuple[str, ...], str | None]:
    """The gitlinks of the index in `data` and the name of its shared index, read with the
    object-name size that fits; nothing for what fits neither."""
    for hash_size in _HASH_SIZES:
        try:
            return _read_index(data, hash_size)
        except (ValueError, struct.error, IndexError):  # _NotAnIndex is a ValueError
            continue
    return (), None


def _read(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(_MAX_INDEX_BYTES + 1)
    except OSError:
        return b""


def _read_index(data: bytes, hash_size: int) -> tuple[tuple[str, ...], str | None]:
    """The gitlinks of an index read with `hash_size`, and the name of its shared index
    when it is split; `_NotAnIndex` when the bytes do not fit that reading."""
    if len(data) > _MAX_INDEX_BYTES or data[:4] != _SIGNATURE:
        raise _NotAnIndex  # too large, or no index signature
    version, count = struct.unpack_from(">II", data, 4)
    if version not in _VERSIONS:
        raise _NotAnIndex  # a version git has not made
    position, previous, links = 12, b"", []
    for _ in range(count):
        position, previous, mode = _entry(data, position, version, hash_size, previous)
        if mode & _TYPE_MASK == _GITLINK:
            links.append(os.fsdecode(previous))
    return tuple(links), _shared_index(data, position, hash_size)


def _entry(
    data: bytes, start: int, version: int, hash_size: int, previous: bytes
) -> tuple[int, bytes, int]:
    """One entry at `start`: where the next begins, its path and its mode."""
    (mode,) = struct.unpack_from(">I", data, start + _MODE_OFFSET)
    flags_at = start + _FIXED_FIELDS + hash_size
    (flags,) = struct.unpack_from(">H", data, flags_at)
    name_at = flags_at + (4 if version >= 3 and flags & _EXTENDED else 2)
    length = flags & _NAME_LENGTH
    if version == 4:
        drop, name_at = _varint(data, name_at)
        end = data.index(b"\0", name_at)
        if drop > len(previous):
            raise _NotAnIndex  # a path drops more than the previous one holds
        path = previous[: len(previous) - drop] + data[name_at:end]
        following = end + 1
    else:
        end = data.index(b"\0", name_at)
        path = data[name_at:end]
        following = start + ((name_at - start + len(path) + 8) & ~7)
        if any(data[end:following]):
            raise _NotAnIndex  # an entry's padding is not NUL
    if length != min(len(path), _NAME_LENGTH):
        raise _NotAnIndex  # an entry's path is not the length its flags say
    return following, path, mode


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """Git's offset varint (each continuation adds one before shifting) at `position`, and
    where it ends."""
    byte = data[position]
    value = byte & 0x7F
    while byte & 0x80:
        position += 1
        byte = data[position]
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, position + 1


def _shared_index(data: bytes, position: int, hash_size: int) -> str | None:
    """Walk the extensions from `position` to the checksum; the shared index's name if one
    is a `link` (a split index)."""
    end, shared = len(data) - hash_size, None
    while position < end:
        signature = data[position : position + 4]
        (size,) = struct.unpack_from(">I", data, position + 4)
        if signature == _LINK_EXTENSION:
            name = data[position + 8 : position + 8 + hash_size]
            shared = name.hex() if any(name) else None
        position += 8 + size
    if position != end:
        raise _NotAnIndex  # the extensions do not end at the checksum
    return shared
