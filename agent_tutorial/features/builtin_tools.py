"""The chapter-2 tools: bash, read_file, write_file, edit_file, glob and grep.

Every path is resolved through open directory descriptors of the workspace
(`adapters/filesystem.py`), so no tool reads or writes outside it, even while someone swaps
a directory for a symlink. Expected failures raise `ToolFailure` and reach the model as
`tool_error`s.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial, wraps
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, ParamSpec

from pydantic import BaseModel, ConfigDict, Field

from agent_tutorial.adapters.filesystem import (
    BINARY_SNIFF_BYTES,
    ProtectedPathError,
    Target,
    Workspace,
    WorkspaceEntry,
    WorkspacePathError,
    compile_glob,
    is_binary,
    open_entry,
    open_for_reading,
    replace_file,
)
from agent_tutorial.adapters.gitignore import search_walk
from agent_tutorial.core.tools import (
    FileChange,
    ToolDefinition,
    ToolFailure,
    ToolResult,
    tool_success,
)
from agent_tutorial.features.bash import bash_tool as bash_tool  # the chapter-2 set, whole
from agent_tutorial.features.line_search import InvalidPattern, LineSearch, SearchTimeout

READ_DEFAULT_LIMIT = 2_000
"""Lines read_file returns when the model gives no limit."""
READ_OUTPUT_BUDGET_BYTES = 100_000
"""read_file stops early (and says where to go on) once its output reaches this size."""
LINE_CHAR_LIMIT = 2_000
"""read_file cuts longer lines (minified code, data) at this many characters."""
_MAX_LINE_BYTES = 4 * LINE_CHAR_LIMIT + 4  # enough bytes for LINE_CHAR_LIMIT characters
MAX_TEXT_FILE_BYTES = 10 * 1024 * 1024
"""edit_file refuses, and grep skips, larger files; bash tools handle those better."""
GLOB_RESULT_LIMIT = 500
GREP_MATCH_LIMIT = 200
GREP_LINE_CHAR_LIMIT = 300
GREP_TIME_BUDGET_S = 10.0
"""Seconds one grep call may search before it stops and returns the matches so far."""


class _ToolInput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReadFileInput(_ToolInput):
    path: str = Field(description="The file, relative to the workspace (or absolute inside it).")
    offset: int = Field(default=1, ge=1, description="The 1-based line number to start at.")
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"How many lines to return (default {READ_DEFAULT_LIMIT}).",
    )


class WriteFileInput(_ToolInput):
    path: str = Field(description="The file, relative to the workspace (or absolute inside it).")
    content: str = Field(description="The complete new content of the file.")


class EditFileInput(_ToolInput):
    path: str = Field(description="The file, relative to the workspace (or absolute inside it).")
    old_text: str = Field(
        min_length=1,
        description="Text to replace, exactly as in the file (whitespace included, without "
        "read_file's line-number prefixes).",
    )
    new_text: str = Field(description="The replacement text.")
    replace_all: bool = Field(
        default=False,
        description="Replace every occurrence; otherwise old_text must occur exactly once.",
    )


class GlobInput(_ToolInput):
    pattern: str = Field(
        min_length=1,
        description='A glob such as "*.py", "src/*.ts" or "**/test_*.{py,pyi}". Without a "/" '
        "it matches names at any depth; with one, the path relative to `path`, where `*` "
        "stays inside one directory and `**/` spans any depth.",
    )
    path: str = Field(default=".", description="The directory to search in.")
    include_ignored: bool = Field(
        default=False, description="Also search what .gitignore ignores in a git repository."
    )


class GrepInput(_ToolInput):
    pattern: str = Field(
        min_length=1,
        description="A Python regular expression, matched against each line separately "
        "(start it with (?i) to ignore case).",
    )
    path: str = Field(default=".", description="The file or directory to search.")
    glob: str | None = Field(
        default=None,
        description='Only search files matching this glob, such as "*.py" (without a "/" it '
        'matches file names at any depth) or "src/**/*.ts" (relative to `path`).',
    )
    include_ignored: bool = Field(
        default=False, description="Also search what .gitignore ignores in a git repository."
    )


def file_tools(
    workspace: Path,
    *,
    state_dir: Path | None = None,
    read_only: bool = False,
    protected: Sequence[Path] = (),
) -> list[ToolDefinition]:
    """read_file, write_file and edit_file inside `workspace`; `state_dir` is the project's
    state folder when it lies above it (its artifacts/ and skills/ stay readable);
    `protected` the files they may read but never write (the hooks' scripts). With
    `read_only` (the session's `--sandbox read-only`, in Codex's meaning: nothing in the
    workspace changes) write_file and edit_file refuse every call."""
    files = Workspace(workspace, state_dir=state_dir, protected=protected)
    read_file = ToolDefinition(
        name="read_file",
        description=(
            "Read a UTF-8 text file in the workspace. Each line comes back as its 1-based "
            "number, a tab, then the text; the number and tab are not part of the file. "
            f"Returns up to {READ_DEFAULT_LIMIT} lines from `offset` and says how to read on; "
            f"lines longer than {LINE_CHAR_LIMIT} characters are cut. Binary files and "
            "directories are refused, and so is .agent_tutorial/ except its artifacts/ and "
            "skills/."
        ),
        input_model=ReadFileInput,
        handler=partial(_read_file, files),
        effect="read",
        subject_field="path",
    )
    write_file = ToolDefinition(
        name="write_file",
        description=(
            "Create or overwrite a file in the workspace with the given content, creating "
            "missing parent directories. The write is atomic. To change part of an existing "
            "file, prefer edit_file."
        ),
        input_model=WriteFileInput,
        handler=partial(_refuse_write, "write_file") if read_only else partial(_write_file, files),
        effect="write",
        subject_field="path",
        preview=partial(_previewed, files, _written),
    )
    edit_file = ToolDefinition(
        name="edit_file",
        description=(
            "Replace exact text in a text file. old_text must occur exactly once (include "
            "surrounding lines to make it unique) unless replace_all is true. Read the file "
            "first so old_text matches it character for character."
        ),
        input_model=EditFileInput,
        handler=partial(_refuse_write, "edit_file") if read_only else partial(_edit_file, files),
        effect="write",
        subject_field="path",
        preview=partial(_previewed, files, _edited),
    )
    return [read_file, write_file, edit_file]


_SKIPS = (
    "Skips .git, .venv, node_modules, caches and .agent_tutorial, and in a git repository "
    "what .gitignore ignores (include_ignored=true looks there too); a path you name "
    "explicitly is always searched."
)
_ODD_NAMES = (
    "A byte of a name that is not UTF-8 is shown as \\xe9; pass the name to the file tools "
    "as shown."
)


def search_tools(
    workspace: Path,
    *,
    grep_time_budget_s: float = GREP_TIME_BUDGET_S,
    state_dir: Path | None = None,
) -> list[ToolDefinition]:
    """glob and grep inside `workspace` (and `state_dir` as for `file_tools`)."""
    files = Workspace(workspace, state_dir=state_dir)
    glob = ToolDefinition(
        name="glob",
        description=(
            "Find files and directories in the workspace whose path matches a glob. Returns "
            "a count, then sorted workspace-relative paths (directories end in /), at most "
            f"{GLOB_RESULT_LIMIT}. {_SKIPS} {_ODD_NAMES}"
        ),
        input_model=GlobInput,
        handler=partial(_glob, files),
        effect="read",
        subject_field="pattern",
    )
    grep = ToolDefinition(
        name="grep",
        description=(
            "Search text files in the workspace for a regular expression. Returns "
            "`path:line:text` for each matching line, at most "
            f"{GREP_MATCH_LIMIT}, and stops after {grep_time_budget_s:g} s with the matches "
            f"so far. Binary files are skipped. {_SKIPS} {_ODD_NAMES}"
        ),
        input_model=GrepInput,
        handler=partial(_grep, files, grep_time_budget_s),
        effect="read",
        subject_field="pattern",
    )
    return [glob, grep]


# paths: every handler below maps the path errors the workspace raises to tool errors

_Handler = ParamSpec("_Handler")


def _path_errors(handler: Callable[_Handler, ToolResult]) -> Callable[_Handler, ToolResult]:
    """The handler's last argument is its tool input, with the `path` the model gave."""

    @wraps(handler)
    def checked(*args: _Handler.args, **kwargs: _Handler.kwargs) -> ToolResult:
        try:
            return handler(*args, **kwargs)
        except ProtectedPathError as error:
            raise ToolFailure("protected_path", str(error)) from None
        except WorkspacePathError as error:
            raise ToolFailure("path_outside_workspace", str(error)) from None
        except NotADirectoryError:
            raise ToolFailure(
                "not_a_directory",
                f"{getattr(args[-1], 'path', '')!r} goes through a file, not a directory",
            ) from None
        except ToolFailure as failure:
            if failure.code != "not_found" or not isinstance(args[0], Workspace):
                raise
            hint = _inside_itself(args[0], str(getattr(args[-1], "path", "")))
            raise ToolFailure("not_found", failure.message + hint) from None

    return checked


def _inside_itself(files: Workspace, given: str) -> str:
    """A hint for a path that starts with the workspace folder's own name (`project/calc.py`
    in project/): small models copy that from an absolute path in a traceback, and a bare
    not_found sent the 1.5B model of issue 16 to write a new file there instead."""
    parts = PurePosixPath(given).parts
    name = files.given.name
    if len(parts) < 2 or parts[0] != name:
        return ""
    return (
        f"; paths are relative to the workspace, which is {name}/ itself: did you mean "
        f"{PurePosixPath(*parts[1:]).as_posix()!r}?"
    )


def _existing(target: Target, given: str) -> os.stat_result:
    if target.info is None:
        raise ToolFailure("not_found", f"{given!r} does not exist")
    return target.info


def _place(target: Target) -> str:
    return "the workspace" if target.name is None else target.relative.as_posix()


# read_file


@dataclass(frozen=True, slots=True)
class _LineWindow:
    lines: tuple[tuple[int, str], ...]
    lines_seen: int
    more_follows: bool


@_path_errors
def _read_file(files: Workspace, arguments: ReadFileInput) -> ToolResult:
    limit = arguments.limit or READ_DEFAULT_LIMIT
    with files.target(arguments.path) as target:
        if stat.S_ISDIR(_existing(target, arguments.path).st_mode):
            raise ToolFailure(
                "is_directory", f"{arguments.path!r} is a directory; use glob to list it"
            )
        with _open_regular_file(open_for_reading(target), arguments.path) as handle:
            if b"\0" in handle.read(BINARY_SNIFF_BYTES):
                raise _binary_file(arguments.path)
            handle.seek(0)
            try:
                window = _read_window(handle, arguments.offset, limit)
            except UnicodeDecodeError:
                raise _binary_file(arguments.path) from None
    shown_as = target.relative.as_posix()
    if not window.lines:
        if window.lines_seen == 0:
            return tool_success(f"({shown_as} is empty)")
        raise ToolFailure(
            "offset_past_end",
            f"offset {arguments.offset} is past the end of {shown_as} ({window.lines_seen} lines)",
        )
    return tool_success(_number_lines(window))


def _read_window(handle: BinaryIO, offset: int, limit: int) -> _LineWindow:
    """Lines from `offset` on, until `limit` lines or the output budget is reached.

    Only the lines shown are decoded, so a huge file costs one pass up to the window.
    """
    shown: list[tuple[int, str]] = []
    budget = READ_OUTPUT_BUDGET_BYTES
    number = 0
    for number, raw in enumerate(_bounded_lines(handle), start=1):
        if number < offset:
            continue
        if len(shown) == limit:
            return _LineWindow(tuple(shown), number - 1, more_follows=True)
        text = _line_text(raw)
        cost = len(text.encode("utf-8")) + 8  # the number prefix
        if shown and cost > budget:
            return _LineWindow(tuple(shown), number - 1, more_follows=True)
        shown.append((number, text))
        budget -= cost
    return _LineWindow(tuple(shown), number, more_follows=False)


def _bounded_lines(handle: BinaryIO) -> Iterator[bytes]:
    """Each line, cut to `_MAX_LINE_BYTES` so one enormous line cannot fill memory."""
    while line := handle.readline(_MAX_LINE_BYTES):
        rest = line
        while len(rest) == _MAX_LINE_BYTES and not rest.endswith(b"\n"):
            rest = handle.readline(_MAX_LINE_BYTES)  # skip the remainder
        yield line


def _line_text(raw: bytes) -> str:
    """Decode one line strictly; a line cut by `_bounded_lines` may end mid-character."""
    complete = len(raw) < _MAX_LINE_BYTES or raw.endswith(b"\n")
    text = codecs.getincrementaldecoder("utf-8")().decode(raw, final=complete)
    text = text.removesuffix("\n").removesuffix("\r")
    if len(text) > LINE_CHAR_LIMIT:
        return text[:LINE_CHAR_LIMIT] + " … [line cut]"
    return text


def _number_lines(window: _LineWindow) -> str:
    width = len(str(window.lines[-1][0]))
    numbered = "\n".join(f"{number:>{width}}\t{text}" for number, text in window.lines)
    if not window.more_follows:
        return numbered
    first, last = window.lines[0][0], window.lines[-1][0]
    return (
        f"{numbered}\n[lines {first}–{last} shown; the file goes on: "
        f"read_file with offset={last + 1} reads more]"
    )


# write_file and edit_file


def _refuse_write(tool_name: str, arguments: WriteFileInput | EditFileInput) -> ToolResult:
    raise ToolFailure(
        "read_only_sandbox",
        f"{tool_name} cannot change {arguments.path!r}: this session's sandbox is read-only "
        "(--sandbox read-only), so nothing in the workspace may change. If the change is "
        "needed, ask the user to run with --sandbox workspace-write.",
    )


@_path_errors
def _write_file(files: Workspace, arguments: WriteFileInput) -> ToolResult:
    with files.target(arguments.path, for_writing=True) as target:
        if target.info is not None:
            _check_writable(target, arguments.path)
        replace_file(target, arguments.content.encode("utf-8"))
    size = len(arguments.content.encode("utf-8"))
    verb = "Overwrote" if target.exists else "Created"
    return tool_success(f"{verb} {target.relative.as_posix()} ({size} bytes).{_links(target)}")


@_path_errors
def _edit_file(files: Workspace, arguments: EditFileInput) -> ToolResult:
    with files.target(arguments.path, for_writing=True) as target:
        _existing(target, arguments.path)
        _check_writable(target, arguments.path)
        text = _text_of(open_for_reading(target), arguments.path)
        old_text, new_text = arguments.old_text, arguments.new_text
        count = text.count(old_text)
        if count == 0:
            raise ToolFailure("no_match", _no_match_message(arguments.path, text, old_text))
        if count > 1 and not arguments.replace_all:
            raise ToolFailure(
                "multiple_matches",
                f"old_text occurs {count} times in {arguments.path!r}; include more "
                "surrounding text to make it unique, or set replace_all",
            )
        if old_text == new_text:
            raise ToolFailure("no_change", "old_text and new_text are identical")
        first_line = text.count("\n", 0, text.index(old_text)) + 1
        replaced = count if arguments.replace_all else 1
        replace_file(target, text.replace(old_text, new_text, replaced).encode("utf-8"))
    occurrences = "1 occurrence" if replaced == 1 else f"{replaced} occurrences"
    edited = tool_success(
        f"Edited {target.relative.as_posix()}: replaced {occurrences} "
        f"(first at line {first_line}).{_links(target)}"
    )
    after = text.replace(old_text, new_text, replaced)
    return replace(edited, change=FileChange(target.relative.as_posix(), text, after))


def _previewed(
    files: Workspace,
    change: Callable[[str | None, Any], str],
    arguments: WriteFileInput | EditFileInput,
) -> FileChange | None:
    """The change a write_file or edit_file call would make, read as the call would read
    the file; None when the call would fail (it then says why itself)."""
    try:
        with files.target(arguments.path, for_writing=True) as target:
            before = None if target.info is None else _text_of(open_for_reading(target), "")
        return FileChange(target.relative.as_posix(), before, change(before, arguments))
    except (ToolFailure, WorkspacePathError, OSError, UnicodeDecodeError, ValueError):
        return None


def _written(_before: str | None, arguments: WriteFileInput) -> str:
    return arguments.content


def _edited(before: str | None, arguments: EditFileInput) -> str:
    found = 0 if before is None else before.count(arguments.old_text)
    if before is None or found == 0 or (found > 1 and not arguments.replace_all):
        raise ValueError("the edit would not apply")
    return before.replace(arguments.old_text, arguments.new_text, found)


def _check_writable(target: Target, given: str) -> None:
    """The atomic rename would replace a file even where opening it for writing fails, so
    honour the permissions here: a file nobody may write is one the user protected."""
    mode = _existing(target, given).st_mode
    if stat.S_ISDIR(mode):
        raise ToolFailure("is_directory", f"{given!r} is a directory")
    if not stat.S_ISREG(mode):
        raise ToolFailure(
            "not_a_regular_file", f"{given!r} is not a regular file (a pipe, socket or device)"
        )
    assert target.name is not None  # only the workspace root has no name, and it is a directory
    writable = os.access(target.name, os.W_OK, dir_fd=target.directory)
    if not writable or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise ToolFailure(
            "read_only", f"{given!r} is read-only; ask the user before changing its permissions"
        )


def _links(target: Target) -> str:
    """Say so when other hard links keep the old content (the rename replaced one name)."""
    others = target.info.st_nlink - 1 if target.info is not None else 0
    if others < 1:
        return ""
    return f" Its {others} other hard link(s) still hold the old content."


def _no_match_message(given: str, text: str, old_text: str) -> str:
    message = f"old_text does not occur in {given!r}; read the file and copy the text exactly"
    if "\r\n" in text and "\n" in old_text and "\r\n" not in old_text:
        message += " (the file has CRLF line endings)"
    return message


# glob and grep


@_path_errors
def _glob(files: Workspace, arguments: GlobInput) -> ToolResult:
    pattern, include_ignored = arguments.pattern, arguments.include_ignored
    with files.target(arguments.path) as base:
        if not stat.S_ISDIR(_existing(base, arguments.path).st_mode):
            raise ToolFailure("not_a_directory", f"{arguments.path!r} is not a directory")
        found = _globbed(files, base, _GlobRule.of(pattern), include_ignored)
        if found:
            return tool_success("\n".join(_glob_lines(pattern, found)))
        # Nothing matched: look once more for the name alone, in every folder.
        name = pattern.rsplit("/", 1)[-1]
        elsewhere = 0
        if "/" in pattern and name.strip("*"):
            elsewhere = len(_globbed(files, base, _GlobRule.of(name), include_ignored))
    return tool_success(_glob_no_match(pattern, _place(base), elsewhere))


def _globbed(files: Workspace, base: Target, rule: _GlobRule, include_ignored: bool) -> list[str]:
    """The paths below `base` that `rule` matches, sorted; folders end in a slash."""
    return sorted(
        entry.relative.as_posix() + ("/" if entry.is_dir else "")
        for entry in search_walk(files, base, include_ignored=include_ignored)
        if rule.matches(entry, base)
    )


@dataclass(frozen=True)
class _GlobRule:
    """One rule for glob's pattern and grep's `glob` filter. With a slash, a pattern matches
    the path below the folder searched; without one, a name at any depth, as .gitignore
    patterns and ripgrep's --glob do. Models mean every folder: asked for the Python files
    "subfolders included", the 1.5B model of issue 16 called glob with `*.py`."""

    matcher: re.Pattern[str]
    names_only: bool

    @classmethod
    def of(cls, pattern: str) -> _GlobRule:
        try:
            return cls(compile_glob(pattern), "/" not in pattern)
        except ValueError as error:
            raise ToolFailure("invalid_glob", str(error)) from None

    def matches(self, entry: WorkspaceEntry, base: Target) -> bool:
        if self.names_only:
            return self.matcher.fullmatch(entry.name) is not None
        below = entry.relative.relative_to(base.relative).as_posix()
        return self.matcher.fullmatch(below) is not None


def _glob_lines(pattern: str, found: list[str]) -> list[str]:
    lines = [f"{_counted(found)} {pattern!r}:", *found[:GLOB_RESULT_LIMIT]]
    if len(found) > GLOB_RESULT_LIMIT:
        more = len(found) - GLOB_RESULT_LIMIT
        lines.append(f"[{more} more not shown; narrow the pattern or the path]")
    return lines


def _glob_no_match(pattern: str, place: str, elsewhere: int) -> str:
    """Said as what to call next: a small model follows "call X with Y". Issue 16's 1.5B
    model called glob `src/**/*.py` where there is no src, and `**/parse_header.py` for a
    function, then echoed a reply that only said what grep does as its answer."""
    found_none = f"No paths match {pattern!r} in {place}"
    name = pattern.rsplit("/", 1)[-1]
    if elsewhere:
        return (
            f"{found_none}, but {elsewhere} named {name!r} elsewhere "
            f"{'does' if elsewhere == 1 else 'do'}: call glob with pattern {name!r} to list them."
        )
    # A file name that is a plain word may be a name inside a file.
    word = name.split(".", 1)[0].strip("*?")
    if re.fullmatch(r"\w{3,}", word):
        return (
            f"{found_none}. glob matches the names of files and folders; to search the text "
            f"inside files, call grep with pattern {word!r}."
        )
    return (
        f"{found_none}. glob matches the names of files and folders; grep searches the text "
        "inside files."
    )


def _counted(found: list[str]) -> str:
    """How many files and directories match, first: a small model asked "how many"
    miscounts a bare list (issue 16 saw it)."""
    directories = sum(path.endswith("/") for path in found)
    parts = [
        _plural(len(found) - directories, "file"),
        _plural(directories, "directory", "directories"),
    ]
    counted = " and ".join(part for part in parts if not part.startswith("0 "))
    return f"{counted} {'matches' if len(found) == 1 else 'match'}"


def _plural(count: int, one: str, many: str = "") -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


@dataclass
class _GrepRun:
    """One grep call's matches, within its match limit and its time budget."""

    search: LineSearch
    matches: list[str]

    def collect(self, shown_as: str, text: str) -> bool:
        """Collect the matching lines of one file; False once the match limit is hit."""
        for number, line in self.search.matching_lines(text):
            if len(self.matches) == GREP_MATCH_LIMIT:
                self.matches.append(
                    f"[stopped after {GREP_MATCH_LIMIT} matches; narrow the pattern, path or glob]"
                )
                return False
            self.matches.append(f"{shown_as}:{number}:{_clip(line)}")
        return True


@_path_errors
def _grep(files: Workspace, budget_s: float, arguments: GrepInput) -> ToolResult:
    run = _GrepRun(_compile_search(arguments.pattern, budget_s), [])
    oversized: list[str] = []
    with files.target(arguments.path) as start:
        try:
            for shown_as, text in _grep_texts(files, start, arguments, oversized):
                if not run.collect(shown_as, text):
                    return tool_success("\n".join(run.matches))
        except SearchTimeout:
            so_far = "\n".join(run.matches) or "(none)"
            raise ToolFailure(
                "timeout",
                f"grep stopped after its {budget_s:g} s budget (a pattern that backtracks "
                f"badly, or a large tree; narrow the pattern or the path). Matches so far:\n"
                f"{so_far}",
            ) from None
    if oversized:
        run.matches.append(
            f"[skipped {len(oversized)} files over {MAX_TEXT_FILE_BYTES} bytes "
            f"(search them with bash): {', '.join(oversized[:5])}]"
        )
    if not run.matches:
        return tool_success(_grep_no_match(arguments.pattern, start))
    return tool_success("\n".join(run.matches))


def _grep_no_match(pattern: str, start: Target) -> str:
    """Said as what to call next. Issue 16's 1.5B model grepped `port=\\d+` in a file that
    holds `port = 8731` and called the same grep again; a file is short enough to read."""
    found_none = f"No matches for {pattern!r} in {_place(start)}."
    if start.info is None or stat.S_ISDIR(start.info.st_mode):
        return f"{found_none} Case and spaces count; a shorter pattern finds more."
    given = start.relative.as_posix()
    return f"{found_none} To see the whole file, call read_file with path {given!r}."


def _grep_texts(
    files: Workspace, start: Target, arguments: GrepInput, oversized: list[str]
) -> Iterator[tuple[str, str]]:
    if stat.S_ISDIR(_existing(start, arguments.path).st_mode):
        return _searchable_texts(files, start, arguments, oversized)
    return iter([(start.relative.as_posix(), _text_of(open_for_reading(start), arguments.path))])


def _compile_search(pattern: str, budget_s: float) -> LineSearch:
    try:
        return LineSearch.compile(pattern, budget_s=budget_s)
    except InvalidPattern as error:
        raise ToolFailure(
            "invalid_regex", f"{pattern!r} is not a valid Python regular expression: {error}"
        ) from None


def _searchable_texts(
    files: Workspace, start: Target, arguments: GrepInput, oversized: list[str]
) -> Iterator[tuple[str, str]]:
    """Workspace-relative name and text of each text file below `start`; symlinks are not
    followed, binary files are skipped and files too large are noted in `oversized`."""
    wanted = _GlobRule.of(arguments.glob) if arguments.glob else None
    for entry in search_walk(files, start, include_ignored=arguments.include_ignored):
        if entry.is_dir or entry.is_symlink:
            continue
        if wanted is not None and not wanted.matches(entry, start):
            continue
        shown_as = entry.relative.as_posix()
        try:
            text = _text_of(open_entry(entry), shown_as)
        except ToolFailure as skipped:
            if skipped.code == "file_too_large":
                oversized.append(shown_as)
            continue
        except OSError:  # unreadable, vanished or swapped for a symlink: skip, as grep -s does
            continue
        yield shown_as, text


def _clip(line: str) -> str:
    if len(line) <= GREP_LINE_CHAR_LIMIT:
        return line
    return line[:GREP_LINE_CHAR_LIMIT] + " …"


# text


def _text_of(descriptor: int, given: str) -> str:
    """The whole text of a file that edit_file and grep may work on."""
    with _open_regular_file(descriptor, given) as handle:
        data = handle.read(BINARY_SNIFF_BYTES)
        if b"\0" in data:  # most binary files show themselves early: read no further
            raise _binary_file(given)
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_TEXT_FILE_BYTES:
            raise ToolFailure(
                "file_too_large",
                f"{given!r} is {size} bytes, over the {MAX_TEXT_FILE_BYTES}-byte limit; "
                "use bash (sed, head, grep) for it",
            )
        data += handle.read()
    if is_binary(data):
        raise _binary_file(given)
    return data.decode("utf-8")


def _open_regular_file(descriptor: int, given: str) -> BinaryIO:
    """Wrap a descriptor opened for reading, refusing directories, pipes, sockets and
    devices: the check is on the open descriptor, so no swap after it can fool it."""
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        if stat.S_ISDIR(mode):
            raise ToolFailure("is_directory", f"{given!r} is a directory")
        raise ToolFailure(
            "not_a_regular_file", f"{given!r} is not a regular file (a pipe, socket or device)"
        )
    return os.fdopen(descriptor, "rb")


def _binary_file(given: str) -> ToolFailure:
    return ToolFailure("binary_file", f"{given!r} is a binary file, not UTF-8 text")
