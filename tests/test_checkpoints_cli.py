"""Issue 30's headless part through the CLI: a chapter-3 run whose scripted model (the
loopback server) writes, edits and runs bash, then `agent-tutorial undo` and
`agent-tutorial checkpoints list`, in a git repository and in a plain folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from agent_tutorial.adapters.checkpoint_store import CheckpointStore
from agent_tutorial.adapters.sandbox import sandbox_available
from agent_tutorial.core.events import EventBus
from agent_tutorial.core.tools import ToolRegistry
from agent_tutorial.features.builtin_tools import file_tools, search_tools
from agent_tutorial.features.checkpoints import turn_checkpoints
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, text_stream, tool_stream

BASH_COMMAND = "rm c.txt; echo x > d.txt; chmod +x e.sh"
ORIGINAL = {"a.txt": "alpha\n", "c.txt": "gamma\n", "e.sh": "echo hi\n", ".gitignore": "*.log\n"}
UNDO_LINES = [
    "restored  a.txt",
    "removed   b.txt",
    "recreated c.txt",
    "removed   d.txt",
    "restored  e.sh",
]
STORE = Path(".agent_tutorial/checkpoints")


@pytest.fixture(params=["git repository", "plain folder"])
def project(request: pytest.FixtureRequest, workspace: Path) -> Path:
    for name, text in ORIGINAL.items():
        (workspace / name).write_text(text)
    (workspace / "e.sh").chmod(0o644)
    (workspace / "build.log").write_text("old log\n")
    if request.param == "git repository":
        git(workspace, "init", "-q")
        git(workspace, "add", "a.txt", "c.txt", "e.sh", ".gitignore")
        git(workspace, "commit", "-q", "-m", "start")
    return workspace


def git(workspace: Path, *args: str) -> str:
    environment = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", *args], cwd=workspace, env=environment, capture_output=True, text=True, check=True
    )
    return done.stdout


def git_state(workspace: Path) -> dict[str, object]:
    """Everything of the user's `.git` the agent must leave alone, byte for byte."""
    folder = workspace / ".git"
    if not folder.exists():
        return {}
    return {
        "HEAD": (folder / "HEAD").read_bytes(),
        "refs": sorted(
            (str(path.relative_to(folder)), path.read_bytes())
            for path in (folder / "refs").rglob("*")
            if path.is_file()
        ),
        "index": (folder / "index").read_bytes(),
        "objects": sum(1 for path in (folder / "objects").rglob("*") if path.is_file()),
    }


def queue_changing_turn(loopback: LoopbackServer) -> None:
    """One turn: a new file, an edit, bash deleting, creating and chmodding, and a write to
    an ignored file."""
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "b.txt", "content": "beta\n"}),
                ("e1", "edit_file", {"path": "a.txt", "old_text": "alpha", "new_text": "ALPHA"}),
                ("b1", "bash", {"command": BASH_COMMAND}),
                ("b2", "bash", {"command": "echo new log > build.log"}),
            ]
        ),
        text_stream("done"),
    )


def run_turn(run_cli: RunCli, *flags: str) -> None:
    run = run_cli("run", "--chapter", "3", "-y", *flags, "-p", "change things")
    assert run.exit_code == 0, run.stderr


def files(workspace: Path) -> dict[str, str]:
    return {
        path.name: path.read_text()
        for path in sorted(workspace.iterdir())
        if path.is_file() and path.name != "build.log"
    }


def is_executable(path: Path) -> bool:
    return bool(path.stat().st_mode & stat.S_IXUSR)


