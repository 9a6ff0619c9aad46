"""Chapter 3: the permission policy, its hard boundaries, and the terminal approval prompt."""

from __future__ import annotations

import io
import itertools
import re
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from pydantic import BaseModel, ValidationError
from rich.console import Console

from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.approval import (
    PROMPT,
    PROMPT_WITH_VIEW,
    TerminalApprover,
    at_line_end,
    longest_fitting_prefix,
)
from agent_tutorial.core.loop import AgentRunner
from agent_tutorial.core.messages import ToolMessage, tool_call, validate_tool_pairing
from agent_tutorial.core.permissions import (
    RULE_MATCH_TIMEOUT_S,
    ApprovalAnswer,
    ApprovalRequest,
    Decision,
    DecisionRecord,
    DeclinedWithInstructions,
    PermissionPolicy,
    PermissionRule,
    merge_decisions,
)
from agent_tutorial.core.sandbox import SandboxMode, SandboxPolicy
from agent_tutorial.core.tools import (
    FileChange,
    ParsedCall,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    tool_success,
)
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply

# --- small real tools: one per effect ---------------------------------------------------


class PathInput(BaseModel):
    path: str
    content: str = ""


class CommandInput(BaseModel):
    command: str


def _read(arguments: PathInput) -> ToolResult:
    return tool_success(Path(arguments.path).read_text())


def _write(arguments: PathInput) -> ToolResult:
    Path(arguments.path).write_text(arguments.content)
    return tool_success(f"wrote {arguments.path}")


def _run(arguments: CommandInput) -> ToolResult:
    return tool_success(f"ran {arguments.command}")


def make_tools() -> ToolRegistry:
    return ToolRegistry(
        [
            ToolDefinition("read_file", "Read a file.", PathInput, _read, "read", "path"),
            ToolDefinition("write_file", "Write a file.", PathInput, _write, "write", "path"),
            ToolDefinition("bash", "Run a command.", CommandInput, _run, "execute", "command"),
        ]
    )


def parse(name: str, call_id: str = "call_1", **arguments: object) -> ParsedCall:
    parsed = make_tools().parse(tool_call(call_id, name, orjson.dumps(arguments).decode()))
    assert isinstance(parsed, ParsedCall), parsed
    return parsed


def sandboxed_bash(
    workspace: Path, command: str, mode: SandboxMode = "workspace-write", *, network: bool = False
) -> ParsedCall:
    """A bash call whose tool runs in a sandbox of `mode` (only its description matters to
    the policy; nothing runs)."""
    policy = SandboxPolicy(
        mode=mode, network=network, workspace=workspace, private_tmp=workspace, home=workspace
    )
    tool = ToolDefinition(
        "bash", "Run a command.", CommandInput, _run, "execute", "command", sandbox=policy
    )
    parsed = ToolRegistry([tool]).parse(
        tool_call("call_1", "bash", orjson.dumps({"command": command}).decode())
    )
    assert isinstance(parsed, ParsedCall), parsed
    return parsed


class ScriptedApprover:
    """Answers approval requests from a fixed list and records what it was asked."""

    def __init__(self, *answers: ApprovalAnswer) -> None:
        self.answers = list(answers)
        self.requests: list[ApprovalRequest] = []

    def approve(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.requests.append(request)
        return self.answers.pop(0)


# --- merging decisions ------------------------------------------------------------------

DECISIONS: tuple[Decision, ...] = ("allow", "ask", "deny")


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ("allow", "allow", "allow"),
        ("allow", "ask", "ask"),
        ("allow", "deny", "deny"),
        ("ask", "allow", "ask"),
        ("ask", "ask", "ask"),
        ("ask", "deny", "deny"),
        ("deny", "allow", "deny"),
        ("deny", "ask", "deny"),
        ("deny", "deny", "deny"),
    ],
)
def test_merge_of_two_decisions_keeps_the_strictest(
    first: Decision, second: Decision, expected: Decision
) -> None:
    assert merge_decisions(first, second) == expected


def test_merge_of_any_number_of_decisions_is_deny_then_ask_then_allow() -> None:
    for size in range(1, 5):
        for combination in itertools.product(DECISIONS, repeat=size):
            expected = next(d for d in ("deny", "ask", "allow") if d in combination)
            assert merge_decisions(*combination) == expected, combination


def test_merge_of_no_decisions_is_allow() -> None:
    assert merge_decisions() == "allow"


# --- defaults and modes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "tool", "expected"),
    [
        ("ask", "read_file", "allow"),
        ("ask", "write_file", "ask"),
        ("ask", "bash", "ask"),
        ("accept-edits", "read_file", "allow"),
        ("accept-edits", "write_file", "allow"),
        ("accept-edits", "bash", "ask"),
        ("auto", "read_file", "allow"),
        ("auto", "write_file", "allow"),
        ("auto", "bash", "allow"),
    ],
)
def test_mode_default_for_each_effect(workspace: Path, mode: str, tool: str, expected: str) -> None:
    policy = PermissionPolicy(Workspace(workspace), mode=mode)  # type: ignore[arg-type]
    arguments = {"command": "ls"} if tool == "bash" else {"path": "notes.txt"}
    record = policy.decide(parse(tool, **arguments))
    assert (record.decision, record.source) == (expected, "default")


@pytest.mark.parametrize(
    ("mode", "tool", "reason"),
    [
        ("ask", "read_file", "read tools are allowed in permission mode 'ask'"),
        ("ask", "write_file", "write tools need approval in permission mode 'ask'"),
        ("accept-edits", "bash", "execute tools need approval in permission mode 'accept-edits'"),
        ("auto", "bash", "execute tools are allowed in permission mode 'auto'"),
    ],
)
def test_a_mode_default_says_which_effect_and_mode_decided(
    workspace: Path, mode: str, tool: str, reason: str
) -> None:
    policy = PermissionPolicy(Workspace(workspace), mode=mode)  # type: ignore[arg-type]
    arguments = {"command": "ls"} if tool == "bash" else {"path": "notes.txt"}

    assert policy.decide(parse(tool, **arguments)).reason == reason


