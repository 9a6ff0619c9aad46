"""glob and grep over a real scratch workspace, and the glob matcher underneath them."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from agent_tutorial.adapters.filesystem import SKIPPED_DIRECTORIES, compile_glob
from agent_tutorial.adapters.gitignore import MAX_IGNORE_FILE_BYTES
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry, ToolResult
from agent_tutorial.features.builtin_tools import (
    GLOB_RESULT_LIMIT,
    GREP_LINE_CHAR_LIMIT,
    GREP_MATCH_LIMIT,
    MAX_TEXT_FILE_BYTES,
    search_tools,
)
from tests.conftest import CliRun
from tests.loopback import LoopbackServer, text_stream, tool_stream


def run_tool(workspace: Path, name: str, **arguments: object) -> ToolResult:
    registry = ToolRegistry(search_tools(workspace))
    return registry.run(tool_call("call-1", name, orjson.dumps(arguments).decode()))


def glob_paths(workspace: Path, **arguments: object) -> str:
    """The paths glob listed (without its notes), after checking that its first line
    counts them right."""
    result = run_tool(workspace, "glob", **arguments)
    assert not result.is_error, result.content
    first, _, listed = result.content.partition("\n")
    paths = [line for line in listed.split("\n") if not line.startswith("[")]
    directories = sum(path.endswith("/") for path in paths)
    files = len(paths) - directories
    counted = " and ".join(
        [f"{files} file" + "s" * (files != 1)] * bool(files)
        + [f"{directories} director" + ("ies" if directories != 1 else "y")] * bool(directories)
    )
    if "more not shown" not in listed:  # all of them are listed
        verb = "matches" if len(paths) == 1 else "match"
        assert first == f"{counted} {verb} {arguments['pattern']!r}:"
    return "\n".join(paths)


def make_files(workspace: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


@pytest.fixture
def project(workspace: Path) -> Path:
    make_files(
        workspace,
        {
            "setup.py": "import setuptools\n",
            "src/app/main.py": "def main():\n    return helper()\n",
            "src/app/util.py": "def helper():\n    return 42\n",
            "src/app/types.pyi": "def helper() -> int: ...\n",
            "docs/index.md": "# main\n",
        },
    )
    return workspace


# glob


def test_glob_double_star_finds_files_at_every_depth_sorted(project: Path) -> None:
    result = glob_paths(project, pattern="**/*.py")

    assert result == "setup.py\nsrc/app/main.py\nsrc/app/util.py"


def test_glob_without_a_slash_matches_names_at_any_depth(project: Path) -> None:
    """As grep's glob filter, .gitignore and ripgrep's --glob do: asked for the Python files
    "subfolders included", issue 16's 1.5B model called `*.py`, saw one and answered 1."""
    assert glob_paths(project, pattern="*.py") == "setup.py\nsrc/app/main.py\nsrc/app/util.py"


def test_glob_with_a_slash_single_star_stays_in_one_directory(project: Path) -> None:
    assert glob_paths(project, pattern="src/*") == "src/app/"
    assert glob_paths(project, pattern="src/app/*.py") == "src/app/main.py\nsrc/app/util.py"


def test_glob_results_are_workspace_relative_under_a_subdirectory(project: Path) -> None:
    result = glob_paths(project, pattern="*.py", path="src/app")

    assert result == "src/app/main.py\nsrc/app/util.py"


def test_glob_marks_directories_with_a_slash(project: Path) -> None:
    assert glob_paths(project, pattern="src/*") == "src/app/"


def test_glob_supports_brace_alternatives(project: Path) -> None:
    result = glob_paths(project, pattern="**/*.{pyi,md}")

    assert result == "docs/index.md\nsrc/app/types.pyi"


@pytest.mark.parametrize("skipped", sorted(SKIPPED_DIRECTORIES))
def test_glob_skips_tool_and_cache_directories(workspace: Path, skipped: str) -> None:
    make_files(workspace, {f"{skipped}/inner/mod.py": "", "kept.py": ""})

    assert glob_paths(workspace, pattern="**/*.py") == "kept.py"


