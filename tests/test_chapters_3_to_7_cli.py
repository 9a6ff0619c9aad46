"""Chapters 3–7 end to end: `agent-tutorial run` with the real openai SDK over real HTTP to
the loopback server, asserting what reaches the disk and what the model reads next."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_tutorial.adapters.sandbox import sandbox_available
from agent_tutorial.bootstrap import AgentDeps, build_agent
from agent_tutorial.config import Settings
from agent_tutorial.core.events import Event, EventBus, PermissionDecided
from agent_tutorial.core.messages import from_wire, tool_call, validate_tool_pairing
from agent_tutorial.core.permissions import ApprovalAnswer, ApprovalRequest
from agent_tutorial.profiles import P03
from agent_tutorial.project import Project
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply
from tests.conftest import RunCli, write_state
from tests.contracts import (
    BLOCKING_HOOK,
    CHILD_PROMPT,
    PLAN,
    SKILL,
    assert_child_starts_fresh,
    assert_plan_reminder_only_in_the_fourth_request,
    tool_names,
    tool_reply_for,
)
from tests.event_log import EventLog
from tests.loopback import LoopbackServer, prompt_text, text_stream, tool_stream

# --- helpers -----------------------------------------------------------------------------


def assert_every_request_paired(loopback: LoopbackServer) -> None:
    for body in loopback.requests:
        validate_tool_pairing([from_wire(message) for message in body["messages"]])


def python_hook(workspace: Path, name: str, source: str) -> str:
    """Writes a hook script into the workspace; returns the command that runs it."""
    (workspace / name).write_text(source)
    return f"{shlex.quote(sys.executable)} {name}"


def hook_table(event: str, command: str, matcher: str | None = None) -> str:
    # TOML literal strings ('…') keep the command's quotes and backslashes as they are.
    lines = [f"[[hooks.{event}]]", f"command = '{command}'"]
    if matcher is not None:
        lines.append(f'matcher = "{matcher}"')
    return "\n".join(lines) + "\n"


# --- chapter 3: permission policy --------------------------------------------------------


def test_ch3_without_a_terminal_write_file_is_denied_and_the_model_reads_why(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream([("w1", "write_file", {"path": "notes.txt", "content": "hello"})]),
        text_stream("I could not write it."),
    )

    result = run_cli("run", "--chapter", "3", "--prompt", "write notes.txt")

    assert result.exit_code == 0, result.stderr
    assert not (workspace / "notes.txt").exists()
    reply = tool_reply_for(loopback, 1, "w1")
    assert reply.startswith("Error [permission_denied]")
    assert "no terminal" in reply
    assert "--permission-mode accept-edits" in reply
    assert "--permission-mode" in result.stderr


def test_ch3_without_a_terminal_bash_is_denied_and_runs_nothing(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "touch made.txt"})]),
        text_stream("Denied."),
    )

    result = run_cli("run", "--chapter", "3", "--prompt", "make a file")

    assert result.exit_code == 0, result.stderr
    assert not (workspace / "made.txt").exists()
    reply = tool_reply_for(loopback, 1, "b1")
    assert reply.startswith("Error [permission_denied]")
    assert "--permission-mode auto" in reply


def test_ch3_accept_edits_lets_write_file_through_but_denies_unsandboxed_bash(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    """Without the sandbox bash can do more than an edit, so accept-edits does not let it
    through (the sandboxed side of this line is in test_sandbox_cli.py)."""
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "src/notes.txt", "content": "line one\nline two\n"}),
                ("b1", "bash", {"command": "touch made.txt"}),
            ]
        ),
        text_stream("Wrote the notes."),
    )

    result = run_cli(
        "run",
        "--chapter",
        "3",
        "--permission-mode",
        "accept-edits",
        "--sandbox",
        "off",
        "--prompt",
        "write notes",
    )

    assert result.exit_code == 0, result.stderr
    assert (workspace / "src" / "notes.txt").read_text() == "line one\nline two\n"
    assert not tool_reply_for(loopback, 1, "w1").startswith("Error [")
    assert tool_reply_for(loopback, 1, "b1").startswith("Error [permission_denied]")
    assert not (workspace / "made.txt").exists()


def test_ch3_auto_mode_still_denies_writes_outside_the_workspace_and_into_protected_dirs(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / ".git").mkdir()
    git_config = workspace / ".git" / "config"
    git_config.write_text("[core]\n\tbare = false\n")
    own_config = write_state(workspace, "config.toml", "max_turns = 10\n")
    loopback.queue(
        tool_stream(
            [
                ("c1", "write_file", {"path": "../x", "content": "escaped"}),
                ("c2", "write_file", {"path": ".git/config", "content": "[core]\n\thooks = x\n"}),
                ("c3", "write_file", {"path": ".agent_tutorial/config.toml", "content": "y=1"}),
                ("c4", "edit_file", {"path": ".git/config", "old_text": "bare", "new_text": "x"}),
            ]
        ),
        text_stream("All refused."),
    )

    result = run_cli("run", "--chapter", "3", "-y", "--prompt", "escape")

    assert result.exit_code == 0, result.stderr
    assert not (workspace.parent / "x").exists()
    assert git_config.read_text() == "[core]\n\tbare = false\n"
    assert own_config.read_text() == "max_turns = 10\n"
    for call_id in ("c1", "c2", "c3", "c4"):
        assert tool_reply_for(loopback, 1, call_id).startswith("Error ["), call_id
    assert "inside the workspace" in tool_reply_for(loopback, 1, "c1")
    assert ".git/" in tool_reply_for(loopback, 1, "c2")
    assert ".agent_tutorial/" in tool_reply_for(loopback, 1, "c3")


def test_ch3_config_rule_allows_git_status_without_a_terminal(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    write_state(
        workspace,
        "config.toml",
        '[[permissions.rules]]\ntool = "bash"\npattern = "^git status"\nbehavior = "allow"\n',
    )
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": "git status --short"}),
                ("b2", "bash", {"command": "touch made.txt"}),
            ]
        ),
        text_stream("Clean."),
    )

    result = run_cli("run", "--trust-project", "--chapter", "3", "--prompt", "status?")

    assert result.exit_code == 0, result.stderr
    assert not tool_reply_for(loopback, 1, "b1").startswith("Error [")
    assert tool_reply_for(loopback, 1, "b2").startswith("Error [permission_denied]")
    assert not (workspace / "made.txt").exists()


TEMPLATE_CONFIG = Path(__file__).parent.parent / ".agent_tutorial.example" / "config.toml"
OLD_TEMPLATE_RULE = (
    '[[permissions.rules]]\ntool = "bash"\npattern = "^git (status|diff|log)"\nbehavior = "allow"\n'
)


def committed_repository(workspace: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], cwd=workspace, check=True)


@pytest.mark.parametrize("rule", ["the rule users copied", "the narrowed template rule"])
def test_ch3_git_log_writing_a_file_through_its_options_is_not_allowed_by_the_template_rule(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, rule: str
) -> None:
    # The attack from issue 27: `git log --output=F` writes any file, and the template's
    # allow rule used to let it through in `ask` mode without a question.
    committed_repository(workspace)
    (workspace / "Makefile").write_text("all:\n\ttrue\n")
    config = OLD_TEMPLATE_RULE if rule == "the rule users copied" else narrowed_template_rule()
    write_state(workspace, "config.toml", config)
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": "git log -1 --format=x --output=Makefile"}),
                ("b2", "bash", {"command": "git log -1 --format=%s"}),
            ]
        ),
        text_stream("Done."),
    )

    result = run_cli("run", "--trust-project", "--chapter", "3", "--prompt", "log?")

    assert result.exit_code == 0, result.stderr
    assert (workspace / "Makefile").read_text() == "all:\n\ttrue\n"
    denied = tool_reply_for(loopback, 1, "b1")
    assert denied.startswith("Error [permission_denied]")
    assert "does not cover it: its option '--output=Makefile' could make it write" in denied
    assert "one" in tool_reply_for(loopback, 1, "b2")


def test_ch3_an_unanchored_rule_does_not_cover_git_run_through_env_with_its_own_config(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    # git -c handed over in GIT_CONFIG_PARAMETERS: `git status` then runs core.fsmonitor. A
    # rule without ^ matches the git status inside; with the sandbox off nothing else stops it.
    committed_repository(workspace)
    rule = '[[permissions.rules]]\ntool = "bash"\npattern = "git status"\nbehavior = "allow"\n'
    write_state(workspace, "config.toml", rule)
    attack = "env GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch ../pwned'\" git status"
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": attack}),
                ("b2", "bash", {"command": "git status --short"}),
            ]
        ),
        text_stream("Done."),
    )

    result = run_cli("run", "--trust-project", "-c", "3", "--sandbox", "off", "-p", "status?")

    assert result.exit_code == 0, result.stderr
    denied = tool_reply_for(loopback, 1, "b1")
    assert denied.startswith("Error [permission_denied]")
    assert "does not cover it: it runs another command through 'env'" in denied
    assert not (workspace.parent / "pwned").exists()
    assert tool_reply_for(loopback, 1, "b2").startswith("?? .agent_tutorial/\n[exit code 0")


@pytest.mark.skipif(sandbox_available() is not None, reason="no sandbox on this system")
def test_ch3_a_command_an_allow_rule_covers_still_runs_in_the_sandbox(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    committed_repository(workspace)
    write_state(workspace, "config.toml", narrowed_template_rule())
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "git log -1 --format=%s"})]), text_stream("ok")
    )

    result = run_cli("run", "--trust-project", "--chapter", "3", "--prompt", "log?")

    assert result.exit_code == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "• bash git log" in line]
    assert "  sandboxed  " in line
    assert "one" in tool_reply_for(loopback, 1, "b1")


def narrowed_template_rule() -> str:
    """The allow rule the template shows, uncommented as a user would."""
    lines = TEMPLATE_CONFIG.read_text().splitlines()
    start = lines.index("# [[permissions.rules]]")
    table = [line.removeprefix("# ") for line in lines[start : start + 4]]
    assert table[-2:] == ['pattern = "^git (status|diff|log)( |$)"', 'behavior = "allow"'], table
    return "\n".join(table) + "\n"


def test_ch3_config_deny_rule_holds_even_in_auto_mode(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "keep.txt").write_text("precious")
    write_state(
        workspace,
        "config.toml",
        '[[permissions.rules]]\ntool = "bash"\npattern = "\\\\brm\\\\b"\nbehavior = "deny"\n',
    )
    loopback.queue(
        tool_stream(
            [("b1", "bash", {"command": "rm keep.txt"}), ("b2", "bash", {"command": "ls"})]
        ),
        text_stream("Kept it."),
    )

    result = run_cli("run", "--chapter", "3", "-y", "--prompt", "clean up")

    assert result.exit_code == 0, result.stderr
    assert (workspace / "keep.txt").read_text() == "precious"
    denied = tool_reply_for(loopback, 1, "b1")
    assert denied.startswith("Error [permission_denied]")
    assert "rule" in denied
    assert "keep.txt" in tool_reply_for(loopback, 1, "b2")


def test_ch3_user_config_deny_rule_survives_project_rules(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "keep.txt").write_text("precious")
    user_config = Path(os.environ["XDG_CONFIG_HOME"]) / "agent-tutorial" / "config.toml"
    user_config.parent.mkdir(parents=True)
    user_config.write_text(
        '[[permissions.rules]]\ntool = "bash"\npattern = "^rm "\nbehavior = "deny"\n'
    )
    write_state(
        workspace,
        "config.toml",
        '[[permissions.rules]]\ntool = "bash"\npattern = "^ls"\nbehavior = "allow"\n',
    )
    loopback.queue(
        tool_stream(
            [("b1", "bash", {"command": "rm keep.txt"}), ("b2", "bash", {"command": "ls"})]
        ),
        text_stream("Kept it."),
    )

    result = run_cli("run", "--trust-project", "--chapter", "3", "--prompt", "clean up")

    assert result.exit_code == 0, result.stderr
    assert (workspace / "keep.txt").read_text() == "precious"
    assert "deny by rule" in tool_reply_for(loopback, 1, "b1")
    assert "keep.txt" in tool_reply_for(loopback, 1, "b2")


class EventCheckingApprover:
    """Says yes, remembering which events had been emitted when it was asked."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.seen_when_asked: list[Event] = []

    def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.seen_when_asked = list(self.log.events)
        return "yes"