def test_undo_puts_back_what_the_file_tools_and_bash_changed(
    project: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    before_git = git_state(project)
    queue_changing_turn(loopback)
    run_turn(run_cli)
    assert (project / "a.txt").read_text() == "ALPHA\n"
    assert not (project / "c.txt").exists() and (project / "d.txt").exists()
    assert is_executable(project / "e.sh")

    undo = run_cli("undo")

    assert undo.exit_code == 0, undo.stderr
    assert undo.stdout.splitlines() == UNDO_LINES
    assert files(project) == ORIGINAL
    assert not is_executable(project / "e.sh")
    assert (project / "build.log").read_text() == "new log\n"  # ignored: untouched
    assert git_state(project) == before_git


def test_a_second_undo_goes_further_back_and_then_there_is_nothing_left(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "a.txt").write_text("one\n")
    for number, text in enumerate(["two\n", "three\n"]):
        loopback.queue(
            tool_stream([(f"w{number}", "write_file", {"path": "a.txt", "content": text})]),
            text_stream("done"),
        )
        run_turn(run_cli, *(["--continue"] if number else []))

    assert run_cli("undo").exit_code == 0
    assert (workspace / "a.txt").read_text() == "two\n"
    assert run_cli("undo").exit_code == 0
    assert (workspace / "a.txt").read_text() == "one\n"

    empty = run_cli("undo")
    assert empty.exit_code == 1
    assert "nothing to undo" in empty.stderr
    assert (workspace / "a.txt").read_text() == "one\n"
    listed = run_cli("checkpoints", "list")
    assert [line.endswith("(undone)") for line in listed.stdout.splitlines()[::2]] == [True] * 2
    rows = json.loads(run_cli("checkpoints", "list", "--json").stdout)
    assert [row["undone"] for row in rows] == [True, True]


def test_undo_turns_2_spans_two_runs_of_one_session(
    project: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    before_git = git_state(project)
    (project / "a.txt").write_text("one\n")
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "a.txt", "content": "two\n"})]),
        text_stream("done"),
    )
    run_turn(run_cli)
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "echo new > n.txt; rm a.txt"})]),
        text_stream("done"),
    )
    run_turn(run_cli, "--continue")

    listed = json.loads(run_cli("checkpoints", "list", "--json").stdout)
    assert [row["turn"] for row in listed] == [1, 2]
    assert len({row["session"] for row in listed}) == 1
    undo = run_cli("undo", "--turns", "2")

    assert undo.exit_code == 0, undo.stderr
    assert undo.stdout.splitlines() == ["recreated a.txt", "removed   n.txt"]
    assert (project / "a.txt").read_text() == "one\n"
    assert not (project / "n.txt").exists()
    assert git_state(project) == before_git


def test_a_file_the_user_edited_after_the_turn_stops_undo_unless_forced(
    project: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    before_git = git_state(project)
    (project / "a.txt").write_text("one\n")
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "a.txt", "content": "two\n"}),
                ("w2", "write_file", {"path": "b.txt", "content": "new\n"}),
            ]
        ),
        text_stream("done"),
    )
    run_turn(run_cli)
    (project / "a.txt").write_text("the user's\n")

    refused = run_cli("undo")

    assert refused.exit_code == 1
    assert "a.txt" in refused.stderr and "--force" in refused.stderr
    assert refused.stdout == ""
    assert (project / "a.txt").read_text() == "the user's\n"
    assert (project / "b.txt").exists()  # nothing restored, not even the unconflicted

    forced = run_cli("undo", "--force")
    assert forced.exit_code == 0, forced.stderr
    assert (project / "a.txt").read_text() == "one\n"
    assert not (project / "b.txt").exists()
    assert git_state(project) == before_git


def test_dry_run_prints_the_same_lines_and_changes_nothing(
    project: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    queue_changing_turn(loopback)
    run_turn(run_cli)
    after_turn = files(project)
    store_before = sorted(p for p in (project / STORE).rglob("*") if p.name != "lock")

    dry = run_cli("undo", "--dry-run")

    assert dry.exit_code == 0, dry.stderr
    assert dry.stdout.splitlines() == [*UNDO_LINES, "dry run: nothing changed"]
    assert files(project) == after_turn
    assert sorted(p for p in (project / STORE).rglob("*") if p.name != "lock") == store_before
    assert run_cli("undo").stdout.splitlines() == UNDO_LINES  # still there to undo


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--turns", "0"], "--turns must be at least 1"),
        (["--session", "abcdef12"], "no session id starts with"),
        (["--session", "not-an-id"], "is not a session id"),
        (["--turns", "2"], "has 1 checkpointed turn(s) to undo, not 2"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer, flags: list[str], message: str
) -> None:
    (workspace / "a.txt").write_text("one\n")
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "a.txt", "content": "two\n"})]),
        text_stream("done"),
    )
    run_turn(run_cli)

    bad = run_cli("undo", *flags)

    assert bad.exit_code == 2
    assert message in bad.stderr
    assert "Traceback" not in bad.stderr
    assert (workspace / "a.txt").read_text() == "two\n"
    assert run_cli("undo", "--turns", "1").exit_code == 0  # one past the line: it works


def test_a_turn_that_changes_nothing_leaves_no_checkpoint(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "a.txt").write_text("one\n")
    loopback.queue(tool_stream([("b1", "bash", {"command": "cat a.txt"})]), text_stream("done"))
    run_turn(run_cli)

    listed = run_cli("checkpoints", "list", "--json")

    assert listed.exit_code == 1
    assert "no checkpoints in this project" in listed.stderr


