"""Which submodules an index records (`adapters.git_index`), read from indexes real git
wrote in each of its formats, and nothing from what is not an index."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.adapters import git_index
from agent_tutorial.adapters.git_index import gitlinks
from tests.memory import peak_memory

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

SHA1_COMMIT = "1" * 40
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


def git(repository: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repository, check=True, capture_output=True)


def repository(tmp_path: Path, *init: str) -> Path:
    """A repository whose index holds a file, two submodules (one with a space in its
    path) and another file, added without their objects; returns its git directory."""
    folder = tmp_path / "repository"
    subprocess.run(["git", "init", "-q", *init, str(folder)], check=True)
    commit, blob = SHA1_COMMIT, EMPTY_BLOB
    if init:  # SHA-256: names of that size
        commit, blob = "1" * 64, "2" * 64
    entries = [
        ("100644", blob, "README"),
        ("160000", commit, "libs/sub"),
        ("160000", commit, "odd name/x"),
        ("100644", blob, "src/app.py"),
    ]
    lines = "".join(f"{mode} {name}\t{path}\n" for mode, name, path in entries)
    subprocess.run(
        ["git", "update-index", "--add", "--info-only", "--index-info"],
        cwd=folder,
        input=lines,
        text=True,
        check=True,
    )
    return folder / ".git"


SUBMODULES = ("libs/sub", "odd name/x")


def test_a_version_2_index_names_its_submodules_in_order(tmp_path: Path) -> None:
    git_dir = repository(tmp_path)

    assert (git_dir / "index").read_bytes()[:8] == b"DIRC\0\0\0\2"
    assert gitlinks(git_dir) == SUBMODULES


def test_a_version_3_index_with_extended_flags_is_read(tmp_path: Path) -> None:
    git_dir = repository(tmp_path)
    git(git_dir.parent, "update-index", "--skip-worktree", "README", "src/app.py")

    assert (git_dir / "index").read_bytes()[:8] == b"DIRC\0\0\0\3"
    assert gitlinks(git_dir) == SUBMODULES


def test_a_version_4_index_with_shortened_paths_is_read(tmp_path: Path) -> None:
    git_dir = repository(tmp_path)
    git(git_dir.parent, "update-index", "--index-version", "4")

    assert gitlinks(git_dir) == SUBMODULES


def test_a_sha256_repositorys_index_is_read(tmp_path: Path) -> None:
    assert gitlinks(repository(tmp_path, "--object-format=sha256")) == SUBMODULES


def test_a_split_index_is_read_with_its_shared_index(tmp_path: Path) -> None:
    git_dir = repository(tmp_path)
    git(git_dir.parent, "update-index", "--split-index")
    git(git_dir.parent, "update-index", "--add", "--cacheinfo", f"160000,{SHA1_COMMIT},new")

    assert list(git_dir.glob("sharedindex.*"))
    assert sorted(gitlinks(git_dir)) == sorted([*SUBMODULES, "new"])


@pytest.mark.parametrize("version", ["2", "4"])
def test_a_path_longer_than_its_length_field_is_read_to_its_end(
    tmp_path: Path, version: str
) -> None:
    git_dir = repository(tmp_path)
    long = "/".join(["a" * 200] * 25)  # 5,024 characters: past the field's 4,095
    git(git_dir.parent, "update-index", "--add", "--cacheinfo", f"160000,{SHA1_COMMIT},{long}")
    git(git_dir.parent, "update-index", "--index-version", version)

    assert long in gitlinks(git_dir)


def test_the_index_is_read_again_once_it_changes(tmp_path: Path) -> None:
    git_dir = repository(tmp_path)
    assert gitlinks(git_dir) == SUBMODULES

    git(git_dir.parent, "update-index", "--force-remove", "libs/sub")

    assert gitlinks(git_dir) == ("odd name/x",)


def test_no_index_or_no_git_directory_has_no_submodules(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "empty")], check=True)

    assert gitlinks(tmp_path / "empty" / ".git") == ()
    assert gitlinks(tmp_path / "nowhere") == ()


FIRST_PATH = 12 + 40 + 20 + 2
"""Where the first entry's path begins: the header, ten fields, a SHA-1 name, the flags."""


