"""Issue 29, item 3: write_file and edit_file approvals show a coloured unified diff, each row
the line number, then `-` or `+`, then the text; a new file shows its size and first lines.
The change is read as the tool would read the file, without making it."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from agent_tutorial.approval import describe_request
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.permissions import ApprovalRequest
from agent_tutorial.core.tools import FileChange, ToolDefinition, ToolRegistry
from agent_tutorial.diff_view import diff_rows
from agent_tutorial.features.builtin_tools import EditFileInput, WriteFileInput, file_tools
from agent_tutorial.render import EDIT_DIFF_ROWS, tool_details
from agent_tutorial.terminal_keys import ESCAPE
from tests.loopback import LoopbackServer, text_stream, tool_stream
from tests.terminal import Terminal

MakeTerminal = Callable[..., Terminal]
SOURCE = "".join(f"line {n}\n" for n in range(1, 11))


def rows(change: FileChange, max_rows: int = 40) -> list[str]:
    return diff_rows(change, max_rows=max_rows).plain.splitlines()


def test_an_edit_shows_its_line_numbers_signs_and_two_lines_of_context() -> None:
    after = SOURCE.replace("line 5\n", "line five\n")

    assert rows(FileChange("a.txt", SOURCE, after)) == [
        "3  line 3",
        "4  line 4",
        "5 -line 5",
        "5 +line five",
        "6  line 6",
        "7  line 7",
    ]


def test_removed_and_added_rows_are_coloured() -> None:
    shown = diff_rows(FileChange("a.txt", "a\n", "b\n"), max_rows=40)

    styles = {shown.plain[span.start : span.end].strip(): span.style for span in shown.spans}
    assert styles == {"1 -a": "red", "1 +b": "green"}


def test_a_long_diff_is_cut_and_says_how_much_more_there_was() -> None:
    after = SOURCE.upper()

    assert rows(FileChange("a.txt", SOURCE, after), max_rows=4)[-1] == "… 16 more rows"
    assert len(rows(FileChange("a.txt", SOURCE, after), max_rows=20)) == 20


def test_a_new_file_shows_its_size_and_first_lines() -> None:
    text = "".join(f"row {n}\n" for n in range(1, 13))

    shown = rows(FileChange("new.txt", None, text))

    assert shown[0] == f"new file, 12 lines, {len(text)} bytes"
    assert shown[1:3] == [" 1 +row 1", " 2 +row 2"]
    assert shown[-1] == "… 2 more lines"


def test_control_characters_in_a_diff_are_shown_as_escapes() -> None:
    assert rows(FileChange("a.txt", "a\n", "\x1b[2Jb\n"))[-1] == "1 +\\x1b[2Jb"


def tool(workspace: Path, name: str) -> ToolDefinition:
    return next(tool for tool in file_tools(workspace) if tool.name == name)


def test_an_edit_is_previewed_without_being_made(workspace: Path) -> None:
    (workspace / "a.txt").write_text(SOURCE)
    edit = tool(workspace, "edit_file")
    assert edit.preview is not None

    change = edit.preview(EditFileInput(path="a.txt", old_text="line 2\n", new_text="two\n"))

    assert change == FileChange("a.txt", SOURCE, SOURCE.replace("line 2\n", "two\n"))
    assert (workspace / "a.txt").read_text() == SOURCE


@pytest.mark.parametrize(
    ("old_text", "replace_all"), [("missing", False), ("line", False), ("missing", True)]
)
def test_an_edit_that_would_fail_has_no_preview(
    workspace: Path, old_text: str, replace_all: bool
) -> None:
    (workspace / "a.txt").write_text(SOURCE)
    edit = tool(workspace, "edit_file")
    assert edit.preview is not None

    arguments = EditFileInput(
        path="a.txt", old_text=old_text, new_text="x", replace_all=replace_all
    )
    assert edit.preview(arguments) is None


def test_a_write_previews_a_new_file_and_an_overwrite(workspace: Path) -> None:
    (workspace / "old.txt").write_text("before\n")
    write = tool(workspace, "write_file")
    assert write.preview is not None

    assert write.preview(WriteFileInput(path="new.txt", content="x\n")) == FileChange(
        "new.txt", None, "x\n"
    )
    assert write.preview(WriteFileInput(path="old.txt", content="after\n")) == FileChange(
        "old.txt", "before\n", "after\n"
    )
    assert not (workspace / "new.txt").exists()


def test_a_path_outside_the_workspace_has_no_preview(workspace: Path) -> None:
    (workspace.parent / "secret.txt").write_text("key\n")
    write = tool(workspace, "write_file")
    assert write.preview is not None

    assert write.preview(WriteFileInput(path="../secret.txt", content="x")) is None


def test_the_approval_panel_shows_the_diff_instead_of_the_arguments() -> None:
    change = FileChange("a.txt", "a\n", "b\n")
    request = ApprovalRequest(
        "edit_file", "a.txt", {"path": "a.txt", "old_text": "a", "new_text": "b"}, "why", None,
        change,
    )  # fmt: skip
    output = io.StringIO()

    Console(file=output, width=80, color_system=None).print(describe_request(request))

    shown = output.getvalue()
    assert "1 -a" in shown and "1 +b" in shown
    assert "old_text" not in shown


EDIT = [("e1", "edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"})]


@pytest.mark.parametrize("columns", [80, 40])
@pytest.mark.parametrize(("key", "applied"), [("y", True), (ESCAPE, False)], ids=["y", "esc"])
def test_an_edit_approval_shows_the_diff_and_one_key_answers_it(
    make_terminal: MakeTerminal,
    loopback: LoopbackServer,
    workspace: Path,
    columns: int,
    key: str,
    applied: bool,
) -> None:
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    loopback.queue(tool_stream(EDIT), text_stream("over"))
    terminal = make_terminal("run", "-c", "3", "--sandbox", "off", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("fix add")
    terminal.wait_for_question()

    shown = [line.strip("│ ") for line in terminal.lines()]
    assert "2 -    return a - b" in shown
    assert "2 +    return a + b" in shown
    terminal.type(key)
    terminal.wait_for_text("over")

    fixed = (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert fixed is applied


def test_after_an_edit_its_diff_shows_shortened_under_the_tool_line(workspace: Path) -> None:
    (workspace / "a.txt").write_text(SOURCE)
    edit = tool(workspace, "edit_file")
    old, new = "line 3\nline 4\nline 5\n", "three\nfour\nfive\n"
    result = edit.handler(EditFileInput(path="a.txt", old_text=old, new_text=new))

    lines = [line.plain for line in tool_details(result, 40)]

    assert EDIT_DIFF_ROWS == 6
    assert lines == [
        "  1  line 1",
        "  2  line 2",
        "  3 -line 3",
        "  4 -line 4",
        "  5 -line 5",
        "  3 +three",
        "  … 4 more rows",
    ]


def test_a_failed_edit_shows_no_diff(workspace: Path) -> None:
    (workspace / "a.txt").write_text(SOURCE)
    edit = tool(workspace, "edit_file")

    arguments = '{"path": "a.txt", "old_text": "absent", "new_text": "x"}'
    result = ToolRegistry([edit]).run(tool_call("e1", "edit_file", arguments))

    assert result.change is None and result.is_error