def test_checkpoints_list_names_turn_prompt_and_files(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "b.txt", "content": "new\n"})]),
        text_stream("done"),
    )
    run_turn(run_cli)

    listed = run_cli("checkpoints", "list")

    assert listed.exit_code == 0, listed.stderr
    first, second = listed.stdout.splitlines()
    assert first.startswith("1  ") and first.endswith("  change things")
    assert second.strip() == "b.txt"


def test_pruning_a_session_removes_its_checkpoints(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "b.txt", "content": "x" * 5000})]),
        text_stream("done"),
    )
    run_turn(run_cli)
    objects = workspace / STORE / "objects"
    assert any(objects.rglob("*"))

    pruned = run_cli("sessions", "prune", "--older-than", "0s", "--yes")

    assert pruned.exit_code == 0, pruned.stderr
    assert not [path for path in objects.rglob("*") if path.is_file()]
    assert run_cli("undo").exit_code == 1


@pytest.mark.skipif(sandbox_available() is not None, reason="no sandbox on this system")
def test_a_sandboxed_command_cannot_write_the_store(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "a.txt").write_text("one\n")
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "a.txt", "content": "two\n"})]),
        text_stream("done"),
    )
    run_turn(run_cli)
    store = workspace / STORE
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file() and p.name != "lock"}
    attack = (
        "for f in $(find .agent_tutorial/checkpoints -type f); do echo x > $f; done; "
        "rm -rf .agent_tutorial/checkpoints/sessions; "
        "mkdir -p .agent_tutorial/checkpoints/evil && echo made"
    )
    loopback.queue(tool_stream([("b1", "bash", {"command": attack})]), text_stream("done"))

    run_turn(run_cli, "--continue")

    after = {p: p.read_bytes() for p in store.rglob("*") if p.is_file() and p.name != "lock"}
    assert {p: after[p] for p in before} == before
    assert not (store / "evil").exists()
    assert "Read-only file system" in loopback.requests[-1]["messages"][-1]["content"]


@pytest.mark.skipif(sandbox_available() is not None, reason="no sandbox on this system")
def test_a_sandboxed_command_cannot_read_copies_of_files_the_workspace_no_longer_has(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "credentials.txt").write_text("hunter2-secret\n")
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "rm credentials.txt"})]), text_stream("done")
    )
    run_turn(run_cli)
    look = (
        "python3 -c 'import glob, zlib\n"
        'for path in glob.glob(".agent_tutorial/checkpoints/objects/*/*"):\n'
        '    print(zlib.decompress(open(path, "rb").read()))\''
    )
    loopback.queue(tool_stream([("b1", "bash", {"command": look})]), text_stream("done"))

    run_turn(run_cli, "--continue")

    assert "hunter2" not in loopback.requests[-1]["messages"][-1]["content"]
    assert run_cli("undo").stdout.splitlines() == ["recreated credentials.txt"]


def test_symlinks_are_recorded_as_links_and_put_back_as_links(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "target.txt").write_text("t\n")
    (workspace / "old-link").symlink_to("target.txt")
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "rm old-link; ln -s /etc/passwd new-link"})]),
        text_stream("done"),
    )
    run_turn(run_cli)

    undo = run_cli("undo")

    assert undo.stdout.splitlines() == ["removed   new-link", "recreated old-link"]
    assert (workspace / "old-link").readlink() == Path("target.txt")
    assert not (workspace / "new-link").is_symlink()


def test_a_file_over_the_size_limit_is_left_out_with_one_notice(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / "config.toml").write_text("checkpoint_max_file_bytes = 100\n")
    command = "head -c 100 /dev/zero > at-limit.bin; head -c 101 /dev/zero > over-limit.bin"
    loopback.queue(tool_stream([("b1", "bash", {"command": command})]), text_stream("done"))
    run = run_cli("run", "--chapter", "3", "-y", "-p", "big files")
    assert run.exit_code == 0, run.stderr

    (notice,) = [line for line in run.stderr.splitlines() if "not recorded" in line]
    assert notice == (
        "checkpoint: 1 file(s) over 100 bytes not recorded (undo leaves them as they are): "
        "over-limit.bin"
    )
    undo = run_cli("undo")
    assert undo.stdout.splitlines() == ["removed   at-limit.bin"]
    assert (workspace / "over-limit.bin").exists()