def damaged(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value) :]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: b"DIRT" + data[4:],
        lambda data: damaged(data, 4, b"\0\0\0\5"),  # a version git has not made
        lambda data: damaged(data, 8, b"\0\0\0\7"),  # more entries than it holds
        lambda data: data[:100],
        lambda data: damaged(data, FIRST_PATH + len("README") + 1, b"x"),  # padding not NUL
        lambda data: damaged(data, FIRST_PATH - 1, b"\x07"),  # a length not its path's
        lambda data: data[:-20] + b"junk" + data[-20:],  # extensions that overrun
    ],
    ids=[
        "empty",
        "signature",
        "version",
        "count",
        "truncated",
        "padding",
        "length",
        "extensions",
    ],
)
def test_what_is_not_an_index_names_no_submodule(tmp_path: Path, damage: object) -> None:
    git_dir = repository(tmp_path)
    index = git_dir / "index"
    assert callable(damage)
    index.write_bytes(damage(index.read_bytes()))

    assert gitlinks(git_dir) == ()


def test_a_version_4_path_that_drops_more_than_the_previous_holds_is_not_an_index(
    tmp_path: Path,
) -> None:
    git_dir = repository(tmp_path)
    git(git_dir.parent, "update-index", "--index-version", "4")
    index = git_dir / "index"
    data = index.read_bytes()
    assert data[FIRST_PATH] == 0  # the first entry's varint: nothing to drop
    index.write_bytes(damaged(data, FIRST_PATH, b"\x05"))

    assert gitlinks(git_dir) == ()


def test_a_version_4_path_that_keeps_all_but_one_byte_of_the_previous_is_read(
    tmp_path: Path,
) -> None:
    # `libs/suc` drops one byte of `libs/sub`: a varint of 1, whose low bit is no
    # continuation bit.
    git_dir = repository(tmp_path)
    git(git_dir.parent, "update-index", "--add", "--cacheinfo", f"160000,{SHA1_COMMIT},libs/suc")
    git(git_dir.parent, "update-index", "--index-version", "4")

    assert gitlinks(git_dir) == ("libs/sub", "libs/suc", "odd name/x")


# Indexes written here byte by byte: what git does not write, but a command could --------


def gitlink_entry(path: str) -> bytes:
    """A version 2 entry of a submodule at `path` (SHA-1), padded with NULs as git pads."""
    name = path.encode()
    fields = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o160000, 0, 0, 0)
    fixed = fields + b"\1" * 20 + struct.pack(">H", len(name))
    return (fixed + name).ljust((len(fixed) + len(name) + 8) & ~7, b"\0")


def extension(signature: bytes, payload: bytes, size: int | None = None) -> bytes:
    return signature + struct.pack(">I", len(payload) if size is None else size) + payload


def index_bytes(*entries: bytes, extensions: bytes = b"", count: int | None = None) -> bytes:
    """A version 2 index of `entries` (their number unless `count` says otherwise), ending
    with a SHA-1-sized checksum, which is not checked."""
    header = b"DIRC" + struct.pack(">II", 2, len(entries) if count is None else count)
    return header + b"".join(entries) + extensions + b"\0" * 20


def write_index(git_dir: Path, data: bytes) -> Path:
    git_dir.mkdir(parents=True, exist_ok=True)
    (git_dir / "index").write_bytes(data)
    return git_dir


def test_an_index_written_here_is_read_like_one_git_wrote(tmp_path: Path) -> None:
    data = index_bytes(gitlink_entry("libs/sub"), gitlink_entry("odd name/x"))

    assert gitlinks(write_index(tmp_path, data)) == SUBMODULES


SHARED_NAME = bytes(range(1, 21))
"""A shared index's name (its checksum) as a `link` extension holds it."""


def with_shared_index(git_dir: Path, name: bytes) -> None:
    git_dir.mkdir(parents=True, exist_ok=True)
    shared = git_dir / f"sharedindex.{name.hex()}"
    shared.write_bytes(index_bytes(gitlink_entry("shared")))


