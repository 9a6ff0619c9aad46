"""Project root discovery (issue 19), through the CLI: from any subdirectory the project's
`.agent_tutorial/` is used (its settings, `.env`, sessions and artifacts) and AGENTS.md is
gathered from the root down, while the tools' boundary stays where the agent started. The
search stops at the first `.git`, never looks at the home directory or above it, and passes
over a state folder that belongs to another user."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_tutorial.config import read_project_settings
from agent_tutorial.folder_trust import record_trust
from agent_tutorial.project import find_project
from tests.conftest import LOOPBACK_MODEL, TEST_API_KEY, RunCli
from tests.contracts import Body, read_call, tool_contents, write_text_file
from tests.loopback import LoopbackServer, Reply, exchanged, prompt_text, text_stream, tool_stream

NOT_IN_THE_ENVIRONMENT = {
    "OPENAI_BASE_URL": None,
    "OPENAI_API_KEY": None,
    "AGENT_TUTORIAL_MODEL": None,
}
"""The endpoint comes only from a `.env` file, as in the issue's report."""
NOBODY = 65534


def write_endpoint_dotenv(folder: Path, loopback: LoopbackServer) -> Path:
    state = folder / ".agent_tutorial"
    state.mkdir(exist_ok=True)
    (state / ".env").write_text(
        f"OPENAI_BASE_URL={loopback.base_url}\n"
        f"OPENAI_API_KEY={TEST_API_KEY}\n"
        f"AGENT_TUTORIAL_MODEL={LOOPBACK_MODEL}\n"
    )
    # The user's own project: its OPENAI_BASE_URL applies once trusted, as `trust` records.
    record_trust(folder, read_project_settings(folder).digest)
    return state


