"""The state folder `.agent_tutorial/` and `.git/` are known by what they are, not by the
name that reaches them: no tool writes into them, and of the state folder the tools read
only `artifacts/` and `skills/`. A state folder that is a symlink is not loaded at all."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.filesystem import Workspace
from agent_tutorial.config import ConfigError, load_settings
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.permissions import PermissionPolicy, PermissionRule
from agent_tutorial.core.tools import ParsedCall, ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import file_tools, search_tools
from agent_tutorial.features.skills import SkillRegistry

KEY = "sk-planted-0123456789abcdef"


def registry(workspace: Path) -> ToolRegistry:
    return ToolRegistry([*file_tools(workspace), *search_tools(workspace)])


def run_tool(workspace: Path, name: str, **arguments: object) -> ToolResult:
    return registry(workspace).run(tool_call("call-1", name, orjson.dumps(arguments).decode()))


def parse(workspace: Path, name: str, **arguments: object) -> ParsedCall:
    parsed = registry(workspace).parse(tool_call("call-1", name, orjson.dumps(arguments).decode()))
    assert isinstance(parsed, ParsedCall)
    return parsed


@pytest.fixture
def state(workspace: Path) -> Path:
    """A state folder with every kind of file the agent keeps there."""
    folder = workspace / ".agent_tutorial"
    (folder / "sessions").mkdir(parents=True)
    (folder / "artifacts").mkdir()
    (folder / "skills" / "deploy").mkdir(parents=True)
    (folder / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (folder / "config.toml").write_text(f'# key {KEY}\npermission_mode = "ask"\n')
    (folder / "history").write_text(f"export KEY={KEY}\n")
    (folder / "sessions" / "s1.jsonl").write_text(f'{{"key": "{KEY}"}}\n')
    (folder / "artifacts" / "tool-result-call_1.txt").write_text("persisted output\n")
    (folder / "skills" / "deploy" / "SKILL.md").write_text("---\nname: deploy\n---\nSteps\n")
    return folder


@pytest.fixture
def renamed_state(workspace: Path) -> Path:
    """`.agent_tutorial -> cfgdir`: the real folder goes by another name."""
    real = workspace / "cfgdir"
    real.mkdir()
    (real / "config.toml").write_text('permission_mode = "ask"\n')
    (real / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (workspace / ".agent_tutorial").symlink_to("cfgdir", target_is_directory=True)
    return real


# Writes


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_writes_into_the_state_folder_by_another_name_are_refused(
    workspace: Path, renamed_state: Path, tool: str
) -> None:
    arguments = {"content": "x"} if tool == "write_file" else {"old_text": "ask", "new_text": "y"}

    result = run_tool(workspace, tool, path="cfgdir/config.toml", **arguments)

    assert result.error_code == "protected_path"
    assert (renamed_state / "config.toml").read_text() == 'permission_mode = "ask"\n'


def test_policy_boundary_denies_a_write_into_the_state_folder_by_another_name(
    workspace: Path, renamed_state: Path
) -> None:
    allow_all = PermissionRule(tool="*", behavior="allow")
    policy = PermissionPolicy(Workspace(workspace), mode="auto", rules=[allow_all])

    record = policy.decide(parse(workspace, "write_file", path="cfgdir/hooks.toml", content="x"))

    assert (record.decision, record.source) == ("deny", "boundary")
    assert ".agent_tutorial/" in record.reason


def test_writes_into_git_by_another_name_are_refused(workspace: Path) -> None:
    (workspace / "vcs" / "hooks").mkdir(parents=True)
    (workspace / ".git").symlink_to("vcs", target_is_directory=True)

    result = run_tool(workspace, "write_file", path="vcs/hooks/pre-commit", content="evil")

    assert result.error_code == "protected_path"
    assert not (workspace / "vcs" / "hooks" / "pre-commit").exists()


@pytest.mark.parametrize("path", ["sub/.git/config", "deep/er/.GIT/hooks/x", ".git/config"])
def test_writes_into_any_git_folder_at_any_depth_are_refused(workspace: Path, path: str) -> None:
    result = run_tool(workspace, "write_file", path=path, content="x")

    assert result.error_code == "protected_path"
    assert not (workspace / path).exists()


def test_writing_artifacts_is_refused_too(workspace: Path, state: Path) -> None:
    result = run_tool(
        workspace, "write_file", path=".agent_tutorial/artifacts/tool-result-x.txt", content="x"
    )

    assert result.error_code == "protected_path"


# Reads


@pytest.mark.parametrize(
    "path",
    [
        ".agent_tutorial/.env",
        ".agent_tutorial/config.toml",
        ".agent_tutorial/history",
        ".agent_tutorial/sessions/s1.jsonl",
        ".agent_tutorial/skills/../.env",
        ".agent_tutorial/artifacts/../config.toml",
    ],
)
def test_read_file_refuses_the_state_folder_outside_artifacts_and_skills(
    workspace: Path, state: Path, path: str
) -> None:
    result = run_tool(workspace, "read_file", path=path)

    assert result.error_code == "protected_path"
    assert KEY not in result.content


def test_the_refusal_names_the_only_folders_tools_may_read(workspace: Path, state: Path) -> None:
    result = run_tool(workspace, "read_file", path=".agent_tutorial/config.toml")

    assert result.content.endswith(
        ".agent_tutorial/ holds the agent's own settings, keys and sessions; "
        "tools may read only .agent_tutorial/artifacts/ and .agent_tutorial/skills/ in it"
    )


def test_read_file_refuses_the_state_folder_by_another_name(
    workspace: Path, renamed_state: Path
) -> None:
    result = run_tool(workspace, "read_file", path="cfgdir/.env")

    assert result.error_code == "protected_path"
    assert KEY not in result.content


def test_read_file_refuses_a_symlink_into_the_state_folder(workspace: Path, state: Path) -> None:
    (workspace / "innocent.txt").symlink_to(".agent_tutorial/.env")

    result = run_tool(workspace, "read_file", path="innocent.txt")

    assert result.error_code == "protected_path"
    assert KEY not in result.content


@pytest.mark.parametrize(
    "path", [".agent_tutorial/artifacts/tool-result-call_1.txt", ".agent_tutorial/skills/deploy"]
)
def test_artifacts_and_skills_stay_readable(workspace: Path, state: Path, path: str) -> None:
    tool = "read_file" if path.endswith(".txt") else "glob"
    arguments = {"path": path} if tool == "read_file" else {"pattern": "*", "path": path}

    result = run_tool(workspace, tool, **arguments)

    assert not result.is_error, result.content


@pytest.mark.parametrize("path", [".agent_tutorial", ".agent_tutorial/sessions", "cfgdir"])
def test_grep_refuses_the_state_folder(workspace: Path, path: str) -> None:
    (workspace / "cfgdir" / "sessions").mkdir(parents=True)
    (workspace / "cfgdir" / "sessions" / "s.jsonl").write_text(KEY)
    (workspace / ".agent_tutorial").symlink_to("cfgdir", target_is_directory=True)

    result = run_tool(workspace, "grep", pattern="sk-", path=path)

    assert result.error_code == "protected_path"
    assert KEY not in result.content


def test_grep_of_the_workspace_skips_the_state_folder_by_another_name(
    workspace: Path, renamed_state: Path
) -> None:
    result = run_tool(workspace, "grep", pattern="sk-planted")

    assert KEY not in result.content
    assert result.content.startswith("No matches")


def test_glob_of_the_workspace_skips_the_state_folder_by_another_name(
    workspace: Path, renamed_state: Path
) -> None:
    (workspace / "kept.txt").write_text("x")

    result = run_tool(workspace, "glob", pattern="**/*")

    assert result.content == "1 file matches '**/*':\nkept.txt"


def test_glob_refuses_to_list_the_state_folder(workspace: Path, state: Path) -> None:
    result = run_tool(workspace, "glob", pattern="**/*", path=".agent_tutorial")

    assert result.error_code == "protected_path"
    assert "s1.jsonl" not in result.content


def test_grep_searches_artifacts_when_named(workspace: Path, state: Path) -> None:
    result = run_tool(workspace, "grep", pattern="persisted", path=".agent_tutorial/artifacts")

    assert result.content == ".agent_tutorial/artifacts/tool-result-call_1.txt:1:persisted output"


# A symlinked state folder is not loaded


def test_settings_are_not_loaded_from_a_symlinked_state_folder(
    workspace: Path, renamed_state: Path
) -> None:
    with pytest.raises(ConfigError, match="is a symlink; settings, hooks and skills are read"):
        load_settings(workspace)


def test_skills_are_not_loaded_from_a_symlinked_state_folder(workspace: Path) -> None:
    skill = workspace / "cfgdir" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it\n---\nSteps\n")
    (workspace / ".agent_tutorial").symlink_to("cfgdir", target_is_directory=True)

    skills = SkillRegistry.discover(workspace)

    assert skills.names() == []
    assert ["is a symlink" in problem.reason for problem in skills.problems] == [True]