def test_glob_searches_a_skipped_directory_when_asked_to_explicitly(workspace: Path) -> None:
    make_files(workspace, {".venv/lib/site.py": ""})

    result = glob_paths(workspace, pattern="**/*.py", path=".venv")

    assert result == ".venv/lib/site.py"


def test_glob_bounds_its_results_and_says_how_many_more(workspace: Path) -> None:
    for number in range(GLOB_RESULT_LIMIT + 7):
        (workspace / f"f{number:04}.txt").touch()

    lines = run_tool(workspace, "glob", pattern="*.txt").content.split("\n")

    assert len(lines) == 1 + GLOB_RESULT_LIMIT + 1
    assert lines[0] == f"{GLOB_RESULT_LIMIT + 7} files match '*.txt':"  # all of them counted
    assert lines[1] == "f0000.txt"
    assert lines[-1] == "[7 more not shown; narrow the pattern or the path]"


def test_glob_counts_one_file_and_directories_apart(project: Path) -> None:
    assert run_tool(project, "glob", pattern="setup.py").content == (
        "1 file matches 'setup.py':\nsetup.py"
    )
    assert run_tool(project, "glob", pattern="src/**").content.split("\n")[0] == (
        "3 files and 1 directory match 'src/**':"
    )
    assert run_tool(project, "glob", pattern="*").content.split("\n")[0] == (
        "5 files and 3 directories match '*':"
    )


def test_glob_lists_symlinks_that_stay_inside_without_entering_them(workspace: Path) -> None:
    make_files(workspace, {"real/a.py": ""})
    (workspace / "alias").symlink_to("real", target_is_directory=True)

    result = glob_paths(workspace, pattern="**/*")

    assert result == "alias/\nreal/\nreal/a.py"


def test_glob_without_matches_says_so_and_points_to_grep(project: Path) -> None:
    result = run_tool(project, "glob", pattern="**/*.rs")

    assert result == ToolResult(
        "No paths match '**/*.rs' in the workspace. glob matches the names of files and "
        "folders; grep searches the text inside files."
    )


@pytest.mark.parametrize(
    ("pattern", "word"),
    [
        ("**/parse_header.py", "parse_header"),
        ("*config*", "config"),
        ("Widget", "Widget"),
        ("src/abc.py", "abc"),  # three characters: the shortest word named
    ],
)
def test_a_file_name_glob_finds_nothing_names_the_grep_to_call(
    project: Path, pattern: str, word: str
) -> None:
    """The 1.5B model called glob `**/parse_header.py` for a function and then echoed a
    hint that only said what grep does; told what to call, it calls it."""
    result = run_tool(project, "glob", pattern=pattern)

    assert result.content == (
        f"No paths match {pattern!r} in the workspace. glob matches the names of files and "
        f"folders; to search the text inside files, call grep with pattern {word!r}."
    )


@pytest.mark.parametrize("pattern", ["**/*.rs", "ab.txt", "*.{c,h}", "x?.py"])
def test_no_grep_is_named_for_a_pattern_without_a_word(project: Path, pattern: str) -> None:
    assert "call grep" not in run_tool(project, "glob", pattern=pattern).content


def test_a_folder_guessed_wrong_names_the_glob_that_finds_the_files(project: Path) -> None:
    """The 1.5B model called glob `src/**/*.py` in a project without src, then echoed the
    no-match reply as its answer."""
    assert run_tool(project, "glob", pattern="lib/**/*.py").content == (
        "No paths match 'lib/**/*.py' in the workspace, but 3 named '*.py' elsewhere do: "
        "call glob with pattern '*.py' to list them."
    )
    assert run_tool(project, "glob", pattern="docs/main.py").content == (
        "No paths match 'docs/main.py' in the workspace, but 1 named 'main.py' elsewhere "
        "does: call glob with pattern 'main.py' to list them."
    )


@pytest.mark.parametrize("pattern", ["lib/**/*.rs", "lib/**", "lib/*"])
def test_no_other_glob_is_named_when_it_would_find_nothing_new(project: Path, pattern: str) -> None:
    assert "call glob" not in run_tool(project, "glob", pattern=pattern).content