@pytest.mark.parametrize(
    ("permission_mode", "sandbox_mode", "network", "expected"),
    [
        ("ask", "workspace-write", False, "ask"),
        ("accept-edits", "workspace-write", False, "allow"),
        ("accept-edits", "read-only", False, "allow"),
        ("accept-edits", "workspace-write", True, "ask"),
        ("accept-edits", "off", False, "ask"),
        ("auto", "workspace-write", False, "allow"),
        ("auto", "off", False, "allow"),
    ],
)
def test_a_sandboxed_command_is_an_edit_in_accept_edits_mode_and_asks_elsewhere(
    workspace: Path,
    permission_mode: str,
    sandbox_mode: SandboxMode,
    network: bool,
    expected: Decision,
) -> None:
    # With the network on, a command can send the workspace anywhere: more than an edit.
    policy = PermissionPolicy(Workspace(workspace), mode=permission_mode)  # type: ignore[arg-type]

    record = policy.decide(sandboxed_bash(workspace, "make", sandbox_mode, network=network))

    assert (record.decision, record.source) == (expected, "default")


def test_accept_edits_says_the_sandbox_is_why_a_command_runs(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace), mode="accept-edits")

    record = policy.decide(sandboxed_bash(workspace, "make"))

    assert record.reason == (
        "sandboxed execute tools (workspace-write, network off) are allowed in permission "
        "mode 'accept-edits': they can change no more than an edit can"
    )


def test_a_rule_still_decides_over_the_sandbox_in_accept_edits_mode(workspace: Path) -> None:
    rule = PermissionRule(tool="bash", pattern=r"\bgit push\b", behavior="ask")
    policy = PermissionPolicy(Workspace(workspace), mode="accept-edits", rules=[rule])

    assert policy.decide(sandboxed_bash(workspace, "git push")).decision == "ask"
    assert policy.decide(sandboxed_bash(workspace, "git status")).decision == "allow"


def test_unknown_mode_is_rejected_at_construction(workspace: Path) -> None:
    expected = "permission mode must be one of ('ask', 'accept-edits', 'auto'), got 'yolo'"
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        PermissionPolicy(Workspace(workspace), mode="yolo")  # type: ignore[arg-type]


# --- rules ----------------------------------------------------------------------------------


def test_allow_rule_lifts_the_ask_for_matching_commands_only(workspace: Path) -> None:
    rule = PermissionRule(tool="bash", pattern="^git (status|diff|log)", behavior="allow")
    policy = PermissionPolicy(Workspace(workspace), rules=[rule])
    assert policy.decide(parse("bash", command="git status --short")).decision == "allow"
    assert policy.decide(parse("bash", command="git push")).decision == "ask"


def test_deny_rule_still_applies_in_auto_mode(workspace: Path) -> None:
    rule = PermissionRule(tool="bash", pattern=r"\brm\b", behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])
    record = policy.decide(parse("bash", command="rm -rf build"))
    assert (record.decision, record.source) == ("deny", "rule")
    assert "rm" in record.reason


def test_ask_rule_makes_a_read_ask(workspace: Path) -> None:
    rule = PermissionRule(tool="read_file", pattern=r"\.env$", behavior="ask")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])
    assert policy.decide(parse("read_file", path="config/.env")).decision == "ask"
    assert policy.decide(parse("read_file", path="README.md")).decision == "allow"


def test_rule_without_pattern_covers_every_call_of_its_tool(workspace: Path) -> None:
    policy = PermissionPolicy(
        Workspace(workspace), rules=[PermissionRule(tool="bash", behavior="allow")]
    )
    assert policy.decide(parse("bash", command="make test")).decision == "allow"
    assert policy.decide(parse("write_file", path="a.txt")).decision == "ask"


def test_star_rule_covers_every_tool(workspace: Path) -> None:
    rule = PermissionRule(tool="*", pattern="secret", behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])
    assert policy.decide(parse("read_file", path="secret.txt")).decision == "deny"
    assert policy.decide(parse("bash", command="cat secret.txt")).decision == "deny"
    assert policy.decide(parse("bash", command="ls")).decision == "allow"


def test_path_rule_also_matches_the_normalised_workspace_path(workspace: Path) -> None:
    rule = PermissionRule(tool="write_file", pattern="^secrets/", behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])
    for spelling in (
        "secrets/key",
        "./secrets/key",
        "src/../secrets/key",
        str(workspace / "secrets/key"),
    ):
        assert policy.decide(parse("write_file", path=spelling)).decision == "deny", spelling


def test_strictest_of_several_matching_rules_wins(workspace: Path) -> None:
    rules = [
        PermissionRule(tool="bash", pattern="^git", behavior="allow"),
        PermissionRule(tool="bash", pattern="push", behavior="deny"),
    ]
    policy = PermissionPolicy(Workspace(workspace), rules=rules)
    record = policy.decide(parse("bash", command="git push --force"))
    assert record.decision == "deny"
    assert "push" in record.reason


def test_path_allow_rule_does_not_allow_a_path_that_leaves_its_prefix_by_dotdot(
    workspace: Path,
) -> None:
    # `docs/../src/x` starts with `docs/` as written; the rule is held to the real path.
    (workspace / "docs").mkdir()
    rule = PermissionRule(tool="write_file", pattern="^docs/", behavior="allow")
    policy = PermissionPolicy(Workspace(workspace), rules=[rule])

    assert policy.decide(parse("write_file", path="docs/../src/x")).decision == "ask"
    assert policy.decide(parse("write_file", path="docs/x")).decision == "allow"