@pytest.mark.parametrize(
    ("name", "expected"),
    [(SHARED_NAME, ("own", "shared")), (bytes(20), ("own",))],
    ids=["a name", "zeros"],
)
def test_a_link_of_zeros_names_no_shared_index(
    tmp_path: Path, name: bytes, expected: tuple[str, ...]
) -> None:
    # As git reads it: a null name is no shared index, even where a file of that name lies.
    with_shared_index(tmp_path, name)

    data = index_bytes(gitlink_entry("own"), extensions=extension(b"link", name))

    assert gitlinks(write_index(tmp_path, data)) == expected


@pytest.mark.parametrize(("count", "expected"), [(0, ("shared",)), (1 << 31, ())])
def test_an_entry_count_from_two_to_the_31_is_not_read_as_negative(
    tmp_path: Path, count: int, expected: tuple[str, ...]
) -> None:
    # Read signed, 2**31 entries would be none, and the link after the header would count.
    with_shared_index(tmp_path, SHARED_NAME)

    data = index_bytes(extensions=extension(b"link", SHARED_NAME), count=count)

    assert gitlinks(write_index(tmp_path, data)) == expected


@pytest.mark.parametrize(("size", "expected"), [(8, ("sub",)), ((1 << 32) - 16, ())])
def test_an_extension_size_from_two_to_the_31_is_not_a_step_back(
    tmp_path: Path, size: int, expected: tuple[str, ...]
) -> None:
    # The first extension's payload is shaped as an extension ending at the checksum: read
    # signed, the second one's size (-16) would step back into it and land there.
    first = extension(b"AAAA", extension(b"BBBB", b"", size=8))
    second = extension(b"CCCC", b"", size=size)
    if size == 8:  # read unsigned, the second extension is those 8 bytes
        second += b"\0" * 8

    data = index_bytes(gitlink_entry("sub"), extensions=first + second)

    assert gitlinks(write_index(tmp_path, data)) == expected


@pytest.mark.parametrize(("over_the_limit", "expected"), [(0, ("sub",)), (1, ())])
def test_an_index_of_the_largest_size_is_read_and_one_byte_larger_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over_the_limit: int, expected: tuple[str, ...]
) -> None:
    data = index_bytes(gitlink_entry("sub"))
    monkeypatch.setattr(git_index, "_MAX_INDEX_BYTES", len(data) - over_the_limit)

    assert gitlinks(write_index(tmp_path, data)) == expected


def test_a_huge_index_is_refused_without_being_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_index, "_MAX_INDEX_BYTES", 4096)
    write_index(tmp_path, index_bytes(gitlink_entry("sub")))
    os.truncate(tmp_path / "index", 1 << 24)  # sparse: no disk is used
    with peak_memory() as peak:
        links = gitlinks(tmp_path)

    assert links == ()
    assert peak.bytes < 1 << 20


IDENTITY = {"st_ino": 1, "st_dev": 2, "st_size": 6, "st_mtime_ns": 14}
"""Where each field the cache is keyed by sits in the values os.stat_result is made of."""


def stat_with_one_more(path: Path, field: str) -> Callable[..., os.stat_result]:
    """os.stat, saying for `path` that `field` is one more than it is."""
    real_stat = os.stat

    def stat(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        info = real_stat(target, *args, **kwargs)
        if target != path:
            return info
        times = (info.st_atime, info.st_mtime, info.st_ctime)
        times_ns = (info.st_atime_ns, info.st_mtime_ns, info.st_ctime_ns)
        values = [*info[:10], *times, *times_ns]
        values[IDENTITY[field]] += 1
        return os.stat_result(values)

    return stat


@pytest.mark.parametrize("field", IDENTITY)
def test_an_index_is_read_again_when_its_inode_device_size_or_time_is_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    index = write_index(tmp_path, index_bytes(gitlink_entry("old"))) / "index"
    assert gitlinks(tmp_path) == ("old",)
    before = index.stat()
    with index.open("r+b") as file:  # in place and as large: nothing stat shows changes
        file.write(index_bytes(gitlink_entry("new")))
    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))
    unchanged = gitlinks(tmp_path)

    monkeypatch.setattr(os, "stat", stat_with_one_more(index, field))

    assert unchanged == ("old",)  # the same file as far as stat tells: not read again
    assert gitlinks(tmp_path) == ("new",)