def test_glob_without_a_slash_searches_below_the_path_given(project: Path) -> None:
    assert glob_paths(project, pattern="*.py", path="src") == "src/app/main.py\nsrc/app/util.py"


def test_glob_without_a_slash_lists_folders_at_any_depth_too(project: Path) -> None:
    assert glob_paths(project, pattern="app") == "src/app/"


def test_glob_needs_a_directory(project: Path) -> None:
    assert run_tool(project, "glob", pattern="*", path="setup.py").error_code == "not_a_directory"


def test_glob_reports_a_missing_directory(project: Path) -> None:
    assert run_tool(project, "glob", pattern="*", path="nope").error_code == "not_found"


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("src/**/*.py", "src/x.py", True),
        ("*.py", "a/b.py", False),
        ("?.py", "a.py", True),
        ("?.py", "/.py", False),
        ("[ab].txt", "b.txt", True),
        ("[!ab].txt", "c.txt", True),
        ("[!ab].txt", "a.txt", False),
        ("file.(1)+", "file.(1)+", True),
        ("src/**", "src/a/b", True),
    ],
)
def test_compile_glob(pattern: str, path: str, matches: bool) -> None:
    assert (compile_glob(pattern).fullmatch(path) is not None) is matches


# grep


def test_grep_returns_path_line_and_text(project: Path) -> None:
    result = run_tool(project, "grep", pattern=r"def \w+\(")

    assert result.content == (
        "src/app/main.py:1:def main():\nsrc/app/types.pyi:1:def helper() -> int: ...\n"
        "src/app/util.py:1:def helper():"
    )


def test_grep_anchors_match_each_line(project: Path) -> None:
    result = run_tool(project, "grep", pattern=r"^\s+return")

    assert (
        result.content == "src/app/main.py:2:    return helper()\nsrc/app/util.py:2:    return 42"
    )


def test_grep_glob_without_slash_matches_file_names_at_any_depth(project: Path) -> None:
    result = run_tool(project, "grep", pattern="helper", glob="*.pyi")

    assert result.content == "src/app/types.pyi:1:def helper() -> int: ..."


def test_grep_glob_with_slash_matches_paths_relative_to_the_search_root(project: Path) -> None:
    result = run_tool(project, "grep", pattern="main", glob="docs/*")

    assert result.content == "docs/index.md:1:# main"


def test_grep_searches_a_single_file(project: Path) -> None:
    result = run_tool(project, "grep", pattern="helper", path="src/app/main.py")

    assert result.content == "src/app/main.py:2:    return helper()"


def test_grep_skips_binary_files_in_a_directory(workspace: Path) -> None:
    (workspace / "image.png").write_bytes(b"\x89PNG\x00needle")
    (workspace / "latin1.txt").write_bytes(b"needle caf\xe9\n")
    (workspace / "notes.txt").write_text("needle\n")

    assert run_tool(workspace, "grep", pattern="needle").content == "notes.txt:1:needle"


def test_grep_refuses_a_binary_file_named_explicitly(workspace: Path) -> None:
    (workspace / "image.png").write_bytes(b"\x89PNG\x00needle")

    result = run_tool(workspace, "grep", pattern="needle", path="image.png")

    assert result.error_code == "binary_file"


@pytest.mark.parametrize("skipped", sorted(SKIPPED_DIRECTORIES))
def test_grep_skips_tool_and_cache_directories(workspace: Path, skipped: str) -> None:
    make_files(workspace, {f"{skipped}/mod.py": "needle\n", "kept.py": "needle\n"})

    assert run_tool(workspace, "grep", pattern="needle").content == "kept.py:1:needle"


def test_grep_bounds_its_matches_and_says_so(workspace: Path) -> None:
    (workspace / "many.txt").write_text("hit\n" * (GREP_MATCH_LIMIT + 50))

    lines = run_tool(workspace, "grep", pattern="hit").content.split("\n")

    assert len(lines) == GREP_MATCH_LIMIT + 1
    assert lines[GREP_MATCH_LIMIT - 1] == f"many.txt:{GREP_MATCH_LIMIT}:hit"
    assert (
        lines[-1] == f"[stopped after {GREP_MATCH_LIMIT} matches; narrow the pattern, path or glob]"
    )


