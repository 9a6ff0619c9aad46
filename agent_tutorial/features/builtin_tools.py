"""The chapter-2 tools: bash, read_file, write_file, edit_file, glob and grep.

Every path goes through `resolve_workspace_path`, so no tool reads or writes outside the
workspace. Expected failures raise `ToolFailure` and reach the model as `tool_error`s.
"""

from __future__ import annotations

import codecs
import os
import re
import stat
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from agent_tutorial.adapters.filesystem import (
    BINARY_SNIFF_BYTES,
    WorkspacePathError,
    compile_glob,
    is_binary,
    resolve_workspace_path,
    walk_workspace,
    workspace_relative,
    write_text_atomic,
)
from agent_tutorial.adapters.shell import CommandResult, run_command
from agent_tutorial.core.tools import ToolDefinition, ToolFailure, ToolResult, tool_success

BASH_OUTPUT_CAP_BYTES = 30_000
"""Output kept from one command: the first and the last 15,000 bytes."""
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


class _ToolInput(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BashInput(_ToolInput):
    command: str = Field(min_length=1, description="The command line, run with `bash -c`.")
    timeout_s: int = Field(
        default=120,
        ge=1,
        le=600,
        description="Seconds before the command and everything it started are killed.",
    )


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
        description='Glob relative to `path`, such as "**/*.py", "src/*.ts" or '
        '"**/test_*.{py,pyi}". `*` stays inside one directory; `**/` spans any depth.',
    )
    path: str = Field(default=".", description="The directory to search in.")


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


def bash_tool(workspace: Path, *, hidden_env: Collection[str] = ()) -> ToolDefinition:
    """`hidden_env` names variables commands must not see: the agent's own API key would
    otherwise be one `env` away from the conversation and the session log."""
    return ToolDefinition(
        name="bash",
        description=(
            "Run a shell command with bash in the workspace directory and return its combined "
            "stdout and stderr, its exit code and the output size. Stdin is empty, so "
            "interactive programs cannot prompt. Background processes are stopped when the "
            "command ends. Output over 30,000 bytes keeps its beginning and end. Prefer "
            "read_file, glob and grep for reading and searching files."
        ),
        input_model=BashInput,
        handler=partial(_run_bash, workspace, frozenset(hidden_env)),
        effect="execute",
        subject_field="command",
    )


def file_tools(workspace: Path) -> list[ToolDefinition]:
    read_file = ToolDefinition(
        name="read_file",
        description=(
            "Read a UTF-8 text file in the workspace. Each line comes back as its 1-based "
            "number, a tab, then the text; the number and tab are not part of the file. "
            f"Returns up to {READ_DEFAULT_LIMIT} lines from `offset` and says how to read on; "
            f"lines longer than {LINE_CHAR_LIMIT} characters are cut. Binary files and "
            "directories are refused."
        ),
        input_model=ReadFileInput,
        handler=partial(_read_file, workspace),
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
        handler=partial(_write_file, workspace),
        effect="write",
        subject_field="path",
    )
    edit_file = ToolDefinition(
        name="edit_file",
        description=(
            "Replace exact text in a text file. old_text must occur exactly once (include "
            "surrounding lines to make it unique) unless replace_all is true. Read the file "
            "first so old_text matches it character for character."
        ),
        input_model=EditFileInput,
        handler=partial(_edit_file, workspace),
        effect="write",
        subject_field="path",
    )
    return [read_file, write_file, edit_file]


def search_tools(workspace: Path) -> list[ToolDefinition]:
    glob = ToolDefinition(
        name="glob",
        description=(
            "Find files and directories in the workspace whose path matches a glob. Returns "
            "sorted workspace-relative paths (directories end in /), at most "
            f"{GLOB_RESULT_LIMIT}. Skips .git, .venv, node_modules, caches and "
            ".agent_tutorial."
        ),
        input_model=GlobInput,
        handler=partial(_glob, workspace),
        effect="read",
        subject_field="pattern",
    )
    grep = ToolDefinition(
        name="grep",
        description=(
            "Search text files in the workspace for a regular expression. Returns "
            "`path:line:text` for each matching line, at most "
            f"{GREP_MATCH_LIMIT}. Binary files and .git, .venv, node_modules, caches and "
            ".agent_tutorial are skipped."
        ),
        input_model=GrepInput,
        handler=partial(_grep, workspace),
        effect="read",
        subject_field="pattern",
    )
    return [glob, grep]


# bash


def _run_bash(workspace: Path, hidden_env: frozenset[str], arguments: BashInput) -> ToolResult:
    if "\0" in arguments.command:  # no program can receive one in its arguments
        raise ToolFailure("invalid_command", "the command contains a NUL character")
    result = run_command(
        arguments.command,
        cwd=workspace,
        timeout_s=arguments.timeout_s,
        output_cap_bytes=BASH_OUTPUT_CAP_BYTES,
        env={name: value for name, value in os.environ.items() if name not in hidden_env},
    )
    if result.timed_out:
        raise ToolFailure(
            "timeout",
            f"the command ran longer than {arguments.timeout_s} s and was killed with "
            f"everything it started. Output so far:\n{_describe_run(result)}",
        )
    return tool_success(_describe_run(result))