@pytest.mark.parametrize("separator", ["\n", "\r", "\r\n"])
def test_bash_allow_rule_does_not_cover_a_second_line(workspace: Path, separator: str) -> None:
    # A newline runs a second command; a carriage return can hide it on the terminal.
    rule = PermissionRule(tool="bash", pattern="^git status", behavior="allow")
    policy = PermissionPolicy(Workspace(workspace), rules=[rule])

    chained = policy.decide(parse("bash", command=f"git status{separator}rm -rf ~"))

    assert (chained.decision, chained.source) == ("ask", "default")


@pytest.mark.parametrize("command", ["git push; ls", "ls; git push", "ls;git push --force"])
def test_ask_rule_in_auto_mode_still_asks_for_a_chained_command(
    workspace: Path, command: str
) -> None:
    # Chaining narrows only what an allow rule covers: an ask rule applies to any part.
    rule = PermissionRule(tool="bash", pattern=r"(^|;\s*)git push", behavior="ask")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])

    record = policy.decide(parse("bash", command=command))

    assert (record.decision, record.source) == ("ask", "rule")
    assert policy.decide(parse("bash", command="ls; git pull")).decision == "allow"


TEMPLATE_RULE = PermissionRule(tool="bash", pattern="^git (status|diff|log)", behavior="allow")
"""The template's example before it was narrowed: users copied it, so it must stay safe."""


@pytest.mark.parametrize(
    "command",
    [
        "git log -1 --format=x --output=Makefile",
        "git log -1 --output Makefile",
        "git log --outp=Makefile",
        "git diff --output-directory=out",
        "git -c core.pager=sh log",
        "git log ${X:---output=Makefile}",
        "git log *",
    ],
)
def test_the_template_allow_rule_does_not_cover_a_command_that_writes_through_its_options(
    workspace: Path, command: str
) -> None:
    policy = PermissionPolicy(Workspace(workspace), rules=[TEMPLATE_RULE])

    record = policy.decide(parse("bash", command=command))

    assert (record.decision, record.source) == ("ask", "default")


def test_the_question_says_why_the_allow_rule_does_not_cover_the_command(
    workspace: Path,
) -> None:
    policy = PermissionPolicy(Workspace(workspace), rules=[TEMPLATE_RULE])

    record = policy.decide(parse("bash", command="git log --output=Makefile"))

    assert record.reason == (
        "execute tools need approval in permission mode 'ask'; "
        "rule tool='bash' pattern='^git (status|diff|log)' behavior='allow' does not cover "
        "it: its option '--output=Makefile' could make it write a file or obey other settings"
    )


@pytest.mark.parametrize(
    "command",
    ["git push", "git push --output=x", "git log"],  # no allow rule matches / it is covered
)
def test_the_question_names_no_rule_that_would_not_have_covered_it_anyway(
    workspace: Path, command: str
) -> None:
    rules = [TEMPLATE_RULE, PermissionRule(tool="read_file", behavior="allow")]
    policy = PermissionPolicy(Workspace(workspace), rules=rules)

    record = policy.decide(parse("bash", command=command))

    assert "does not cover" not in record.reason


def test_a_deny_rule_whose_pattern_matches_is_not_named_as_not_covering(
    workspace: Path,
) -> None:
    rule = PermissionRule(tool="bash", pattern="^git", behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])

    record = policy.decide(parse("bash", command="git log; ls"))

    assert (record.decision, record.source) == ("deny", "rule")
    assert "does not cover" not in record.reason


def test_an_uncovered_write_is_still_a_plain_default_question(workspace: Path) -> None:
    # A path is never a command: the rule misses the real path (`git log --output=x`), and
    # that the written path would not be a plain command is no reason to name it.
    rule = PermissionRule(tool="*", pattern=r"^\./git", behavior="allow")
    policy = PermissionPolicy(Workspace(workspace), rules=[rule])

    record = policy.decide(parse("write_file", path="./git log --output=x"))

    assert record.reason == "write tools need approval in permission mode 'ask'"


@pytest.mark.parametrize("command", ["git log", "git log -1 --format=%h", "git diff --stat"])
def test_the_template_allow_rule_still_covers_a_plain_git_command(
    workspace: Path, command: str
) -> None:
    policy = PermissionPolicy(Workspace(workspace), rules=[TEMPLATE_RULE])

    assert policy.decide(parse("bash", command=command)).decision == "allow"


NARROWED_TEMPLATE_RULE = PermissionRule(
    tool="bash", pattern="^git (status|diff|log)( |$)", behavior="allow"
)
"""The template's example now (test_chapters_3_to_7_cli.py checks the template says so;
this file runs under `make mutate`, where the template is not copied)."""


@pytest.mark.parametrize(
    ("command", "decision"),
    [
        ("git status", "allow"),
        ("git diff --stat", "allow"),
        ("git log -3", "allow"),
        ("git difftool --extcmd=sh", "ask"),
        ("git diff-tree -p HEAD", "ask"),
        ("git logx", "ask"),
    ],
)
def test_the_narrowed_template_rule_names_whole_subcommands(
    workspace: Path, command: str, decision: Decision
) -> None:
    policy = PermissionPolicy(Workspace(workspace), rules=[NARROWED_TEMPLATE_RULE])

    assert policy.decide(parse("bash", command=command)).decision == decision


