"""read_file, write_file and edit_file on a real scratch workspace, and the atomic-write and
binary-file helpers underneath them."""

from __future__ import annotations

import errno
import os
import resource
import signal
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.filesystem import Workspace, is_binary, replace_file
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import (
    LINE_CHAR_LIMIT,
    MAX_TEXT_FILE_BYTES,
    file_tools,
    search_tools,
)


def entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def run_tool(workspace: Path, name: str, **arguments: object) -> ToolResult:
    registry = ToolRegistry(file_tools(workspace))
    return registry.run(tool_call("call-1", name, orjson.dumps(arguments).decode()))


def numbered_file(path: Path, count: int) -> None:
    path.write_text("".join(f"line {number}\n" for number in range(1, count + 1)))


# read_file


def test_read_file_numbers_lines_compactly(workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")

    result = run_tool(workspace, "read_file", path="a.txt")

    assert result == ToolResult("1\tone\n2\ttwo\n3\tthree")


def test_read_file_aligns_numbers_to_the_widest_shown(workspace: Path) -> None:
    numbered_file(workspace / "a.txt", 10)

    result = run_tool(workspace, "read_file", path="a.txt", offset=9)

    assert result.content == " 9\tline 9\n10\tline 10"


def test_read_file_returns_the_requested_window_and_says_how_to_go_on(workspace: Path) -> None:
    numbered_file(workspace / "a.txt", 10)

    result = run_tool(workspace, "read_file", path="a.txt", offset=3, limit=2)

    assert result.content == (
        "3\tline 3\n4\tline 4\n[lines 3–4 shown; the file goes on: "
        "read_file with offset=5 reads more]"
    )


def test_read_file_reads_2000_lines_by_default(workspace: Path) -> None:
    numbered_file(workspace / "big.txt", 2500)

    lines = run_tool(workspace, "read_file", path="big.txt").content.split("\n")

    assert lines[0] == "   1\tline 1"
    assert lines[1999] == "2000\tline 2000"
    assert (
        lines[2000]
        == "[lines 1–2000 shown; the file goes on: read_file with offset=2001 reads more]"
    )


def test_read_file_stops_early_when_the_output_budget_is_spent(workspace: Path) -> None:
    (workspace / "wide.txt").write_text(("x" * 1000 + "\n") * 300)

    lines = run_tool(workspace, "read_file", path="wide.txt").content.split("\n")

    assert len(lines) < 300
    assert lines[-1].startswith(f"[lines 1–{len(lines) - 1} shown; the file goes on")


def test_read_file_cuts_very_long_lines(workspace: Path) -> None:
    (workspace / "min.js").write_text("y" * 100_000 + "\nnext\n")

    result = run_tool(workspace, "read_file", path="min.js")

    assert result.content == "1\t" + "y" * LINE_CHAR_LIMIT + " … [line cut]\n2\tnext"


def test_read_file_shows_crlf_lines_without_carriage_returns(workspace: Path) -> None:
    (workspace / "dos.txt").write_bytes(b"one\r\ntwo\r\n")

    assert run_tool(workspace, "read_file", path="dos.txt").content == "1\tone\n2\ttwo"


def test_read_file_reports_an_empty_file(workspace: Path) -> None:
    (workspace / "empty.txt").touch()

    assert run_tool(workspace, "read_file", path="empty.txt").content == "(empty.txt is empty)"


def test_read_file_offset_past_the_end_is_an_error(workspace: Path) -> None:
    numbered_file(workspace / "a.txt", 3)

    result = run_tool(workspace, "read_file", path="a.txt", offset=4)

    assert result.error_code == "offset_past_end"
    assert "(3 lines)" in result.content


@pytest.mark.parametrize(
    "data", [b"PK\x03\x04\x00\x00binary", b"caf\xe9 latin-1\n"], ids=["nul", "not-utf8"]
)
def test_read_file_refuses_binary_files(workspace: Path, data: bytes) -> None:
    (workspace / "blob.bin").write_bytes(data)

    result = run_tool(workspace, "read_file", path="blob.bin")

    assert result.error_code == "binary_file"


def test_read_file_refuses_a_directory(workspace: Path) -> None:
    (workspace / "src").mkdir()

    assert run_tool(workspace, "read_file", path="src").error_code == "is_directory"


def test_read_file_reports_a_missing_file(workspace: Path) -> None:
    result = run_tool(workspace, "read_file", path="nope.txt")

    assert result == ToolResult("Error [not_found]: 'nope.txt' does not exist", True, "not_found")


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "project/calc.py"}),
        ("edit_file", {"path": "project/calc.py", "old_text": "-", "new_text": "+"}),
        ("glob", {"pattern": "*.py", "path": "project/calc.py"}),
        ("grep", {"pattern": "add", "path": "./project/calc.py"}),
    ],
)
def test_a_missing_path_under_the_workspace_folders_own_name_gets_a_hint(
    workspace: Path, tool: str, arguments: dict[str, str]
) -> None:
    """`project/calc.py` in project/: what a small model copies from a traceback's path."""
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    registry = ToolRegistry([*file_tools(workspace), *search_tools(workspace)])

    result = registry.run(tool_call("call-1", tool, orjson.dumps(arguments).decode()))

    assert result.error_code == "not_found"
    assert result.content.endswith(
        "; paths are relative to the workspace, which is project/ itself: did you mean 'calc.py'?"
    )