def test_ch3_the_question_is_announced_before_the_user_is_asked(workspace: Path) -> None:
    # The terminal renderer stops its spinner on this event; without it the spinner
    # redraws over the "Allow?" prompt.
    log = EventLog()
    approver = EventCheckingApprover(log)
    model = ScriptedModel(
        [tool_reply(tool_call("b1", "bash", '{"command": "touch made.txt"}')), text_reply("ok")]
    )
    deps = AgentDeps(
        model=model,
        project=Project.at(workspace),
        settings=Settings(model="scripted"),
        approver=approver,
        events=EventBus([log]),
    )

    build_agent(P03, deps).runner.run("make a file")

    decisions = [e for e in approver.seen_when_asked if isinstance(e, PermissionDecided)]
    assert [(d.tool, d.subject, d.decision) for d in decisions] == [
        ("bash", "touch made.txt", "ask")
    ]
    assert (workspace / "made.txt").exists()


# --- chapter 4: hooks --------------------------------------------------------------------


def test_ch4_config_hook_exiting_2_blocks_bash_and_its_stderr_reaches_the_model(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    command = python_hook(workspace, "guard.py", BLOCKING_HOOK)
    write_state(workspace, "config.toml", hook_table("PreToolUse", command, matcher="bash"))
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": "touch made.txt"}),
                ("b2", "bash", {"command": "echo still-allowed"}),
            ]
        ),
        text_stream("The hook blocked it."),
    )

    result = run_cli("run", "--trust-project", "--chapter", "4", "-y", "--prompt", "make a file")

    assert result.exit_code == 0, result.stderr
    assert not (workspace / "made.txt").exists()
    blocked = tool_reply_for(loopback, 1, "b1")
    assert blocked.startswith("Error [hook_blocked]")
    assert "no new files today: touch is blocked by guard.py" in blocked
    assert "still-allowed" in tool_reply_for(loopback, 1, "b2")