def test_a_deny_rule_still_applies_to_a_command_an_allow_rule_cannot_cover(
    workspace: Path,
) -> None:
    # Only allow rules are held to plain commands; a deny rule sees every spelling.
    rule = PermissionRule(tool="bash", pattern="--output", behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule, TEMPLATE_RULE])

    assert policy.decide(parse("bash", command="git log --output=x")).decision == "deny"
    assert policy.decide(parse("bash", command="git log $(x) --output=y")).decision == "deny"


CATASTROPHIC = "^(a|a)*$"  # the regex module defuses `(a+)+$`, not this one
SLOW_SUBJECT = "a" * 200 + "!"


@pytest.mark.parametrize("behavior", ["deny", "ask"])
def test_a_narrowing_rule_whose_regex_times_out_counts_as_matching(behavior: Decision) -> None:
    rule = PermissionRule(tool="bash", pattern=CATASTROPHIC, behavior=behavior)

    assert rule.matches("bash", [SLOW_SUBJECT], timeout_s=0.05)
    assert not rule.matches("bash", ["b"], timeout_s=0.05)


def test_an_allow_rule_whose_regex_times_out_counts_as_not_matching() -> None:
    rule = PermissionRule(tool="bash", pattern=CATASTROPHIC, behavior="allow")

    assert not rule.matches("bash", [SLOW_SUBJECT], timeout_s=0.05)
    assert rule.matches("bash", ["aaa"], timeout_s=0.05)


def test_a_rule_shares_its_time_between_the_subjects() -> None:
    # Two subjects that each take the whole budget still cost about one budget.
    rule = PermissionRule(tool="read_file", pattern=CATASTROPHIC, behavior="deny")
    started = time.process_time()

    assert rule.matches("read_file", [SLOW_SUBJECT, SLOW_SUBJECT], timeout_s=0.2)

    assert time.process_time() - started < 0.35


def test_a_catastrophic_deny_rule_costs_at_most_a_second_and_still_denies(
    workspace: Path,
) -> None:
    # The real budget, through the policy: the attack from the issue (seconds per
    # character) now ends within RULE_MATCH_TIMEOUT_S, and the call is denied.
    rule = PermissionRule(tool="bash", pattern=CATASTROPHIC, behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])
    started = time.process_time()  # the regex module's clock: processor time, not the wall's

    record = policy.decide(parse("bash", command=SLOW_SUBJECT))

    assert (record.decision, record.source) == ("deny", "rule")
    assert RULE_MATCH_TIMEOUT_S * 0.9 <= time.process_time() - started < 1.0


def test_a_rule_over_no_subjects_matches_nothing() -> None:
    rule = PermissionRule(tool="bash", pattern="x", behavior="deny")

    assert not rule.matches("bash", [])


def test_a_rule_whose_tool_differs_is_never_searched(workspace: Path) -> None:
    rule = PermissionRule(tool="read_file", pattern=CATASTROPHIC, behavior="deny")

    assert not rule.matches("bash", [SLOW_SUBJECT], timeout_s=0.05)


@pytest.mark.parametrize(
    ("rule", "described"),
    [
        (PermissionRule(tool="bash", behavior="allow"), "rule tool='bash' behavior='allow'"),
        (
            PermissionRule(tool="*", pattern="^rm ", behavior="deny"),
            "rule tool='*' pattern='^rm ' behavior='deny'",
        ),
    ],
)
def test_a_rule_describes_itself_as_it_was_written(rule: PermissionRule, described: str) -> None:
    assert rule.describe() == described


def test_a_read_rule_also_matches_the_normalised_workspace_path(workspace: Path) -> None:
    rule = PermissionRule(tool="read_file", pattern="^secrets/", behavior="deny")
    policy = PermissionPolicy(Workspace(workspace), rules=[rule])

    assert policy.decide(parse("read_file", path="./secrets/key")).decision == "deny"
    assert policy.decide(parse("read_file", path="src/../secrets/key")).decision == "deny"


def test_a_bash_command_is_never_looked_up_as_a_path(workspace: Path) -> None:
    # A word longer than a file name may be would make the lookup fail (ENAMETOOLONG).
    policy = PermissionPolicy(Workspace(workspace), mode="auto")

    assert policy.decide(parse("bash", command="echo " + "a" * 300)).decision == "allow"


def test_a_write_with_an_empty_path_is_looked_up_as_the_workspace_itself(workspace: Path) -> None:
    # The boundary check needs a location for every write: "" is the workspace root.
    policy = PermissionPolicy(Workspace(workspace))

    record = policy.decide(parse("write_file", path=""))

    assert (record.decision, record.source) == ("ask", "default")


def test_rule_with_a_bad_regex_is_a_clear_config_error() -> None:
    with pytest.raises(ValidationError, match=r"'\(unclosed' is not a valid regex"):
        PermissionRule(tool="bash", pattern="(unclosed", behavior="allow")


def test_rule_with_an_unknown_behavior_is_rejected() -> None:
    with pytest.raises(ValidationError, match="behavior"):
        PermissionRule.model_validate({"tool": "bash", "behavior": "maybe"})


def test_rules_load_from_the_documented_toml() -> None:
    text = """
[[permissions.rules]]
tool = "bash"
pattern = "^git (status|diff|log)"   # regex on the command / path
behavior = "allow"
"""
    (table,) = tomllib.loads(text)["permissions"]["rules"]
    assert PermissionRule.model_validate(table) == PermissionRule(
        tool="bash", pattern="^git (status|diff|log)", behavior="allow"
    )


# --- hard boundaries --------------------------------------------------------------------