def test_undo_never_writes_through_a_folder_swapped_for_a_symlink(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    outside = workspace.parent / "outside"
    outside.mkdir()
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("mine\n")
    loopback.queue(tool_stream([("b1", "bash", {"command": "rm sub/f.txt"})]), text_stream("done"))
    run_turn(run_cli)
    (workspace / "sub").rmdir()
    (workspace / "sub").symlink_to(outside)

    undo = run_cli("undo", "--force")

    assert undo.exit_code == 1
    assert "not restored: sub/f.txt" in undo.stderr
    assert list(outside.iterdir()) == []


def test_the_state_folder_and_nested_git_folders_are_never_recorded(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "vendor" / ".git").mkdir(parents=True)
    (workspace / "vendor" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    command = "echo changed > vendor/.git/HEAD; echo kept > vendor/code.txt"
    loopback.queue(tool_stream([("b1", "bash", {"command": command})]), text_stream("done"))
    run_turn(run_cli)

    listed = json.loads(run_cli("checkpoints", "list", "--json").stdout)
    undo = run_cli("undo")

    assert listed[0]["files_changed"] == ["vendor/code.txt"]
    assert undo.stdout.splitlines() == ["removed   vendor/code.txt"]
    assert (workspace / "vendor" / ".git" / "HEAD").read_text() == "changed\n"


def test_a_file_the_turn_swapped_for_a_folder_and_back_comes_back(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    (workspace / "f").write_text("a file\n")
    (workspace / "d").mkdir()
    (workspace / "d" / "x.txt").write_text("in a folder\n")
    command = "rm f; mkdir f; echo y > f/y.txt; rm -r d; echo now a file > d"
    loopback.queue(tool_stream([("b1", "bash", {"command": command})]), text_stream("done"))
    run_turn(run_cli)

    undo = run_cli("undo")

    assert undo.exit_code == 0, undo.stderr
    assert undo.stdout.splitlines() == [
        "removed   d",
        "recreated d/x.txt",
        "recreated f",
        "removed   f/y.txt",
    ]
    assert (workspace / "f").read_text() == "a file\n"
    assert (workspace / "d" / "x.txt").read_text() == "in a folder\n"


def test_session_picks_an_older_session_and_neither_command_needs_model_settings(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    for name in ("older.txt", "newer.txt"):
        loopback.queue(
            tool_stream([("w1", "write_file", {"path": name, "content": "x\n"})]),
            text_stream("done"),
        )
        run_turn(run_cli)
    sessions = sorted((workspace / STORE / "sessions").glob("*.jsonl"), key=os.path.getmtime)
    older = sessions[0].stem
    no_model = {"OPENAI_BASE_URL": None, "OPENAI_API_KEY": None, "AGENT_TUTORIAL_MODEL": None}

    listed = run_cli("checkpoints", "list", "--session", older[:4], "--json", env=no_model)
    undo = run_cli("undo", "--session", older, env=no_model)

    assert [row["files_changed"] for row in json.loads(listed.stdout)] == [["older.txt"]]
    assert undo.exit_code == 0, undo.stderr
    assert undo.stdout.splitlines() == ["removed   older.txt"]
    assert (workspace / "newer.txt").exists()


@pytest.mark.parametrize("chapter", range(1, 10))
def test_every_chapter_takes_checkpoints(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer, chapter: int
) -> None:
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "echo new > made.txt"})]), text_stream("done")
    )
    run = run_cli("run", "--chapter", str(chapter), "-y", "-p", "make a file")
    assert run.exit_code == 0, run.stderr

    undo = run_cli("undo")

    assert undo.stdout.splitlines() == ["removed   made.txt"]
    assert not (workspace / "made.txt").exists()


def test_a_chapter_whose_tools_only_read_gets_no_checkpoint_guard(workspace: Path) -> None:
    store = CheckpointStore.in_state_folder(workspace, max_file_bytes=1000)
    reading, writing = ToolRegistry(), ToolRegistry()
    for tool in search_tools(workspace):
        reading.register(tool)
    for tool in file_tools(workspace):
        writing.register(tool)

    assert turn_checkpoints(reading, store, workspace, EventBus()) is None
    assert turn_checkpoints(writing, store, workspace, EventBus()) is not None


def test_what_a_subagent_writes_is_in_its_parent_turn_checkpoint(
    workspace: Path, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    task = {"description": "write", "prompt": "write helper.txt"}
    loopback.queue(
        tool_stream([("t1", "task", task)]),
        tool_stream([("w1", "write_file", {"path": "helper.txt", "content": "h\n"})]),
        text_stream("child done"),
        text_stream("done"),
    )
    run = run_cli("run", "--chapter", "6", "-y", "-p", "delegate")
    assert run.exit_code == 0, run.stderr
    assert (workspace / "helper.txt").exists()

    undo = run_cli("undo")

    assert undo.stdout.splitlines() == ["removed   helper.txt"]
