"""Issue 29, item 6: session data stays out of git. The state folder is made in one place,
which writes `.agent_tutorial/.gitignore` whenever there is none: sessions, artifacts,
history, `.env` and checkpoints are ignored; `config.toml`, `skills/` (at any depth) and
the `.gitignore` itself stay visible. A `.gitignore` already there is the user's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agent_tutorial.features.state_folder import (
    STATE_GITIGNORE,
    ensure_state_folder,
    open_state_folder,
    write_gitignore_once,
)
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, text_stream

EXAMPLE_FOLDER = Path(__file__).resolve().parent.parent / ".agent_tutorial.example"


def git(workspace: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=workspace, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout


@pytest.fixture
def repository(workspace: Path) -> Path:
    git(workspace, "init", "-q")
    return workspace


def untracked(repository: Path) -> list[str]:
    return git(repository, "status", "--porcelain", "--untracked-files=all").splitlines()


def plant(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("planted\n")


def test_after_a_first_run_in_a_repository_git_sees_only_the_ignore_file(
    repository: Path, run_cli_process: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("hello"))

    run = run_cli_process("run", "-c", "8", "-p", "hi")

    assert run.exit_code == 0, run.stderr
    assert list((repository / ".agent_tutorial" / "sessions").iterdir())  # a session was kept
    assert untracked(repository) == ["?? .agent_tutorial/.gitignore"]


def test_the_ignore_file_hides_session_data_and_shows_what_a_team_shares(
    repository: Path,
) -> None:
    state = ensure_state_folder(repository)
    plant(state, "sessions/a.jsonl", "artifacts/tool-result-1.txt", "history", ".env")
    plant(state, "checkpoints/1/x", "transcript.jsonl", ".env.local")
    plant(state, "config.toml", ".env.example", "skills/review/SKILL.md", "skills/a/b/c/d.txt")

    assert sorted(untracked(repository)) == [
        f"?? .agent_tutorial/{name}"
        for name in (
            ".env.example",
            ".gitignore",
            "config.toml",
            "skills/a/b/c/d.txt",
            "skills/review/SKILL.md",
        )
    ]


def test_a_state_folder_made_before_this_rule_gets_its_ignore_file(repository: Path) -> None:
    (repository / ".agent_tutorial" / "sessions").mkdir(parents=True)

    ensure_state_folder(repository)

    assert (repository / ".agent_tutorial" / ".gitignore").read_text() == STATE_GITIGNORE


def test_an_ignore_file_already_there_is_left_alone(repository: Path) -> None:
    (repository / ".agent_tutorial").mkdir()
    mine = repository / ".agent_tutorial" / ".gitignore"
    mine.write_text("sessions/\n")

    ensure_state_folder(repository)

    assert mine.read_text() == "sessions/\n"


def test_an_ignore_file_that_is_a_symlink_is_neither_followed_nor_replaced(
    repository: Path, tmp_path: Path
) -> None:
    (repository / ".agent_tutorial").mkdir()
    target = tmp_path / "elsewhere"
    (repository / ".agent_tutorial" / ".gitignore").symlink_to(target)

    ensure_state_folder(repository)

    assert not target.exists()
    assert (repository / ".agent_tutorial" / ".gitignore").is_symlink()


def test_writing_it_leaves_no_temporary_file_and_says_whether_it_wrote(tmp_path: Path) -> None:
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert write_gitignore_once(folder) is True
        assert write_gitignore_once(folder) is False
    finally:
        os.close(folder)

    assert [path.name for path in tmp_path.iterdir()] == [".gitignore"]


def test_a_state_folder_that_is_a_symlink_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".agent_tutorial").symlink_to(elsewhere)

    with pytest.raises(NotADirectoryError):
        os.close(open_state_folder(workspace))

    assert list(elsewhere.iterdir()) == []


def test_a_state_folder_it_cannot_write_in_still_opens(workspace: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes in a read-only folder")
    state = workspace / ".agent_tutorial"
    state.mkdir(mode=0o500)

    os.close(open_state_folder(workspace))

    assert not (state / ".gitignore").exists()


def test_the_example_folder_ships_the_same_ignore_file() -> None:
    assert (EXAMPLE_FOLDER / ".gitignore").read_text() == STATE_GITIGNORE