def test_ch4_post_tool_use_hook_adds_context_to_the_result(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "notes.md").write_text("# Notes\n")
    command = python_hook(
        workspace,
        "context.py",
        'import json\nprint(json.dumps({"additional_context": "notes.md is generated"}))\n',
    )
    write_state(workspace, "config.toml", hook_table("PostToolUse", command, matcher="read_file"))
    loopback.queue(
        tool_stream([("r1", "read_file", {"path": "notes.md"})]),
        text_stream("Read it."),
    )

    result = run_cli("run", "--trust-project", "--chapter", "4", "--prompt", "read notes")

    assert result.exit_code == 0, result.stderr
    reply = tool_reply_for(loopback, 1, "r1")
    assert "# Notes" in reply
    assert reply.endswith("[hook context] notes.md is generated")


def test_ch4_broken_hook_is_a_hook_execution_error_and_the_run_finishes(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    command = python_hook(
        workspace, "broken.py", 'import sys\nprint("boom", file=sys.stderr)\nsys.exit(1)\n'
    )
    write_state(workspace, "config.toml", hook_table("PreToolUse", command))
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "touch made.txt"})]),
        text_stream("The hook is broken."),
    )

    result = run_cli("run", "--trust-project", "--chapter", "4", "-y", "--prompt", "make a file")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "The hook is broken."
    assert not (workspace / "made.txt").exists()
    reply = tool_reply_for(loopback, 1, "b1")
    assert reply.startswith("Error [hook_execution_error]")
    assert "boom" in reply
    assert "Traceback" not in result.stderr