@pytest.mark.parametrize("path", ["projects/calc.py", "project", "a/project/x"])
def test_other_missing_paths_get_no_hint(workspace: Path, path: str) -> None:
    result = run_tool(workspace, "read_file", path=path)

    assert result == ToolResult(f"Error [not_found]: {path!r} does not exist", True, "not_found")


# write_file


def test_write_file_creates_the_file_and_its_parent_directories(workspace: Path) -> None:
    result = run_tool(workspace, "write_file", path="docs/guide/intro.md", content="héllo\n")

    assert result.content == "Created docs/guide/intro.md (7 bytes)."
    assert (workspace / "docs/guide/intro.md").read_text() == "héllo\n"


def test_write_file_reports_an_overwrite(workspace: Path) -> None:
    (workspace / "a.txt").write_text("old")

    result = run_tool(workspace, "write_file", path="a.txt", content="new")

    assert result.content == "Overwrote a.txt (3 bytes)."
    assert (workspace / "a.txt").read_text() == "new"


def test_write_file_writes_the_exact_bytes(workspace: Path) -> None:
    run_tool(workspace, "write_file", path="a.txt", content="one\r\ntwo")

    assert (workspace / "a.txt").read_bytes() == b"one\r\ntwo"


def test_write_file_gives_a_new_file_the_usual_permissions(workspace: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)

    run_tool(workspace, "write_file", path="a.txt", content="x")

    assert stat.S_IMODE((workspace / "a.txt").stat().st_mode) == 0o666 & ~umask


def test_write_file_refuses_a_directory(workspace: Path) -> None:
    (workspace / "src").mkdir()

    result = run_tool(workspace, "write_file", path="src", content="x")

    assert result.error_code == "is_directory"
    assert (workspace / "src").is_dir()


def test_write_file_under_a_file_fails_cleanly(workspace: Path) -> None:
    (workspace / "notes").write_text("keep")

    result = run_tool(workspace, "write_file", path="notes/today.md", content="x")

    assert result.error_code == "not_a_directory"
    assert (workspace / "notes").read_text() == "keep"
    assert entries(workspace) == ["notes"]


# edit_file


def test_edit_file_replaces_the_single_match(workspace: Path) -> None:
    (workspace / "app.py").write_text("a = 1\nb = 2\nc = 3\n")

    result = run_tool(workspace, "edit_file", path="app.py", old_text="b = 2", new_text="b = 20")

    assert result.content == "Edited app.py: replaced 1 occurrence (first at line 2)."
    assert (workspace / "app.py").read_text() == "a = 1\nb = 20\nc = 3\n"


def test_edit_file_with_no_match_changes_nothing(workspace: Path) -> None:
    (workspace / "app.py").write_text("a = 1\n")

    result = run_tool(workspace, "edit_file", path="app.py", old_text="z = 9", new_text="x")

    assert result.error_code == "no_match"
    assert (workspace / "app.py").read_text() == "a = 1\n"


def test_edit_file_with_several_matches_reports_the_count_and_changes_nothing(
    workspace: Path,
) -> None:
    (workspace / "app.py").write_text("x = 1\nx = 1\nx = 1\n")

    result = run_tool(workspace, "edit_file", path="app.py", old_text="x = 1", new_text="x = 2")

    assert result.error_code == "multiple_matches"
    assert "occurs 3 times" in result.content
    assert (workspace / "app.py").read_text() == "x = 1\nx = 1\nx = 1\n"


def test_edit_file_replace_all_replaces_every_match(workspace: Path) -> None:
    (workspace / "app.py").write_text("a\nx = 1\nx = 1\n")

    result = run_tool(
        workspace, "edit_file", path="app.py", old_text="x = 1", new_text="y", replace_all=True
    )

    assert result.content == "Edited app.py: replaced 2 occurrences (first at line 2)."
    assert (workspace / "app.py").read_text() == "a\ny\ny\n"


def test_edit_file_refuses_identical_texts(workspace: Path) -> None:
    (workspace / "app.py").write_text("a = 1\n")

    result = run_tool(workspace, "edit_file", path="app.py", old_text="a", new_text="a")

    assert result.error_code == "no_change"


def test_edit_file_rejects_empty_old_text(workspace: Path) -> None:
    (workspace / "app.py").write_text("a = 1\n")

    result = run_tool(workspace, "edit_file", path="app.py", old_text="", new_text="b")

    assert result.error_code == "invalid_arguments"


