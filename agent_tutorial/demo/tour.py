"""Plans the script for one prompt: finds the workspace's source files, then picks the tool
calls to make with what the request offers (bash only, file tools, or chapter 8's long tour)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from agent_tutorial.adapters.filesystem import SKIPPED_DIRECTORIES, Workspace, WorkspaceEntry
from agent_tutorial.adapters.gitignore import search_walk
from agent_tutorial.core.model import ToolSpec
from agent_tutorial.demo.builder import (
    ScriptBuilder,
    add_delegation,
    add_listing,
    add_skill,
    wc_command,
)
from agent_tutorial.demo.long_tour import long_tour
from agent_tutorial.demo.script import (
    DEFINITION_PATTERN,
    LISTED_LINES,
    SOURCE_SUFFIXES,
    Script,
    SourceFile,
)

READ_LINES = 80
BASE_PHASES = (
    "List the source files",
    "Read the largest files",
    "Search for definitions",
    "Measure with wc and ls",
    "Write the report",
)


def plan_tour(workspace: Path, tools: Mapping[str, ToolSpec], *, long_session: bool) -> Script:
    """The script for one prompt, from the tools offered and the files on disk."""
    files = find_source_files(workspace)
    if "glob" in tools and "read_file" in tools:
        if long_session and "grep" in tools:
            return long_tour(workspace, files, tools)
        return _file_tour(workspace, files, tools)
    if "bash" in tools:
        return _bash_tour(files, tools)
    return Script("No tools were offered, so there is nothing to look at.", (), files)


def find_source_files(workspace: Path) -> tuple[SourceFile, ...]:
    """Python and Markdown files, largest first (ties by path), seen as glob sees them."""
    files = Workspace(workspace)
    with files.target(".") as root:
        found = [
            SourceFile(entry.relative.as_posix(), size)
            for entry in search_walk(files, root)
            if not entry.is_dir
            and not entry.is_symlink
            and entry.name.endswith(SOURCE_SUFFIXES)
            and (size := _size_of(entry)) is not None
        ]
    return tuple(sorted(found, key=lambda file: (-file.size, file.path)))


def _size_of(entry: WorkspaceEntry) -> int | None:
    try:
        return os.stat(entry.name, dir_fd=entry.directory, follow_symlinks=False).st_size
    except OSError:  # vanished while we looked
        return None


def _bash_tour(files: Sequence[SourceFile], tools: Mapping[str, ToolSpec]) -> Script:
    script = ScriptBuilder(tools)
    script.add("list_dir", "bash", {"command": "ls -la"}, "Looking around with bash first.")
    script.add("find", "bash", {"command": _find_command()}, "Finding the source files.")
    if files:
        script.add("count_lines", "bash", {"command": wc_command(files[:5])})
        largest = shlex.quote(files[0].path)
        command = f"head -n {LISTED_LINES} -- {largest}"
        script.add("read", "bash", {"command": command}, f"Reading the top of `{files[0].path}`.")
    script.add("search", "bash", {"command": _grep_command()}, "Searching for definitions.")
    intro = "Only bash is offered, so I will tour this workspace with shell commands."
    return script.build(intro, files)


def _find_command() -> str:
    pruned = " -o ".join(f"-name {name}" for name in sorted(SKIPPED_DIRECTORIES))
    return (
        f"find . \\( {pruned} \\) -prune -o -type f \\( -name '*.py' -o -name '*.md' \\) "
        f"-print | sort | head -n {LISTED_LINES}"
    )


def _grep_command() -> str:
    excluded = ",".join(sorted(SKIPPED_DIRECTORIES))
    return (
        f"grep -rnE '{DEFINITION_PATTERN}' --include='*.py' --exclude-dir={{{excluded}}} . "
        f"| head -n {LISTED_LINES}"
    )


def _file_tour(
    workspace: Path, files: Sequence[SourceFile], tools: Mapping[str, ToolSpec]
) -> Script:
    script = ScriptBuilder(tools, BASE_PHASES)
    script.phase(0)
    add_listing(script)
    add_skill(script, workspace)
    script.phase(1)
    for index, file in enumerate(files[:2]):
        narration = "Reading the largest files." if index == 0 else ""
        script.add("read", "read_file", {"path": file.path, "limit": READ_LINES}, narration)
    if len(files) > 2:
        add_delegation(script, files[2])
    script.phase(2)
    arguments: dict[str, object] = {"pattern": DEFINITION_PATTERN, "glob": "*.py"}
    script.add("search", "grep", arguments, "Searching for top-level definitions.")
    script.phase(3)
    if files:
        script.add("count_lines", "bash", {"command": wc_command(files[:5])}, "Measuring them.")
    script.add("list_dir", "bash", {"command": "ls -la"})
    script.finish_plan()
    intro = (
        "I will list the source files, read the largest ones, search for definitions, "
        "measure them and report."
    )
    return script.build(intro, files)
