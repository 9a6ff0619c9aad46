"""Chapter 8's long tour: many small rounds, then reads large enough that every compaction
layer fires (persistence, snip, micro and the summary).

The sizes are set against chapter 8's thresholds (see chapters/ch08.md)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from agent_tutorial.adapters.filesystem import is_binary
from agent_tutorial.core.model import ToolSpec
from agent_tutorial.demo.builder import (
    ScriptBuilder,
    add_delegation,
    add_listing,
    add_skill,
    wc_command,
)
from agent_tutorial.demo.script import DEFINITION_PATTERN, Script, SourceFile

SKIM_LINES = 12
LONG_TOUR_ROUNDS_BEFORE_BULK = 54
"""Snip fires above 50 message groups; each tool round is one group, the prompt another."""
BULK_RESULT_MIN_BYTES = 31_000
"""A result strictly larger than 30,000 bytes is persisted; keep a margin above it."""
BULK_CAT_MIN_BYTES = 36_000
"""bash keeps 30,000 bytes of output plus a note, so feed it clearly more than that."""
LARGE_READS = 3
LARGE_READ_TARGET_BYTES = 20_000
LARGE_READ_MIN_BYTES = 15_000
"""Three reads this size make the last three tool groups exceed the 50,000-byte summary
threshold, while each stays under the 30,000-byte persistence threshold."""
READ_FILE_MAX_LINES = 2_000
"""read_file's default line limit: a read without `limit` returns at most this many."""
LONG_PHASES = (
    "List the source files",
    "Skim and outline each source file",
    "Read the largest files in full",
    "Write the report",
)


def long_tour(
    workspace: Path, files: Sequence[SourceFile], tools: Mapping[str, ToolSpec]
) -> Script:
    script = ScriptBuilder(tools, LONG_PHASES)
    script.phase(0)
    add_listing(script)
    add_skill(script, workspace)
    script.phase(1)
    if files:
        add_delegation(script, files[0])
    _add_skims_and_outlines(script, files)
    script.phase(2)
    _add_bulk_read(script, workspace, files)
    if files:
        script.add("count_lines", "bash", {"command": wc_command(files[:5])})
    _add_large_reads(script, workspace, files)
    script.finish_plan()
    intro = (
        "This is the long chapter-8 tour: many small reads and searches, then a few large "
        "ones, so that every compaction layer has something to do."
    )
    return script.build(intro, files)


def _add_skims_and_outlines(script: ScriptBuilder, files: Sequence[SourceFile]) -> None:
    """Many cheap, still useful rounds: the head of each file, then its definitions."""
    for index, file in enumerate(files):
        if len(script.steps) >= LONG_TOUR_ROUNDS_BEFORE_BULK:
            return
        narration = "Skimming each file and outlining its definitions." if index == 0 else ""
        script.add("skim", "read_file", {"path": file.path, "limit": SKIM_LINES}, narration)
        if file.path.endswith(".py"):
            arguments: dict[str, object] = {"pattern": DEFINITION_PATTERN, "path": file.path}
            script.add("search", "grep", arguments)


def _add_bulk_read(script: ScriptBuilder, workspace: Path, files: Sequence[SourceFile]) -> None:
    """One result over 30,000 bytes: the largest file whole, or several through `cat`."""
    if files and "read_file" in script.tools:
        lines = _text_lines(workspace / files[0].path)
        if _numbered_bytes(lines[:READ_FILE_MAX_LINES], first=1) >= BULK_RESULT_MIN_BYTES:
            narration = f"Reading the largest file, `{files[0].path}`, in full."
            script.add("bulk", "read_file", {"path": files[0].path}, narration)
            return
    chosen = _largest_covering(files, BULK_CAT_MIN_BYTES)
    if chosen:
        command = "cat -- " + " ".join(shlex.quote(file.path) for file in chosen)
        narration = f"Reading the {len(chosen)} largest files in full."
        script.add("bulk", "bash", {"command": command}, narration)


def _add_large_reads(script: ScriptBuilder, workspace: Path, files: Sequence[SourceFile]) -> None:
    """Three reads of about 20 KB each, in consecutive rounds: read_file windows, or `cat`
    slices when read_file cannot make all three."""
    windows = _read_windows(workspace, files) if "read_file" in script.tools else []
    if len(windows) < LARGE_READS and "bash" in script.tools:
        slices = _cat_slices(files)
        if len(slices) == LARGE_READS:
            for index, command in enumerate(slices):
                narration = "Reading the sources in 20 KB slices." if index == 0 else ""
                script.add("large_read", "bash", {"command": command}, narration)
            return
    for index, arguments in enumerate(windows):
        narration = "Reading the largest files section by section." if index == 0 else ""
        script.add("large_read", "read_file", arguments, narration)


def _read_windows(workspace: Path, files: Sequence[SourceFile]) -> list[dict[str, object]]:
    """read_file arguments for up to three windows whose output is 15–20 KB each."""
    windows: list[dict[str, object]] = []
    for file in files:
        if file.size < LARGE_READ_MIN_BYTES:
            break  # files are largest first
        lines = _text_lines(workspace / file.path)
        start = 0
        while len(windows) < LARGE_READS:
            count = _lines_within(lines, start, LARGE_READ_TARGET_BYTES)
            if _numbered_bytes(lines[start : start + count], start + 1) < LARGE_READ_MIN_BYTES:
                break
            windows.append({"path": file.path, "offset": start + 1, "limit": count})
            start += count
    return windows


def _lines_within(lines: Sequence[str], start: int, budget: int) -> int:
    """How many lines from `start` read_file can show within `budget` bytes."""
    used = 0
    for count, line in enumerate(lines[start:]):
        used += _numbered_line_bytes(line, start + count + 1)
        if used > budget:
            return count
    return len(lines) - start


def _numbered_bytes(lines: Sequence[str], first: int) -> int:
    return sum(_numbered_line_bytes(line, first + index) for index, line in enumerate(lines))


def _numbered_line_bytes(line: str, number: int) -> int:
    # read_file shows "<number>\t<text>" per line, joined by newlines (a close estimate:
    # the number is padded to the widest one shown).
    return len(str(number)) + 2 + len(line.encode("utf-8"))


def _text_lines(path: Path) -> list[str]:
    """The file's lines as read_file numbers them (split on newlines only), or [] for a
    file it would refuse."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if is_binary(data):
        return []
    lines = data.decode("utf-8").split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _largest_covering(files: Sequence[SourceFile], minimum: int) -> list[SourceFile]:
    """The fewest largest files whose sizes add up to `minimum`, or [] if all cannot."""
    chosen: list[SourceFile] = []
    for file in files:
        chosen.append(file)
        if sum(chosen_file.size for chosen_file in chosen) >= minimum:
            return chosen
    return []


def _cat_slices(files: Sequence[SourceFile]) -> list[str]:
    """Commands printing consecutive 20 KB slices of the largest files concatenated."""
    slices = []
    for index in range(LARGE_READS):
        end = (index + 1) * LARGE_READ_TARGET_BYTES
        chosen = _largest_covering(files, end)
        if not chosen:
            break
        names = " ".join(shlex.quote(file.path) for file in chosen)
        start = index * LARGE_READ_TARGET_BYTES + 1
        slices.append(f"cat -- {names} | tail -c +{start} | head -c {LARGE_READ_TARGET_BYTES}")
    return slices