def _escaping_paths(workspace: Path) -> list[str]:
    (workspace / ".git").mkdir()
    (workspace / "docs").mkdir()
    (workspace / "docs" / "sneaky").symlink_to(workspace / ".git")
    (workspace / "config-link").symlink_to(workspace / ".agent_tutorial")
    return [
        "../x",
        str(workspace.parent / "outside.txt"),
        "/etc/passwd",
        ".git/config",
        "sub/../.git/hooks/pre-commit",
        ".agent_tutorial/config.toml",
        "docs/sneaky/config",
        "config-link/config.toml",
        "vendor/lib/.git/config",
        ".GIT/config",
    ]


@pytest.mark.parametrize("mode", ["ask", "accept-edits", "auto"])
def test_writes_outside_or_into_protected_directories_are_denied_in_every_mode(
    workspace: Path, mode: str
) -> None:
    allow_everything = PermissionRule(tool="*", behavior="allow")
    approver = ScriptedApprover()  # must never be asked
    policy = PermissionPolicy(
        Workspace(workspace),
        mode=mode,  # type: ignore[arg-type]
        rules=[allow_everything],
        approver=approver,
    )
    for path in _escaping_paths(workspace):
        record = policy.decide(parse("write_file", path=path))
        assert (record.decision, record.source) == ("deny", "boundary"), path
        assert policy.before_call(parse("write_file", path=path)) == ToolResult(
            content=f"Error [permission_denied]: {record.reason}",
            is_error=True,
            error_code="permission_denied",
        )
    assert approver.requests == []


def test_boundary_denial_says_which_directory_is_protected(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace), mode="auto")
    record = policy.decide(parse("write_file", path=".agent_tutorial/config.toml"))
    assert ".agent_tutorial/" in record.reason
    assert "no mode or rule" in record.reason


def test_remembered_approval_does_not_lift_a_boundary(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace), approver=ScriptedApprover("always"))
    assert policy.before_call(parse("write_file", path="ok.txt")) == parse(
        "write_file", path="ok.txt"
    )
    assert policy.decide(parse("write_file", path=".git/config")).decision == "deny"


def test_reading_inside_git_is_not_a_write_and_stays_allowed(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace))
    assert policy.decide(parse("read_file", path=".git/config")).decision == "allow"


def test_a_write_inside_the_workspace_is_allowed_in_auto_mode(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace), mode="auto")
    assert policy.decide(parse("write_file", path="src/git/notes.txt")).decision == "allow"


# --- asking -------------------------------------------------------------------------------


def test_without_an_approver_a_write_is_denied_and_the_model_learns_the_flag(
    workspace: Path,
) -> None:
    policy = PermissionPolicy(Workspace(workspace))
    result = policy.before_call(parse("write_file", path="a.txt", content="x"))
    assert isinstance(result, ToolResult)
    assert result.error_code == "permission_denied"
    assert "no terminal" in result.content
    assert "--permission-mode accept-edits" in result.content


def test_without_an_approver_bash_points_to_auto_mode(workspace: Path) -> None:
    record = PermissionPolicy(Workspace(workspace)).authorize(parse("bash", command="make"))
    assert (record.decision, record.source) == ("deny", "no-terminal")
    assert "--permission-mode auto" in record.reason
    assert "accept-edits" not in record.reason


def test_without_an_approver_a_sandboxed_command_points_to_accept_edits(workspace: Path) -> None:
    record = PermissionPolicy(Workspace(workspace)).authorize(sandboxed_bash(workspace, "make"))

    assert (record.decision, record.source) == ("deny", "no-terminal")
    assert "--permission-mode accept-edits (sandboxed commands run there without asking)" in (
        record.reason
    )


def test_without_an_approver_an_ask_rule_does_not_suggest_a_mode(workspace: Path) -> None:
    rule = PermissionRule(tool="read_file", pattern=r"\.env$", behavior="ask")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[rule])
    record = policy.authorize(parse("read_file", path=".env"))
    assert record.decision == "deny"
    assert "--permission-mode" not in record.reason
    assert "change the rule or hook that asks" in record.reason


def test_approval_request_carries_the_call(workspace: Path) -> None:
    approver = ScriptedApprover("yes")
    policy = PermissionPolicy(Workspace(workspace), approver=approver)
    parsed = parse("write_file", path="a.txt", content="hello")
    assert policy.before_call(parsed) is parsed
    (request,) = approver.requests
    assert request.tool_name == "write_file"
    assert request.subject == "a.txt"
    assert request.arguments == {"path": "a.txt", "content": "hello"}
    assert "write" in request.reason


def test_an_approval_request_carries_the_change_a_previewing_tool_would_make(
    workspace: Path,
) -> None:
    def preview(arguments: PathInput) -> FileChange:
        return FileChange(arguments.path, None, arguments.content)

    previewing = ToolDefinition(
        "write_file", "Write a file.", PathInput, _write, "write", "path", preview=preview
    )
    call = tool_call("call_1", "write_file", '{"path": "a.txt", "content": "hello"}')
    with_preview = ToolRegistry([previewing]).parse(call)
    assert isinstance(with_preview, ParsedCall), with_preview
    approver = ScriptedApprover("yes", "yes")
    policy = PermissionPolicy(Workspace(workspace), approver=approver)

    policy.authorize(with_preview)
    policy.authorize(parse("write_file", path="a.txt", content="hello"))  # no preview

    assert [asked.change for asked in approver.requests] == [
        FileChange("a.txt", None, "hello"),
        None,
    ]