@pytest.fixture
def subdirectory(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`src/` below the project, made the current directory."""
    start = workspace / "src"
    start.mkdir()
    monkeypatch.chdir(start)
    return start


def run_hi(run_cli: RunCli, *extra: str, chapter: int = 2) -> tuple[int, str, str]:
    result = run_cli("run", "-c", str(chapter), "-p", "hi", *extra, env=NOT_IN_THE_ENVIRONMENT)
    return result.exit_code, result.stdout, result.stderr


def session_files(folder: Path) -> list[Path]:
    return sorted((folder / ".agent_tutorial" / "sessions").glob("*.jsonl"))


# --- settings and sessions from a subdirectory --------------------------------------------


def test_a_run_from_a_subdirectory_uses_the_project_env_and_saves_its_session_there(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    loopback.queue(text_stream("found it"))

    code, stdout, stderr = run_hi(run_cli)

    assert (code, stdout) == (0, "found it\n"), stderr
    assert len(session_files(workspace)) == 1
    assert not (subdirectory / ".agent_tutorial").exists()


def test_sessions_list_and_continue_from_a_subdirectory_find_the_projects_sessions(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    loopback.queue(text_stream("first"), text_stream("second"))
    run_hi(run_cli)
    (session,) = session_files(workspace)
    session_id = session.stem.rsplit("-", 1)[-1]

    listed = run_cli("sessions", "list", env=NOT_IN_THE_ENVIRONMENT)
    code, _, stderr = run_hi(run_cli, "--continue")

    assert listed.exit_code == 0 and session_id[:8] in listed.stdout, listed.stdout
    assert code == 0 and f"resumed {session_id}" in stderr
    assert [m["content"] for m in exchanged(loopback.requests[1])] == ["hi", "first", "hi"]


def test_bench_replays_a_session_of_the_project_from_a_subdirectory(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    loopback.queue(text_stream("an answer"))
    run_hi(run_cli)
    (session,) = session_files(workspace)

    result = run_cli("bench", "--session", session.stem.rsplit("-", 1)[-1], "--json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["source"].startswith("session ")


def test_a_git_folder_on_the_way_up_is_the_project_root(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    inner = workspace / "vendored"
    (inner / ".git").mkdir(parents=True)
    (inner / "src").mkdir()
    monkeypatch.chdir(inner / "src")

    code, _, stderr = run_hi(run_cli)

    assert code == 2 and "missing setting(s)" in stderr  # the outer .env is not reached
    assert loopback.requests == []


def test_a_git_file_of_a_worktree_marks_the_root_too(workspace: Path) -> None:
    (workspace / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")
    (workspace / "a" / "b").mkdir(parents=True)

    project = find_project(workspace / "a" / "b")

    assert (project.root, project.workspace) == (workspace, workspace / "a" / "b")


def test_without_a_marker_the_starting_directory_is_the_root(subdirectory: Path) -> None:
    project = find_project(subdirectory)

    assert project.root == project.workspace == subdirectory


@pytest.mark.parametrize("marker_at", ["home", "above home"])
def test_a_marker_at_or_above_home_is_not_used(
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    marker_at: str,
) -> None:
    home = workspace / "me"
    (home / "code" / "src").mkdir(parents=True)
    write_endpoint_dotenv(home if marker_at == "home" else workspace, loopback)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "code" / "src")

    code, _, stderr = run_hi(run_cli)

    assert code == 2 and "missing setting(s)" in stderr
    assert find_project(Path.cwd()).root == home / "code" / "src"


def test_a_marker_just_below_home_is_used(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = workspace / "me"
    (home / "code" / "src").mkdir(parents=True)
    write_endpoint_dotenv(home / "code", loopback)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "code" / "src")
    loopback.queue(text_stream("ok"))

    code, _, stderr = run_hi(run_cli)

    assert code == 0, stderr


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root")


@needs_root
def test_a_state_folder_of_another_user_above_is_passed_over(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    state = write_endpoint_dotenv(workspace, loopback)
    os.chown(state, NOBODY, NOBODY)

    code, _, stderr = run_hi(run_cli)

    assert code == 2 and "missing setting(s)" in stderr
    assert loopback.requests == []


@needs_root
def test_a_state_folder_of_another_user_where_the_run_starts_is_refused(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    state = write_endpoint_dotenv(workspace, loopback)
    os.chown(state, NOBODY, NOBODY)

    code, _, stderr = run_hi(run_cli)

    assert code == 2 and "belongs to another user" in stderr
    assert loopback.requests == []


# --- the tools' boundary stays where the agent started ------------------------------------


def test_init_names_the_starting_directory_and_the_project_root(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    loopback.queue(text_stream("ok"))

    code, stdout, stderr = run_hi(run_cli, "--output-format", "stream-json")

    init = json.loads(stdout.splitlines()[0])
    assert code == 0, stderr
    assert (init["cwd"], init["project_root"]) == (str(subdirectory), str(workspace))


def test_the_tools_stay_inside_the_starting_directory(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    (workspace / "README").write_text("project readme")
    loopback.queue(
        tool_stream([("up", "read_file", {"path": "../README"})]),
        tool_stream([("absolute", "read_file", {"path": str(workspace / "README")})]),
        text_stream("done"),
    )

    code, _, stderr = run_hi(run_cli)

    assert code == 0, stderr
    results = tool_contents(loopback.requests[2])
    assert all("is outside the workspace" in results[call] for call in ("up", "absolute"))


def test_a_persisted_result_above_the_start_is_named_absolute_and_read_back(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    path = write_text_file(subdirectory, "big.txt", 36_000)
    artifacts = workspace / ".agent_tutorial" / "artifacts"

    def read_the_artifact(body: Body) -> Reply:
        preview = tool_contents(body)["read-big"]
        artifact = preview.splitlines()[1].removeprefix("path: ")
        assert artifact.startswith(f"{artifacts}/tool-result-")
        return tool_stream([("read-back", "read_file", {"path": artifact, "offset": 200})])

    loopback.queue(read_call("read-big", path), read_the_artifact, text_stream("done"))

    result = run_cli("run", "-c", "8", "-y", "-p", "read", env=NOT_IN_THE_ENVIRONMENT)

    assert result.exit_code == 0, result.stderr
    assert tool_contents(loopback.requests[2])["read-back"].startswith("200\t200\tbig.txt 00199")
    assert f"Large tool results are saved under {artifacts}." in prompt_text(loopback.requests[0])


@pytest.mark.parametrize(
    ("tool", "path", "refusal"),
    [
        ("read_file", ".agent_tutorial/.env", "tools may read only"),
        ("read_file", ".agent_tutorial/artifacts/../.env", "tools may read only"),
        ("read_file", ".agent_tutorial/sessions", "tools may read only"),
        ("grep", ".agent_tutorial", "tools may read only"),
        ("read_file", ".agent_tutorial/artifacts/link", "leads out of"),
        ("write_file", ".agent_tutorial/artifacts/new.txt", "may not write into"),
    ],
)
def test_of_the_state_folder_above_only_artifacts_and_skills_are_readable(
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    subdirectory: Path,
    tool: str,
    path: str,
    refusal: str,
) -> None:
    state = write_endpoint_dotenv(workspace, loopback)
    (state / "artifacts").mkdir()
    (state / "artifacts" / "link").symlink_to(workspace / "README")
    (workspace / "README").write_text("outside the state folder")
    arguments = {"path": str(workspace / path)}
    arguments |= {"content": "x"} if tool == "write_file" else {}
    arguments |= {"pattern": "OPENAI"} if tool == "grep" else {}
    loopback.queue(tool_stream([("call", tool, arguments)]), text_stream("done"))

    code, _, stderr = run_hi(run_cli, "-y")

    assert code == 0, stderr
    result = tool_contents(loopback.requests[1])["call"]
    assert result.startswith("Error [") and refusal in result, result
    assert TEST_API_KEY not in json.dumps(loopback.requests[1])


def test_grep_and_glob_reach_the_artifacts_above_by_absolute_path(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    state = write_endpoint_dotenv(workspace, loopback)
    (state / "artifacts").mkdir()
    (state / "artifacts" / "tool-result-abc.txt").write_text("needle here\n")
    artifacts = str(state / "artifacts")
    loopback.queue(
        tool_stream(
            [
                ("grep", "grep", {"pattern": "needle", "path": artifacts}),
                ("glob", "glob", {"pattern": "*.txt", "path": artifacts}),
            ]
        ),
        text_stream("done"),
    )

    code, _, stderr = run_hi(run_cli)

    assert code == 0, stderr
    results = tool_contents(loopback.requests[1])
    assert results == {
        "grep": f"{artifacts}/tool-result-abc.txt:1:needle here",
        "glob": f"1 file matches '*.txt':\n{artifacts}/tool-result-abc.txt",
    }


def test_agents_md_is_gathered_from_the_root_down_to_the_start(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, subdirectory: Path
) -> None:
    write_endpoint_dotenv(workspace, loopback)
    (workspace / "AGENTS.md").write_text("ROOT RULE")
    (subdirectory / "AGENTS.md").write_text("SRC RULE")
    loopback.queue(text_stream("ok"))

    code, _, stderr = run_hi(run_cli, chapter=7)

    prompt = prompt_text(loopback.requests[0])
    assert code == 0, stderr
    assert prompt.index("ROOT RULE") < prompt.index("SRC RULE")
    assert "Project instructions from src/AGENTS.md" in prompt
