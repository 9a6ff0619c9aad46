"""The checkpoint store's own rules, below the CLI: what a snapshot records and skips,
and a damaged object caught by its name."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.checkpoint_store import CheckpointStore, CheckpointStoreError


def store_for(workspace: Path, limit: int = 1000) -> CheckpointStore:
    return CheckpointStore.in_state_folder(workspace, max_file_bytes=limit)


def test_a_fifo_and_a_socket_are_skipped_without_being_opened(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.mkfifo(workspace / "pipe")
    monkeypatch.chdir(workspace)  # a socket's path is limited to 108 bytes: bind it by name
    listening = socket.socket(socket.AF_UNIX)
    listening.bind("sock")
    (workspace / "file.txt").write_text("x")
    opened: list[str] = []
    real_open = os.open

    def watched_open(
        path: str | Path, flags: int, mode: int = 0o777, *, dir_fd: int | None = None
    ) -> int:
        opened.append(Path(path).name)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", watched_open)
    try:
        snapshot = store_for(workspace).snapshot(workspace)
    finally:
        listening.close()

    assert sorted(snapshot.manifest) == ["file.txt"]
    assert "file.txt" in opened  # the watch sees what the walk opens
    assert "pipe" not in opened and "sock" not in opened


def test_the_size_limit_keeps_a_file_at_it_and_leaves_out_one_past_it(workspace: Path) -> None:
    (workspace / "at.bin").write_bytes(b"x" * 1000)
    (workspace / "past.bin").write_bytes(b"x" * 1001)

    snapshot = store_for(workspace).snapshot(workspace)

    assert sorted(snapshot.manifest) == ["at.bin"]
    assert snapshot.too_large == ("past.bin",)


def test_gitignore_applies_in_a_plain_folder_and_in_nested_folders(workspace: Path) -> None:
    (workspace / ".gitignore").write_text("*.log\nbuild/\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.txt").write_text("x")
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".gitignore").write_text("secret.txt\n")
    for name in ("a.log", "sub/secret.txt", "sub/kept.txt", "kept.txt"):
        (workspace / name).write_text("x")

    snapshot = store_for(workspace).snapshot(workspace)

    assert sorted(snapshot.manifest) == [".gitignore", "kept.txt", "sub/.gitignore", "sub/kept.txt"]


@pytest.mark.parametrize(("settled_ns", "cached"), [(10**12, False), (0, True)])
def test_the_stat_cache_keeps_only_files_whose_times_have_settled(
    workspace: Path, settled_ns: int, cached: bool
) -> None:
    """A file written just now may be written again within the same clock tick, keeping
    its size and times: its digest is not cached until its times are old enough."""
    (workspace / "a.txt").write_text("one")
    store = CheckpointStore.in_state_folder(workspace, max_file_bytes=1000)
    store = CheckpointStore(store.directory, max_file_bytes=1000, settled_ns=settled_ns)

    store.snapshot(workspace)

    saved = store.directory / "stat-cache.json"
    cache = orjson.loads(saved.read_bytes()) if saved.exists() else {}
    assert ("a.txt" in cache) is cached


def test_a_damaged_object_is_refused_by_name(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one")
    store = store_for(workspace)
    digest = store.snapshot(workspace).manifest["a.txt"].digest
    store.snapshot(workspace)
    path = store.directory / "objects" / digest[:2] / digest[2:]
    path.chmod(0o600)
    path.write_bytes(b"not zlib")

    with pytest.raises(CheckpointStoreError, match="unreadable"):
        store.read_object(digest)


def test_a_symlinked_state_folder_is_refused_and_nothing_is_written_through_it(
    workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".agent_tutorial").symlink_to(elsewhere)
    (workspace / "a.txt").write_text("x")

    with pytest.raises(CheckpointStoreError, match="is a symlink"):
        store_for(workspace).snapshot(workspace)

    assert list(elsewhere.iterdir()) == []


def test_a_real_state_folder_is_written(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x")

    store_for(workspace).snapshot(workspace)

    assert (workspace / ".agent_tutorial" / "checkpoints" / "objects").is_dir()


def objects_in(store: CheckpointStore) -> set[str]:
    return {path.parent.name + path.name for path in (store.directory / "objects").glob("*/*")}


def test_a_snapshot_after_one_change_stores_the_file_and_the_trees_on_its_path(
    workspace: Path,
) -> None:
    for folder in ("a", "b", "c/d"):
        (workspace / folder).mkdir(parents=True)
        for number in range(20):
            (workspace / folder / f"f{number}.txt").write_text(f"{folder} {number}")
    store = store_for(workspace)
    first = store.snapshot(workspace)
    stored = objects_in(store)
    (workspace / "c" / "d" / "f3.txt").write_text("changed")

    second = store.snapshot(workspace)

    assert len(objects_in(store) - stored) == 4  # the file, c/d, c and the root
    assert len(second.manifest) == len(first.manifest) == 60
    assert store.manifest(second.digest) == second.manifest


def test_pruning_keeps_the_objects_of_a_turn_in_progress_until_it_ends(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x")
    running = store_for(workspace)
    running.hold()
    snapshot = running.snapshot(workspace)
    pruning = store_for(workspace)

    pruning.forget(["abcdef12"])
    kept = objects_in(pruning)
    running.release()
    pruning.forget(["abcdef12"])

    assert snapshot.digest in kept
    assert objects_in(pruning) == set()


def test_a_stat_cache_older_than_a_prune_is_not_trusted(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x")
    directory = store_for(workspace).directory
    agent = CheckpointStore(directory, max_file_bytes=1000, settled_ns=0)
    agent.snapshot(workspace)
    store_for(workspace).forget([])  # no records: every object goes

    again = agent.snapshot(workspace)

    assert agent.read_object(again.manifest["a.txt"].digest) == b"x"


def test_a_name_that_is_not_utf8_is_recorded_and_restored_by_its_bytes(workspace: Path) -> None:
    # Linux names are bytes; Python hands this one over with a lone surrogate, which a JSON
    # writer that insists on UTF-8 (orjson) refuses: the turn's first write ended in a
    # traceback before this was kept.
    name = os.fsdecode(b"caf\xe9.txt")
    (workspace / name).write_text("before")
    store = store_for(workspace)
    first = store.snapshot(workspace)
    store.snapshot(workspace)  # again, through the stat cache written the first time

    (workspace / name).write_text("after")
    store.restore(workspace, name, store.manifest(first.digest)[name])

    assert sorted(store.manifest(first.digest)) == [name]
    assert (workspace / name).read_text() == "before"
    assert name in [path.name for path in workspace.iterdir()]  # the same bytes on disk


def synced_during(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths `os.fsync` is called on from now, read from each descriptor."""
    synced: list[Path] = []
    real_fsync = os.fsync

    def watched_fsync(fd: int) -> None:
        synced.append(Path(f"/proc/self/fd/{fd}").readlink())
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", watched_fsync)
    return synced


def test_a_new_object_its_new_folder_and_the_folders_names_are_synced(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_for(workspace)
    store.snapshot(workspace)  # an empty tree: its object and folder exist from now
    (workspace / "a.txt").write_text("a turn's one change")
    synced = synced_during(monkeypatch)

    store.snapshot(workspace)

    objects = store.directory / "objects"
    new_folders = {path.parent for path in synced if path.parent.parent == objects}
    assert new_folders, synced  # the change made at least one object in a new folder
    for folder in new_folders:
        assert folder in synced  # its entries: the object's name
    assert objects in synced  # its entries: the new folders' names
