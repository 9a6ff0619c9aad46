"""Issue 29, item 2: a command the sandbox denied is offered, once and before the model
hears of it, to run outside the sandbox: in `ask` and `accept-edits` on a terminal, never in
`auto` and never without one. `y` runs it unconfined this once; `n` or Esc leave the model
the denial."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.adapters.sandbox import sandbox_available
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.permissions import ApprovalAnswer, PermissionMode, PermissionPolicy
from agent_tutorial.core.sandbox import SandboxPolicy
from agent_tutorial.core.tools import ParsedCall, ToolRegistry, ToolResult
from agent_tutorial.features.bash import BashSettings, bash_tool
from agent_tutorial.features.sandbox_escalation import SandboxEscalation
from agent_tutorial.terminal_keys import ESCAPE
from tests.loopback import LoopbackServer, exchanged, text_stream, tool_stream
from tests.terminal import Terminal
from tests.test_permissions import ScriptedApprover
from tests.test_state_gitignore import git

UNAVAILABLE = sandbox_available()
pytestmark = pytest.mark.skipif(UNAVAILABLE is not None, reason=f"no sandbox: {UNAVAILABLE}")
MakeTerminal = Callable[..., Terminal]


@pytest.fixture
def workspace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The shared fixture's workspace, moved out of /tmp (which a sandboxed command sees as
    its own empty folder), with a folder beside it that the sandbox keeps read-only."""
    home = Path(tempfile.mkdtemp(prefix="escalation-", dir="/var/tmp"))
    root = home / "project"
    for folder in (root, home / "outside"):
        folder.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    yield root
    shutil.rmtree(home)


OUTSIDE_WRITE = "touch ../outside/made"


def escalate(
    workspace: Path, command: str, mode: PermissionMode, approver: ScriptedApprover | None
) -> ToolResult:
    """`command` run in the sandbox through the escalation guard, as the loop runs it."""
    sandbox = SandboxPolicy(
        mode="workspace-write",
        network=False,
        workspace=workspace,
        private_tmp=workspace,
        home=workspace.parent,
    )
    registry = ToolRegistry([bash_tool(workspace, BashSettings(sandbox=sandbox))])
    parsed = registry.parse(tool_call("b1", "bash", f'{{"command": "{command}"}}'))
    assert isinstance(parsed, ParsedCall)
    policy = PermissionPolicy(Workspace(workspace), mode=mode, approver=approver)
    return SandboxEscalation(policy).after_call(parsed, registry.invoke(parsed))


@pytest.mark.parametrize("answer", ["yes", "always"])
@pytest.mark.parametrize("mode", ["ask", "accept-edits"])
def test_yes_runs_a_denied_command_outside_the_sandbox_once(
    workspace: Path, mode: PermissionMode, answer: ApprovalAnswer
) -> None:
    approver = ScriptedApprover(answer)

    result = escalate(workspace, OUTSIDE_WRITE, mode, approver)

    assert (workspace.parent / "outside" / "made").exists()
    assert result.command is not None and result.command.exit_code == 0
    assert not result.sandboxed
    assert [request.subject for request in approver.requests] == [OUTSIDE_WRITE]


def test_no_leaves_the_denial_for_the_model(workspace: Path) -> None:
    result = escalate(workspace, OUTSIDE_WRITE, "ask", ScriptedApprover("no"))

    assert not (workspace.parent / "outside" / "made").exists()
    assert result.command is not None and result.command.sandbox_denied
    assert "[sandbox]" in result.content


def test_auto_mode_never_asks(workspace: Path) -> None:
    approver = ScriptedApprover()  # an answer asked for would fail: there is none

    result = escalate(workspace, OUTSIDE_WRITE, "auto", approver)

    assert result.command is not None and result.command.sandbox_denied
    assert approver.requests == []


def test_without_a_terminal_nobody_is_asked(workspace: Path) -> None:
    result = escalate(workspace, OUTSIDE_WRITE, "ask", None)

    assert result.command is not None and result.command.sandbox_denied


def test_a_failure_that_is_not_a_denial_is_not_offered(workspace: Path) -> None:
    approver = ScriptedApprover()

    result = escalate(workspace, "exit 3", "ask", approver)

    assert result.command is not None and result.command.exit_code == 3
    assert approver.requests == []


@pytest.mark.parametrize("columns", [80, 40])
@pytest.mark.parametrize(("key", "made"), [("y", True), (ESCAPE, False)], ids=["y", "esc"])
def test_a_denied_write_asks_on_the_terminal_and_one_key_answers(
    make_terminal: MakeTerminal,
    loopback: LoopbackServer,
    workspace: Path,
    columns: int,
    key: str,
    made: bool,
) -> None:
    call = [("b1", "bash", {"command": OUTSIDE_WRITE})]
    loopback.queue(tool_stream(call), text_stream("done"))
    terminal = make_terminal("run", "-c", "3", "--permission-mode", "accept-edits", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("make it")
    terminal.wait_for_text("outside the sandbox")
    terminal.wait_for_question()

    terminal.type(key)
    terminal.wait_for_text("done")

    assert (workspace.parent / "outside" / "made").exists() is made
    told = exchanged(loopback.requests[1])[-1]["content"]
    assert ("Read-only file system" in told) is not made


COMMIT = "git add notes.txt && git -c user.name=t -c user.email=t@example.com commit -qm second"


@pytest.mark.parametrize("columns", [80, 40])
def test_a_git_commit_in_accept_edits_runs_outside_after_one_y_and_git_sees_no_session_data(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    """In a repository, the sandbox keeps .git read-only, so `git commit` is denied; one
    `y` commits it. The REPL's first run leaves .agent_tutorial/.gitignore, and git sees
    nothing else of the state folder (sessions, history, checkpoints)."""
    git(workspace, "init", "-q")
    (workspace / "notes.txt").write_text("first\n")
    loopback.queue(tool_stream([("b1", "bash", {"command": COMMIT})]), text_stream("committed"))
    terminal = make_terminal("run", "-c", "3", "--permission-mode", "accept-edits", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("commit the notes")
    terminal.wait_for_question()

    terminal.type("y")
    terminal.wait_for_text("committed")
    terminal.wait_for_prompt()

    assert git(workspace, "log", "--format=%s") == "second\n"
    assert "outside the sandbox" in terminal.flat_text()
    assert git(workspace, "status", "--porcelain", "--untracked-files=all") == (
        "?? .agent_tutorial/.gitignore\n"
    )
    assert list((workspace / ".agent_tutorial" / "sessions").iterdir())  # kept, and ignored
