"""Which submodules an index records (`adapters.git_index`), read from indexes real git
wrote in each of its formats, and nothing from what is not an index."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agent_tutorial.adapters.git_index import gitlinks

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