# --- chapter 5: todo planning ------------------------------------------------------------


def test_ch5_reminder_comes_after_three_tool_rounds_only_in_that_request(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    loopback.queue(
        *(tool_stream([(f"g{n}", "glob", {"pattern": "*.py"})]) for n in (1, 2, 3)),
        tool_stream([("t1", "todo_write", PLAN)]),
        tool_stream([("g4", "glob", {"pattern": "*.md"})]),
        text_stream("Planned."),
    )

    result = run_cli("run", "--chapter", "5", "--prompt", "look around")

    assert result.exit_code == 0, result.stderr
    assert_plan_reminder_only_in_the_fourth_request(loopback.requests)
    assert_every_request_paired(loopback)


def test_ch5_plan_is_shown_on_stderr_when_it_changes(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(tool_stream([("t1", "todo_write", PLAN)]), text_stream("Planned."))

    result = run_cli("run", "--chapter", "5", "--prompt", "plan it")

    assert result.exit_code == 0, result.stderr
    assert "Plan:\n[~] Look around" in result.stderr
    assert result.stdout.strip() == "Planned."


# --- chapter 6: subagents ----------------------------------------------------------------


def test_ch6_child_starts_fresh_and_the_parent_receives_its_answer(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    loopback.queue(
        tool_stream(
            [("task1", "task", {"description": "Count Python files", "prompt": CHILD_PROMPT})]
        ),  # parent
        tool_stream([("child-g1", "glob", {"pattern": "**/*.py"})]),  # child
        text_stream("There is 1 Python file: a.py."),  # child's final answer
        text_stream("The helper found one Python file."),  # parent
    )

    result = run_cli("run", "--chapter", "6", "--prompt", "PARENT-SECRET how many files?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "The helper found one Python file."
    parent_first, child_first, child_second, parent_last = loopback.requests
    assert_child_starts_fresh(
        parent_first, [child_first, child_second], CHILD_PROMPT, "PARENT-SECRET"
    )
    assert "a.py" in tool_reply_for(loopback, 2, "child-g1")
    assert "PARENT-SECRET" in str(parent_last["messages"])
    assert tool_reply_for(loopback, 3, "task1") == "There is 1 Python file: a.py."
    assert_every_request_paired(loopback)


# --- chapter 7: skills -------------------------------------------------------------------


def test_ch7_catalog_is_in_the_system_prompt_and_load_skill_returns_the_body(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    skill_dir = workspace / "skills" / "release-notes"
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(SKILL)
    loopback.queue(
        tool_stream([("s1", "load_skill", {"name": "release-notes"})]),
        text_stream("Loaded."),
    )

    result = run_cli("run", "--chapter", "7", "--prompt", "write release notes")

    assert result.exit_code == 0, result.stderr
    system_prompt = prompt_text(loopback.requests[0])
    assert "- release-notes: How this team writes release notes." in system_prompt
    assert "BODY-MARKER-42" not in str(loopback.requests[0]["messages"])
    assert tool_names(loopback.requests[0])[-1] == "load_skill"
    body = tool_reply_for(loopback, 1, "s1")
    assert "Group entries under Added, Changed and Fixed; BODY-MARKER-42." in body
    assert "description:" not in body


@pytest.mark.parametrize("chapter", [3, 4, 5, 6, 7])
def test_tools_offered_grow_one_chapter_at_a_time(
    run_cli: RunCli, loopback: LoopbackServer, chapter: int
) -> None:
    loopback.queue(text_stream("ok"))

    run_cli("run", "--chapter", str(chapter), "--prompt", "hi")

    base = ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]
    added = {5: ["todo_write"], 6: ["todo_write", "task"], 7: ["todo_write", "task", "load_skill"]}
    assert tool_names(loopback.requests[0]) == base + added.get(chapter, [])


def test_ch6_json_usage_counts_the_childs_model_calls(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        tool_stream(
            [("task1", "task", {"description": "Say hi", "prompt": CHILD_PROMPT})], usage=(100, 1)
        ),
        text_stream("child answer", usage=(20, 2)),
        text_stream("parent answer", usage=(300, 3)),
    )

    result = run_cli("run", "-c", "6", "-p", "delegate", "--output-format", "json")

    assert json.loads(result.stdout)["usage"] == {
        "prompt_tokens": 420,
        "completion_tokens": 6,
        "total_tokens": 426,
        "redactions": 0,
    }


def test_ch7_subagent_sees_the_skill_catalog_but_no_guidance_for_tools_it_lacks(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    skill_dir = workspace / "skills" / "release-notes"
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text(SKILL)
    loopback.queue(
        tool_stream([("task1", "task", {"description": "Draft notes", "prompt": CHILD_PROMPT})]),
        text_stream("child done"),
        text_stream("parent done"),
    )

    result = run_cli("run", "--chapter", "7", "--prompt", "delegate")

    assert result.exit_code == 0, result.stderr
    child_system = prompt_text(loopback.requests[1])
    assert "- release-notes: How this team writes release notes." in child_system
    assert "load_skill" in tool_names(loopback.requests[1])
    assert "todo_write" not in child_system
    assert "Delegate" not in child_system