def test_an_approval_request_says_how_the_command_will_be_confined(workspace: Path) -> None:
    approver = ScriptedApprover("yes", "yes")
    policy = PermissionPolicy(Workspace(workspace), approver=approver)

    policy.authorize(sandboxed_bash(workspace, "make", "read-only", network=True))
    policy.authorize(parse("bash", command="make"))

    assert [asked.sandbox for asked in approver.requests] == ["read-only, network on", None]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("yes", "the user approved this call"),
        ("always", "the user approved this for the session"),
    ],
)
def test_an_approval_is_recorded_as_the_users_with_its_reach(
    workspace: Path, answer: ApprovalAnswer, reason: str
) -> None:
    policy = PermissionPolicy(Workspace(workspace), approver=ScriptedApprover(answer))

    record = policy.authorize(parse("bash", command="make"))

    assert (record.decision, record.reason, record.source) == ("allow", reason, "user")


def test_a_remembered_approval_says_so(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace), approver=ScriptedApprover("always"))
    policy.authorize(parse("write_file", path="a.txt"))

    record = policy.decide(parse("write_file", path="b.txt"))

    assert (record.decision, record.reason) == ("allow", "the user approved this for the session")


@pytest.mark.parametrize(
    ("tool", "rules", "remedy"),
    [
        ("bash", [], "re-run with --permission-mode auto (or add an allow rule) to permit it"),
        (
            "write_file",
            [],
            "re-run with --permission-mode accept-edits or --permission-mode auto "
            "(or add an allow rule) to permit it",
        ),
        (
            "write_file",
            [PermissionRule(tool="write_file", behavior="ask")],
            "run it interactively to approve it, or change the rule or hook that asks",
        ),
    ],
)
def test_without_a_terminal_the_denial_says_what_the_user_can_do(
    workspace: Path, tool: str, rules: list[PermissionRule], remedy: str
) -> None:
    policy = PermissionPolicy(Workspace(workspace), rules=rules)
    arguments = {"command": "make"} if tool == "bash" else {"path": "a.txt"}

    record = policy.authorize(parse(tool, **arguments))

    assert record.reason.endswith(f"so it was denied. The user must {remedy}.")


def test_stricter_advice_replaces_the_policys_decision(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace))
    hook = DecisionRecord("deny", "the hook says no", "hook", "write_file", "a.txt", "call_1")

    assert policy.authorize(parse("write_file", path="a.txt"), advice=hook) == hook


@pytest.mark.parametrize("advice", ["ask", "allow"])
def test_advice_no_stricter_than_the_policy_leaves_its_record(
    workspace: Path, advice: Decision
) -> None:
    # The policy asks for a write in ask mode; on a tie its own reason stands, and advice
    # never loosens it. Without a terminal the denial quotes the reason that stood.
    policy = PermissionPolicy(Workspace(workspace))
    hook = DecisionRecord(advice, "the hook says so", "hook", "write_file", "a.txt", "call_1")

    record = policy.authorize(parse("write_file", path="a.txt"), advice=hook)

    assert (record.decision, record.source) == ("deny", "no-terminal")
    assert "(write tools need approval in permission mode 'ask')" in record.reason


def test_user_saying_no_denies_with_a_reason_the_model_can_read(workspace: Path) -> None:
    policy = PermissionPolicy(Workspace(workspace), approver=ScriptedApprover("no"))
    result = policy.before_call(parse("bash", command="make deploy"))
    assert isinstance(result, ToolResult)
    assert result.content == "Error [permission_denied]: the user declined this bash call"


def test_user_declining_with_instructions_denies_with_their_words(workspace: Path) -> None:
    answer = DeclinedWithInstructions("run make test first")
    policy = PermissionPolicy(Workspace(workspace), approver=ScriptedApprover(answer))

    record = policy.authorize(parse("bash", command="make deploy"))

    assert record == DecisionRecord(
        "deny",
        "the user declined this bash call and says instead: run make test first",
        "user",
        "bash",
        "make deploy",
        "call_1",
    )


def test_yes_approves_only_that_call(workspace: Path) -> None:
    approver = ScriptedApprover("yes", "no")
    policy = PermissionPolicy(Workspace(workspace), approver=approver)
    assert policy.authorize(parse("write_file", path="a.txt")).decision == "allow"
    assert policy.authorize(parse("write_file", path="a.txt")).decision == "deny"
    assert len(approver.requests) == 2


def test_always_for_a_file_tool_covers_later_calls_of_that_tool(workspace: Path) -> None:
    approver = ScriptedApprover("always")
    policy = PermissionPolicy(Workspace(workspace), approver=approver)
    assert policy.authorize(parse("write_file", path="a.txt")).decision == "allow"
    record = policy.authorize(parse("write_file", path="b/c.txt"))
    assert (record.decision, record.source) == ("allow", "session")
    assert len(approver.requests) == 1


def test_always_for_bash_covers_only_that_exact_command(workspace: Path) -> None:
    approver = ScriptedApprover("always", "no")
    policy = PermissionPolicy(Workspace(workspace), approver=approver)
    assert policy.authorize(parse("bash", command="git status")).decision == "allow"
    assert policy.authorize(parse("bash", command="git status")).decision == "allow"
    assert policy.authorize(parse("bash", command="git status; rm -rf ~")).decision == "deny"
    assert [r.subject for r in approver.requests] == ["git status", "git status; rm -rf ~"]


def test_remembered_approval_does_not_lift_a_deny_rule(workspace: Path) -> None:
    rule = PermissionRule(tool="write_file", pattern=r"\.lock$", behavior="deny")
    policy = PermissionPolicy(
        Workspace(workspace), rules=[rule], approver=ScriptedApprover("always")
    )
    assert policy.authorize(parse("write_file", path="a.txt")).decision == "allow"
    assert policy.authorize(parse("write_file", path="poetry.lock")).decision == "deny"