def _describe_run(result: CommandResult) -> str:
    body = result.output or "(no output)"
    if not body.endswith("\n"):
        body += "\n"
    if result.exit_code is None:
        status = "timed out"
    elif result.exit_code < 0:
        status = f"killed by signal {-result.exit_code}"
    else:
        status = f"exit code {result.exit_code}"
    return f"{body}[{status} · {result.total_bytes} bytes of output]"


# read_file


@dataclass(frozen=True, slots=True)
class _LineWindow:
    lines: tuple[tuple[int, str], ...]
    lines_seen: int
    more_follows: bool


def _read_file(workspace: Path, arguments: ReadFileInput) -> ToolResult:
    real = _existing_path(workspace, arguments.path)
    if real.is_dir():
        raise ToolFailure("is_directory", f"{arguments.path!r} is a directory; use glob to list it")
    limit = arguments.limit or READ_DEFAULT_LIMIT
    with _open_regular_file(real, arguments.path) as handle:
        if b"\0" in handle.read(BINARY_SNIFF_BYTES):
            raise _binary_file(arguments.path)
        handle.seek(0)
        try:
            window = _read_window(handle, arguments.offset, limit)
        except UnicodeDecodeError:
            raise _binary_file(arguments.path) from None
    shown_as = workspace_relative(workspace, real)
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


def _write_file(workspace: Path, arguments: WriteFileInput) -> ToolResult:
    real = _resolve(workspace, arguments.path)
    if real.is_dir():
        raise ToolFailure("is_directory", f"{arguments.path!r} is a directory")
    existed = real.exists()
    if existed:
        _refuse_read_only(real, arguments.path)
    try:
        real.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise ToolFailure(
            "not_a_directory", f"cannot create {arguments.path!r}: a parent of it is a file"
        ) from None
    write_text_atomic(real, arguments.content)
    size = len(arguments.content.encode("utf-8"))
    verb = "Overwrote" if existed else "Created"
    return tool_success(f"{verb} {workspace_relative(workspace, real)} ({size} bytes).")


def _edit_file(workspace: Path, arguments: EditFileInput) -> ToolResult:
    real = _existing_path(workspace, arguments.path)
    _refuse_read_only(real, arguments.path)
    text = _text_of(real, arguments.path)
    old_text, new_text = arguments.old_text, arguments.new_text
    count = text.count(old_text)
    if count == 0:
        raise ToolFailure("no_match", _no_match_message(arguments.path, text, old_text))
    if count > 1 and not arguments.replace_all:
        raise ToolFailure(
            "multiple_matches",
            f"old_text occurs {count} times in {arguments.path!r}; include more surrounding "
            "text to make it unique, or set replace_all",
        )
    if old_text == new_text:
        raise ToolFailure("no_change", "old_text and new_text are identical")
    first_line = text.count("\n", 0, text.index(old_text)) + 1
    replaced = count if arguments.replace_all else 1
    write_text_atomic(real, text.replace(old_text, new_text, replaced))
    occurrences = "1 occurrence" if replaced == 1 else f"{replaced} occurrences"
    return tool_success(
        f"Edited {workspace_relative(workspace, real)}: replaced {occurrences} "
        f"(first at line {first_line})."
    )


def _refuse_read_only(real: Path, given: str) -> None:
    """The atomic rename would replace a file even where opening it for writing fails, so
    honour the permissions here: a file nobody may write is one the user protected."""
    mode = real.stat().st_mode
    if not os.access(real, os.W_OK) or not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise ToolFailure(
            "read_only", f"{given!r} is read-only; ask the user before changing its permissions"
        )


def _no_match_message(given: str, text: str, old_text: str) -> str:
    message = f"old_text does not occur in {given!r}; read the file and copy the text exactly"
    if "\r\n" in text and "\n" in old_text and "\r\n" not in old_text:
        message += " (the file has CRLF line endings)"
    return message


# glob and grep


def _glob(workspace: Path, arguments: GlobInput) -> ToolResult:
    base = _existing_path(workspace, arguments.path)
    if not base.is_dir():
        raise ToolFailure("not_a_directory", f"{arguments.path!r} is not a directory")
    matcher = _compile_glob(arguments.pattern)
    found = sorted(
        workspace_relative(workspace, entry.path) + ("/" if entry.is_dir else "")
        for entry in walk_workspace(workspace, base)
        if matcher.fullmatch(entry.path.relative_to(base).as_posix())
    )
    if not found:
        return tool_success(f"No paths match {arguments.pattern!r} in {_place(workspace, base)}.")
    lines = found[:GLOB_RESULT_LIMIT]
    if len(found) > GLOB_RESULT_LIMIT:
        more = len(found) - GLOB_RESULT_LIMIT
        lines.append(f"[{more} more not shown; narrow the pattern or the path]")
    return tool_success("\n".join(lines))


