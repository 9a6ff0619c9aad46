"""Paths stay inside the real workspace: `..`, absolute paths and symlinks that lead out
are refused by the resolver and by every file and search tool, and nothing outside is
read, written or named."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.filesystem import WorkspacePathError, resolve_workspace_path
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import file_tools, search_tools

SECRET = "TOP SECRET outside the workspace\n"


def entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def run_tool(workspace: Path, name: str, **arguments: object) -> ToolResult:
    registry = ToolRegistry([*file_tools(workspace), *search_tools(workspace)])
    return registry.run(tool_call("call-1", name, orjson.dumps(arguments).decode()))


@pytest.fixture
def outside(workspace: Path) -> Path:
    """A sibling of the workspace with a secret in it, and links into it from inside."""
    directory = workspace.parent / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET)
    (workspace / "secret_link.txt").symlink_to(directory / "secret.txt")
    (workspace / "outside_link").symlink_to(directory, target_is_directory=True)
    return directory


ESCAPES = {
    "dot-dot": "../outside/secret.txt",
    "absolute": "{outside}/secret.txt",
    "symlinked file": "secret_link.txt",
    "symlinked directory": "outside_link/secret.txt",
}


def escape(kind: str, outside: Path) -> str:
    return ESCAPES[kind].format(outside=outside)


# The resolver


def test_relative_path_resolves_inside_the_workspace(workspace: Path) -> None:
    (workspace / "src").mkdir()

    assert resolve_workspace_path(workspace, "src/app.py") == workspace.resolve() / "src/app.py"


def test_dot_dot_that_stays_inside_is_allowed(workspace: Path) -> None:
    (workspace / "src").mkdir()

    assert (
        resolve_workspace_path(workspace, "src/../README.md") == workspace.resolve() / "README.md"
    )


def test_missing_directories_resolve_to_their_future_path(workspace: Path) -> None:
    assert (
        resolve_workspace_path(workspace, "new/deep/file.txt")
        == workspace.resolve() / "new/deep/file.txt"
    )


def test_absolute_path_inside_is_allowed(workspace: Path) -> None:
    assert (
        resolve_workspace_path(workspace, str(workspace / "a.txt")) == workspace.resolve() / "a.txt"
    )


def test_workspace_itself_is_allowed(workspace: Path) -> None:
    assert resolve_workspace_path(workspace, ".") == workspace.resolve()


def test_symlink_pointing_inside_resolves_to_its_target(workspace: Path) -> None:
    (workspace / "real.txt").write_text("x")
    (workspace / "alias.txt").symlink_to("real.txt")

    assert resolve_workspace_path(workspace, "alias.txt") == workspace.resolve() / "real.txt"


def test_workspace_reached_through_a_symlink_still_works(workspace: Path, tmp_path: Path) -> None:
    linked_workspace = tmp_path / "linked_project"
    linked_workspace.symlink_to(workspace, target_is_directory=True)

    assert resolve_workspace_path(linked_workspace, "a.txt") == workspace.resolve() / "a.txt"


@pytest.mark.parametrize("kind", ESCAPES)
def test_escape_is_refused(workspace: Path, outside: Path, kind: str) -> None:
    with pytest.raises(WorkspacePathError, match="outside the workspace"):
        resolve_workspace_path(workspace, escape(kind, outside))


def test_dot_dot_through_a_missing_directory_is_refused(workspace: Path) -> None:
    with pytest.raises(WorkspacePathError):
        resolve_workspace_path(workspace, "missing/../../outside/new.txt")


def test_new_file_under_a_symlinked_directory_is_refused(workspace: Path, outside: Path) -> None:
    with pytest.raises(WorkspacePathError):
        resolve_workspace_path(workspace, "outside_link/new/file.txt")


def test_refusal_names_only_the_given_path_never_the_target(workspace: Path, outside: Path) -> None:
    with pytest.raises(WorkspacePathError) as refused:
        resolve_workspace_path(workspace, "secret_link.txt")

    message = str(refused.value)
    assert "'secret_link.txt'" in message
    assert str(outside) not in message
    assert "secret.txt" not in message


def test_nul_byte_is_an_invalid_path(workspace: Path) -> None:
    with pytest.raises(WorkspacePathError, match="not a valid path"):
        resolve_workspace_path(workspace, "a\0b")


# The tools


@pytest.mark.parametrize("kind", ESCAPES)
def test_read_file_refuses_escapes(workspace: Path, outside: Path, kind: str) -> None:
    result = run_tool(workspace, "read_file", path=escape(kind, outside))

    assert result.error_code == "path_outside_workspace"
    assert "TOP SECRET" not in result.content


@pytest.mark.parametrize("kind", ESCAPES)
def test_write_file_refuses_escapes_and_leaves_the_target_alone(
    workspace: Path, outside: Path, kind: str
) -> None:
    result = run_tool(workspace, "write_file", path=escape(kind, outside), content="pwned")

    assert result.error_code == "path_outside_workspace"
    assert (outside / "secret.txt").read_text() == SECRET
    assert (workspace / "secret_link.txt").is_symlink()


@pytest.mark.parametrize("kind", ESCAPES)
def test_edit_file_refuses_escapes_and_leaves_the_target_alone(
    workspace: Path, outside: Path, kind: str
) -> None:
    path = escape(kind, outside)

    result = run_tool(workspace, "edit_file", path=path, old_text="TOP", new_text="NO")

    assert result.error_code == "path_outside_workspace"
    assert (outside / "secret.txt").read_text() == SECRET


def test_write_file_does_not_create_files_through_a_symlinked_directory(
    workspace: Path, outside: Path
) -> None:
    result = run_tool(workspace, "write_file", path="outside_link/new/planted.txt", content="x")

    assert result.error_code == "path_outside_workspace"
    assert entries(outside) == ["secret.txt"]


@pytest.mark.parametrize("path", ["..", "outside_link", "{outside}"])
def test_glob_refuses_a_search_root_outside(workspace: Path, outside: Path, path: str) -> None:
    result = run_tool(workspace, "glob", pattern="**/*", path=path.format(outside=outside))

    assert result.error_code == "path_outside_workspace"
    assert "secret.txt" not in result.content


@pytest.mark.parametrize("path", ["..", "outside_link", "secret_link.txt", "{outside}"])
def test_grep_refuses_a_search_root_outside(workspace: Path, outside: Path, path: str) -> None:
    result = run_tool(workspace, "grep", pattern="SECRET", path=path.format(outside=outside))

    assert result.error_code == "path_outside_workspace"
    assert "TOP SECRET" not in result.content


def test_glob_neither_follows_nor_lists_symlinks_that_lead_out(
    workspace: Path, outside: Path
) -> None:
    (workspace / "kept.txt").write_text("x")

    result = run_tool(workspace, "glob", pattern="**/*")

    assert result.content == "1 file matches '**/*':\nkept.txt"


def test_grep_does_not_search_through_symlinks_that_lead_out(
    workspace: Path, outside: Path
) -> None:
    (workspace / "notes.txt").write_text("nothing SECRET here\n")

    result = run_tool(workspace, "grep", pattern="SECRET")

    assert result.content == "notes.txt:1:nothing SECRET here"