def test_edit_file_refuses_binary_files(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"abc\x00def")

    result = run_tool(workspace, "edit_file", path="blob.bin", old_text="abc", new_text="x")

    assert result.error_code == "binary_file"
    assert (workspace / "blob.bin").read_bytes() == b"abc\x00def"


def test_edit_file_refuses_files_too_large(workspace: Path) -> None:
    (workspace / "huge.log").write_bytes(b"x" * (MAX_TEXT_FILE_BYTES + 1))

    result = run_tool(workspace, "edit_file", path="huge.log", old_text="x", new_text="y")

    assert result.error_code == "file_too_large"


def test_edit_file_keeps_the_file_mode(workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o750)

    run_tool(workspace, "edit_file", path="run.sh", old_text="old", new_text="new")

    assert script.read_text() == "echo new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


def test_edit_file_keeps_crlf_line_endings_elsewhere(workspace: Path) -> None:
    (workspace / "dos.txt").write_bytes(b"one\r\ntwo\r\n")

    run_tool(workspace, "edit_file", path="dos.txt", old_text="two", new_text="2")

    assert (workspace / "dos.txt").read_bytes() == b"one\r\n2\r\n"


def test_edit_file_no_match_mentions_crlf_when_that_is_the_likely_cause(workspace: Path) -> None:
    (workspace / "dos.txt").write_bytes(b"one\r\ntwo\r\n")

    result = run_tool(workspace, "edit_file", path="dos.txt", old_text="one\ntwo", new_text="x")

    assert result.error_code == "no_match"
    assert "CRLF" in result.content


def test_edit_file_through_a_symlink_inside_edits_the_target_and_keeps_the_link(
    workspace: Path,
) -> None:
    (workspace / "real.txt").write_text("old\n")
    (workspace / "alias.txt").symlink_to("real.txt")

    run_tool(workspace, "edit_file", path="alias.txt", old_text="old", new_text="new")

    assert (workspace / "alias.txt").is_symlink()
    assert (workspace / "real.txt").read_text() == "new\n"


def test_overwrite_says_that_other_hard_links_keep_the_old_content(workspace: Path) -> None:
    (workspace / "a.txt").write_text("old\n")
    os.link(workspace / "a.txt", workspace / "b.txt")

    result = run_tool(workspace, "write_file", path="a.txt", content="new\n")

    assert result.content == (
        "Overwrote a.txt (4 bytes). Its 1 other hard link(s) still hold the old content."
    )
    assert (workspace / "b.txt").read_text() == "old\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_an_edit_as_root_keeps_the_owner_of_the_file(workspace: Path) -> None:
    target = workspace / "owned.txt"
    target.write_text("x\n")
    os.chown(target, 1234, 5678)

    run_tool(workspace, "edit_file", path="owned.txt", old_text="x", new_text="y")

    assert target.read_text() == "y\n"
    assert (target.stat().st_uid, target.stat().st_gid) == (1234, 5678)


# the helpers underneath


def replace(workspace: Path, name: str, data: bytes) -> None:
    with Workspace(workspace).target(name, for_writing=True) as target:
        replace_file(target, data)


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past `limit` bytes fail with EFBIG, as on a full disk, after the file exists.
    Only for the block: the limit binds the whole process, pytest's own output included."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_atomic_write_failure_leaves_the_original_and_no_temporary_file(workspace: Path) -> None:
    target = workspace / "config.toml"
    target.write_text("keep = true\n")

    # The write fails after the temporary file exists.
    with pytest.raises(OSError, match="too large") as failed, file_size_limit(16):
        replace(workspace, "config.toml", b"x" * 64)

    assert failed.value.errno == errno.EFBIG
    assert target.read_text() == "keep = true\n"
    assert entries(workspace) == ["config.toml"]


def test_atomic_write_over_a_directory_fails_without_leaving_a_temporary_file(
    workspace: Path,
) -> None:
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_bytes(b"\x7fELF")

    with pytest.raises(OSError):  # the final rename cannot replace a directory
        replace(workspace, "build", b"text")

    assert entries(workspace) == ["build"]
    assert (workspace / "build" / "out.o").read_bytes() == b"\x7fELF"


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(workspace: Path) -> None:
    target = workspace / "secret.env"
    target.write_text("A=1\n")
    target.chmod(0o600)

    replace(workspace, "secret.env", b"A=2\n")

    assert stat.S_IMODE(target.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("data", "binary"),
    [
        (b"plain text\n", False),
        ("ünïcödé ✓\n".encode(), False),
        (b"", False),
        (b"text\x00more", True),
        (b"\xff\xfe\x00\x00", True),
        (b"caf\xe9", True),
        (b"a" * 9000 + b"\x00", False),  # NUL after the first 8 KiB is still valid UTF-8
    ],
)
def test_is_binary(data: bytes, binary: bool) -> None:
    assert is_binary(data) is binary