def _grep(workspace: Path, arguments: GrepInput) -> ToolResult:
    regex = _compile_regex(arguments.pattern)
    start = _existing_path(workspace, arguments.path)
    oversized: list[str] = []
    if start.is_dir():
        texts = _searchable_texts(workspace, start, arguments.glob, oversized)
    else:
        texts = iter([(workspace_relative(workspace, start), _text_of(start, arguments.path))])
    matches: list[str] = []
    for shown_as, text in texts:
        for number, line in _matching_lines(text, regex):
            if len(matches) == GREP_MATCH_LIMIT:
                matches.append(
                    f"[stopped after {GREP_MATCH_LIMIT} matches; narrow the pattern, path or glob]"
                )
                return tool_success("\n".join(matches))
            matches.append(f"{shown_as}:{number}:{_clip(line)}")
    if oversized:
        matches.append(
            f"[skipped {len(oversized)} files over {MAX_TEXT_FILE_BYTES} bytes "
            f"(search them with bash): {', '.join(oversized[:5])}]"
        )
    if not matches:
        return tool_success(f"No matches for {arguments.pattern!r} in {_place(workspace, start)}.")
    return tool_success("\n".join(matches))


def _compile_regex(pattern: str) -> re.Pattern[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # "possible nested set" and kin
            return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        raise ToolFailure(
            "invalid_regex", f"{pattern!r} is not a valid Python regular expression: {error}"
        ) from None


def _compile_glob(pattern: str) -> re.Pattern[str]:
    try:
        return compile_glob(pattern)
    except ValueError as error:
        raise ToolFailure("invalid_glob", str(error)) from None


def _searchable_texts(
    workspace: Path, start: Path, glob: str | None, oversized: list[str]
) -> Iterator[tuple[str, str]]:
    """Workspace-relative name and text of each text file below `start`; symlinks are not
    followed, binary files are skipped and files too large are noted in `oversized`."""
    matcher = _compile_glob(glob) if glob else None
    match_name_only = glob is not None and "/" not in glob
    for entry in walk_workspace(workspace, start):
        if entry.is_dir or entry.is_symlink:
            continue
        if matcher is not None:
            relative = entry.path.relative_to(start).as_posix()
            if not matcher.fullmatch(entry.path.name if match_name_only else relative):
                continue
        shown_as = workspace_relative(workspace, entry.path)
        try:
            text = _text_of(entry.path, shown_as)
        except ToolFailure as skipped:
            if skipped.code == "file_too_large":
                oversized.append(shown_as)
            continue
        except OSError:  # unreadable (permissions) or vanished: skip, as grep -s does
            continue
        yield shown_as, text


def _matching_lines(text: str, regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline ends the last line; it does not start another
    for number, line in enumerate(lines, start=1):
        content = line.removesuffix("\r")
        if regex.search(content):
            yield number, content


def _clip(line: str) -> str:
    if len(line) <= GREP_LINE_CHAR_LIMIT:
        return line
    return line[:GREP_LINE_CHAR_LIMIT] + " …"


# paths and text


def _resolve(workspace: Path, given: str) -> Path:
    try:
        return resolve_workspace_path(workspace, given)
    except WorkspacePathError as error:
        raise ToolFailure("path_outside_workspace", str(error)) from None


def _existing_path(workspace: Path, given: str) -> Path:
    real = _resolve(workspace, given)
    if not real.exists():
        raise ToolFailure("not_found", f"{given!r} does not exist")
    return real


def _place(workspace: Path, real: Path) -> str:
    shown_as = workspace_relative(workspace, real)
    return "the workspace" if shown_as == "." else shown_as


def _text_of(real: Path, given: str) -> str:
    """The whole text of a file that edit_file and grep may work on."""
    if real.is_dir():
        raise ToolFailure("is_directory", f"{given!r} is a directory")
    with _open_regular_file(real, given) as handle:
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


def _open_regular_file(real: Path, given: str) -> BinaryIO:
    """Open a file for reading, refusing pipes, sockets and devices.

    O_NONBLOCK keeps the open itself from waiting forever for a named pipe's writer; the
    check on the open descriptor cannot be fooled by a swap after a separate stat.
    """
    descriptor = os.open(real, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise ToolFailure(
            "not_a_regular_file", f"{given!r} is not a regular file (a pipe, socket or device)"
        )
    return os.fdopen(descriptor, "rb")


def _binary_file(given: str) -> ToolFailure:
    return ToolFailure("binary_file", f"{given!r} is a binary file, not UTF-8 text")