def test_every_final_decision_is_reported(workspace: Path) -> None:
    seen: list[DecisionRecord] = []
    policy = PermissionPolicy(
        Workspace(workspace), approver=ScriptedApprover("no"), on_decision=seen.append
    )
    policy.before_call(parse("read_file", "call_a", path="a.txt"))
    policy.before_call(parse("bash", "call_b", command="make"))
    assert [(r.call_id, r.tool_name, r.subject, r.decision, r.source) for r in seen] == [
        ("call_a", "read_file", "a.txt", "allow", "default"),
        ("call_b", "bash", "make", "deny", "user"),
    ]


def test_decide_neither_asks_nor_reports(workspace: Path) -> None:
    seen: list[DecisionRecord] = []
    approver = ScriptedApprover()
    policy = PermissionPolicy(Workspace(workspace), approver=approver, on_decision=seen.append)
    assert policy.decide(parse("bash", command="make")).decision == "ask"
    assert (seen, approver.requests) == ([], [])


def test_after_call_passes_the_result_through(workspace: Path) -> None:
    result = tool_success("done")
    assert (
        PermissionPolicy(Workspace(workspace)).after_call(parse("bash", command="ls"), result)
        is result
    )


# --- in the loop ------------------------------------------------------------------------


def test_denied_write_in_the_loop_is_a_paired_error_and_nothing_is_written(
    workspace: Path,
) -> None:
    write = tool_call("call_w", "write_file", '{"path": "a.txt", "content": "x"}')
    model = ScriptedModel([tool_reply(write), text_reply("gave up")])
    runner = AgentRunner(model, make_tools(), guards=[PermissionPolicy(Workspace(workspace))])
    assert runner.run("write a.txt").final_text == "gave up"
    validate_tool_pairing(runner.history)
    tool_result = next(m for m in runner.history if isinstance(m, ToolMessage))
    assert tool_result.content.startswith("Error [permission_denied]: write_file needs")
    assert not (workspace / "a.txt").exists()


def test_accept_edits_lets_the_write_through_in_the_loop(workspace: Path) -> None:
    write = tool_call("call_w", "write_file", '{"path": "a.txt", "content": "x"}')
    model = ScriptedModel([tool_reply(write), text_reply("done")])
    policy = PermissionPolicy(Workspace(workspace), mode="accept-edits")
    AgentRunner(model, make_tools(), guards=[policy]).run("write a.txt")
    assert (workspace / "a.txt").read_text() == "x"


def test_a_path_the_policy_cannot_examine_is_a_paired_io_error(workspace: Path) -> None:
    (workspace / "loop").symlink_to("loop")
    write = tool_call("call_w", "write_file", '{"path": "loop/a.txt", "content": "x"}')
    model = ScriptedModel([tool_reply(write), text_reply("carried on")])
    policy = PermissionPolicy(Workspace(workspace), mode="auto")

    runner = AgentRunner(model, make_tools(), guards=[policy])

    assert runner.run("write it").final_text == "carried on"
    validate_tool_pairing(runner.history)
    tool_result = next(m for m in runner.history if isinstance(m, ToolMessage))
    assert tool_result.content.startswith("Error [io_error]: OSError: [Errno 40]")


# --- the terminal prompt ------------------------------------------------------------------


def scripted_lines(
    *lines: str | type[BaseException],
) -> tuple[list[str], Callable[[str], str]]:
    prompts: list[str] = []
    remaining = list(lines)

    def read_line(prompt: str) -> str:
        prompts.append(prompt)
        line = remaining.pop(0)
        if isinstance(line, type):
            raise line()
        return line

    return prompts, read_line


def make_approver(
    *lines: str | type[BaseException], width: int = 100, height: int = 100
) -> tuple[TerminalApprover, io.StringIO, list[str]]:
    output = io.StringIO()
    console = Console(file=output, width=width, height=height, color_system=None)
    prompts, read_line = scripted_lines(*lines)
    return TerminalApprover(console, read_line=read_line), output, prompts


def request(tool: str = "bash", **arguments: str) -> ApprovalRequest:
    subject = arguments.get("command", arguments.get("path", ""))
    return ApprovalRequest(tool, subject, arguments, reason="execute tools get 'ask'")


@pytest.mark.parametrize(
    ("line", "answer"),
    [
        ("y", "yes"),
        ("YES", "yes"),
        ("n", "no"),
        ("a", "always"),
        (" always ", "always"),
        ("", "no"),
    ],
)
def test_terminal_answer_is_read_from_the_line(line: str, answer: str) -> None:
    approver, _, prompts = make_approver(line)
    assert approver.approve(request(command="ls")) == answer
    assert prompts == ["Allow? [y]es / [n]o / [a]lways this session (Enter = no): "]


def test_the_prompt_says_when_a_command_runs_sandboxed() -> None:
    approver, output, _ = make_approver("y", "y")
    sandboxed = ApprovalRequest(
        "bash", "make", {"command": "make"}, "reason", sandbox="workspace-write, network off"
    )

    approver.approve(sandboxed)
    shown_sandboxed = output.getvalue()
    approver.approve(request(command="make"))

    assert "runs sandboxed (workspace-write, network off)" in shown_sandboxed
    assert output.getvalue().count("runs sandboxed") == 1


def test_end_of_input_means_no() -> None:
    approver, _, _ = make_approver(EOFError)
    assert approver.approve(request(command="ls")) == "no"


def test_ctrl_c_is_not_an_answer_but_cancels_the_turn() -> None:
    approver, _, _ = make_approver(KeyboardInterrupt)
    with pytest.raises(KeyboardInterrupt):
        approver.approve(request(command="ls"))


def test_unclear_answer_asks_again() -> None:
    approver, output, prompts = make_approver("maybe", "y")
    assert approver.approve(request(command="ls")) == "yes"
    assert len(prompts) == 2
    assert "Please answer y, n or a (got 'maybe')." in output.getvalue()