def test_grep_clips_long_lines(workspace: Path) -> None:
    (workspace / "wide.txt").write_text("needle" + "z" * 1000 + "\n")

    result = run_tool(workspace, "grep", pattern="needle")

    assert result.content == "wide.txt:1:" + ("needle" + "z" * 1000)[:GREP_LINE_CHAR_LIMIT] + " …"


def test_grep_does_not_report_the_end_of_the_last_line_as_a_line(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\n")

    assert (
        run_tool(workspace, "grep", pattern="^$").content.partition(". ")[0]
        == "No matches for '^$' in the workspace"
    )


def test_grep_shows_crlf_lines_without_carriage_returns(workspace: Path) -> None:
    (workspace / "dos.txt").write_bytes(b"alpha\r\nbeta\r\n")

    assert run_tool(workspace, "grep", pattern="a$").content == "dos.txt:1:alpha\ndos.txt:2:beta"


@pytest.mark.parametrize("pattern", ["(unclosed", "a{99999999999}", "(" * 2000 + ")" * 2000])
def test_grep_invalid_regex_is_a_tool_error(project: Path, pattern: str) -> None:
    result = run_tool(project, "grep", pattern=pattern)

    assert result.error_code == "invalid_regex"


def test_grep_without_matches_says_so(project: Path) -> None:
    result = run_tool(project, "grep", pattern="nothing", path="src")

    assert result.content == (
        "No matches for 'nothing' in src. Case and spaces count; a shorter pattern finds more."
    )


def test_grep_of_one_file_without_matches_names_the_read_to_call(workspace: Path) -> None:
    """Issue 16's 1.5B model grepped `port=\\d+` in a file holding `port = 8731` and then
    called the same grep again."""
    make_files(workspace, {"config/settings.ini": "[server]\nport = 8731\n"})

    result = run_tool(workspace, "grep", pattern=r"port=\d+", path="config/settings.ini")

    assert result.content == (
        "No matches for 'port=\\\\d+' in config/settings.ini. To see the whole file, call "
        "read_file with path 'config/settings.ini'."
    )


def test_grep_skips_files_too_large_and_names_them(workspace: Path) -> None:
    (workspace / "huge.log").write_bytes(b"needle\n" * (MAX_TEXT_FILE_BYTES // 7 + 1))
    (workspace / "small.txt").write_text("needle\n")

    result = run_tool(workspace, "grep", pattern="needle")

    assert result.content == (
        f"small.txt:1:needle\n[skipped 1 files over {MAX_TEXT_FILE_BYTES} bytes "
        "(search them with bash): huge.log]"
    )


# grep's time budget

CATASTROPHIC = r"^x|(a+)+$"
"""Backtracks for minutes on a long run of `a`s with no match at its end."""


def crafted_files(workspace: Path) -> None:
    make_files(workspace, {"a.txt": "x marks the spot\n", "b.txt": "a" * 100_000 + "b\n"})


def test_grep_stops_at_its_time_budget_with_the_matches_so_far(workspace: Path) -> None:
    crafted_files(workspace)
    registry = ToolRegistry(search_tools(workspace, grep_time_budget_s=0.5))

    result = registry.run(
        tool_call("call-1", "grep", orjson.dumps({"pattern": CATASTROPHIC}).decode())
    )

    assert result.error_code == "timeout"
    assert result.content.endswith("Matches so far:\na.txt:1:x marks the spot")


def test_a_catastrophic_grep_through_the_cli_returns_in_time(
    workspace: Path, loopback: LoopbackServer, run_cli_process: Callable[..., CliRun]
) -> None:
    crafted_files(workspace)
    loopback.queue(
        tool_stream([("call_1", "grep", {"pattern": CATASTROPHIC})]), text_stream("gave up")
    )

    run = run_cli_process(
        "run", "-c", "2", "-p", "find it", env={"AGENT_TUTORIAL_GREP_TIME_BUDGET_S": "0.5"}
    )

    assert run.exit_code == 0, run.stderr
    (tool_message,) = [m for m in loopback.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_message["content"].startswith(
        "Error [timeout]: grep stopped after its 0.5 s budget"
    )


# .gitignore


@pytest.fixture
def repository(workspace: Path) -> Path:
    """A git repository with ignored files at the root, nested, and through info/exclude."""
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    make_files(
        workspace,
        {
            ".gitignore": "*.log\nbuild/\n!keep.log\n",
            "src/.gitignore": "generated.py\n",
            "src/app.py": "needle\n",
            "src/generated.py": "needle\n",
            "debug.log": "needle\n",
            "keep.log": "needle\n",
            "build/out.txt": "needle\n",
            "local/notes.txt": "needle\n",
        },
    )
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "exclude").write_text("local/\n")
    return workspace


SEARCHED = [".gitignore", "keep.log", "src/.gitignore", "src/app.py"]


def test_glob_leaves_out_what_gitignore_ignores(repository: Path) -> None:
    result = glob_paths(repository, pattern="**/*")

    assert result.splitlines() == [".gitignore", "keep.log", "src/", *SEARCHED[2:]]


def test_grep_leaves_out_what_gitignore_ignores(repository: Path) -> None:
    result = run_tool(repository, "grep", pattern="needle")

    assert result.content.splitlines() == ["keep.log:1:needle", "src/app.py:1:needle"]


def test_include_ignored_searches_ignored_files_too(repository: Path) -> None:
    result = run_tool(repository, "grep", pattern="needle", include_ignored=True)

    assert [line.split(":")[0] for line in result.content.splitlines()] == [
        "build/out.txt",
        "debug.log",
        "keep.log",
        "local/notes.txt",
        "src/app.py",
        "src/generated.py",
    ]


@pytest.mark.parametrize(
    ("path", "found"),
    [("build", "build/out.txt"), ("debug.log", "debug.log"), ("local", "local/notes.txt")],
)
def test_an_ignored_path_named_explicitly_is_searched(
    repository: Path, path: str, found: str
) -> None:
    result = run_tool(repository, "grep", pattern="needle", path=path)

    assert result.content == f"{found}:1:needle"


def test_gitignore_does_not_apply_outside_a_git_repository(workspace: Path) -> None:
    make_files(workspace, {".gitignore": "*.log\n", "debug.log": "needle\n"})

    result = run_tool(workspace, "grep", pattern="needle")

    assert result.content == "debug.log:1:needle"


def test_a_gitignore_over_the_read_cap_applies_its_leading_rules(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    padding = ("#" + "x" * 99 + "\n") * (MAX_IGNORE_FILE_BYTES // 100 + 1)
    make_files(
        workspace,
        {
            ".gitignore": "*.log\n" + padding + "*.txt\n",  # `*.txt` lies past the cap
            "debug.log": "needle\n",
            "notes.txt": "needle\n",
        },
    )
    assert (workspace / ".gitignore").stat().st_size > MAX_IGNORE_FILE_BYTES

    found = glob_paths(workspace, pattern="**/*")
    matches = run_tool(workspace, "grep", pattern="needle")

    assert not matches.is_error
    assert found.splitlines() == [".gitignore", "notes.txt"]
    assert matches.content == "notes.txt:1:needle"


@pytest.fixture
def deep_tree(workspace: Path) -> Iterator[int]:
    """Directories nested deeper than Python's recursion limit, removed bottom up after the
    test (shutil.rmtree, and so pytest's own clean-up, recurses and would fail on them)."""
    depth = 1_500
    directory = os.open(workspace, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=directory)
        deeper = os.open("d", os.O_RDONLY, dir_fd=directory)
        os.close(directory)
        directory = deeper
    os.close(directory)
    yield depth
    for level in range(depth, 0, -1):
        workspace.joinpath(*["d"] * level).rmdir()


def test_grep_through_a_tree_nested_thousands_deep_does_not_crash(
    workspace: Path, deep_tree: int
) -> None:
    (workspace / "top.txt").write_text("needle\n")

    result = run_tool(workspace, "grep", pattern="needle")

    assert result.content == "top.txt:1:needle"