def test_three_unclear_answers_mean_no() -> None:
    approver, _, prompts = make_approver("what", "huh", "eh", "y")
    assert approver.approve(request(command="ls")) == "no"
    assert len(prompts) == 3


def test_a_bash_command_that_fits_on_the_screen_is_shown_in_full() -> None:
    script = "\n".join(f"echo step{n}" for n in range(30))
    approver, output, prompts = make_approver("n", height=35)  # 30 lines, 4 of panel, 1 prompt
    approver.approve(request(command=script))
    shown = output.getvalue()
    assert "bash wants permission" in shown
    assert all(f"echo step{n}" in shown for n in range(30))
    assert "v shows it all" not in shown
    assert prompts == [PROMPT]


def test_a_bash_command_one_line_too_long_for_the_screen_shows_its_first_lines() -> None:
    script = "\n".join(f"echo step{n}" for n in range(30))
    approver, output, prompts = make_approver("n", height=34)

    approver.approve(request(command=script))

    shown = output.getvalue()
    assert f"(30 lines, {len(script):,} bytes; v shows it all)" in shown
    assert "echo step0" in shown and "echo step26" in shown and "echo step27" not in shown
    assert "… 3 more lines" in shown
    assert len(shown.splitlines()) + 1 == 34  # the panel and the question fill the screen
    assert prompts == [PROMPT_WITH_VIEW]


LONG_SCRIPT = "\n".join(f"echo step{n} and some words to make the line long" for n in range(120))


@pytest.mark.parametrize("width", [80, 40])
def test_a_120_line_command_fits_above_the_question_with_its_line_count(width: int) -> None:
    approver, output, _ = make_approver("n", width=width, height=30)

    assert approver.approve(request(command=LONG_SCRIPT)) == "no"

    shown = output.getvalue().splitlines()
    question_rows = -(-len(PROMPT_WITH_VIEW) // width)
    assert len(shown) - 1 + question_rows <= 30  # the prompt line is the last one written
    text = " ".join(" ".join(shown).split())
    assert "(120 lines, " in text and "echo step0 and some words" in text
    assert "echo step119" not in text and "more lines" in text


def test_v_shows_the_whole_command_then_its_first_lines_again_with_the_question() -> None:
    approver, output, prompts = make_approver("v", "y", width=80, height=30)

    assert approver.approve(request(command=LONG_SCRIPT)) == "yes"

    shown = output.getvalue()
    assert all(f"echo step{n} " in shown for n in range(120))
    after_the_whole = shown[shown.index("echo step119") :]
    assert "(120 lines, " in after_the_whole and "echo step0 " in after_the_whole
    assert prompts == [PROMPT_WITH_VIEW, PROMPT_WITH_VIEW]


def test_v_is_not_an_answer_when_the_whole_call_is_shown() -> None:
    approver, output, prompts = make_approver("v", "n")

    assert approver.approve(request(command="ls")) == "no"

    assert "Please answer y, n or a (got 'v')." in output.getvalue()
    assert len(prompts) == 2


def test_a_single_line_too_long_for_the_screen_is_cut_inside_it() -> None:
    approver, output, _ = make_approver("n", width=40, height=12)

    approver.approve(request(command="x" * 3000))

    shown = output.getvalue()
    words = " ".join(shown.replace("│", " ").split())
    assert "(1 line, 3,000 bytes; v shows it all)" in words
    assert "… the rest of this line" in words
    assert len(shown.splitlines()) + 2 <= 12  # the question takes two rows of 40


@pytest.mark.parametrize(("limit", "found"), [(0, 1), (1, 1), (7, 7), (9, 9), (10, 10)])
def test_the_longest_fitting_prefix_is_found_on_both_sides_of_the_limit(
    limit: int, found: int
) -> None:
    assert longest_fitting_prefix(10, lambda length: length <= limit) == found


@pytest.mark.parametrize(
    ("end", "moved"),
    [
        (3, 3),  # inside the first line: stays
        (5, 5),  # at a line's end
        (6, 5),  # just inside the second line: back to the first's end
        (11, 5),
        (12, 12),  # the whole text
    ],
)
def test_a_cut_moves_back_to_the_end_of_the_last_whole_line(end: int, moved: int) -> None:
    assert at_line_end("first\nsecond", end) == moved


def test_long_file_content_is_abbreviated() -> None:
    content = "\n".join(f"line {n}" for n in range(500))
    approver, output, _ = make_approver("n")
    approver.approve(request("write_file", path="big.txt", content=content))
    shown = output.getvalue()
    assert "big.txt" in shown
    assert "line 11" in shown
    assert re.search(r"line 12\b", shown) is None
    assert f"(500 lines, {len(content.encode()):,} bytes in all)" in shown


def test_brackets_in_arguments_are_shown_literally() -> None:
    approver, output, _ = make_approver("n")
    approver.approve(request(command="echo [bold]hi[/bold] [red]"))
    assert "echo [bold]hi[/bold] [red]" in output.getvalue()


def test_default_prompt_reads_stdin_and_shows_the_choices_literally(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("a\n"))
    output = io.StringIO()
    approver = TerminalApprover(Console(file=output, width=100, color_system=None))
    assert approver.approve(request(command="ls")) == "always"
    assert "Allow? [y]es / [n]o / [a]lways this session (Enter = no): " in output.getvalue()


def test_short_file_content_is_shown_whole_without_an_ellipsis() -> None:
    approver, output, _ = make_approver("n")
    approver.approve(request("write_file", path="hello.txt", content="hi\n"))
    shown = output.getvalue()
    assert "hi" in shown
    assert "bytes in all" not in shown
