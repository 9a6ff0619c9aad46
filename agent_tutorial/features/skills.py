"""Chapter 7: skills, house knowledge loaded on demand. The project context lists each
skill's name and description; `load_skill(name)` returns the instructions themselves.

A skill is `<root>/skills/<name>/SKILL.md` or `<root>/.agent_tutorial/skills/<name>/
SKILL.md`, where the root is the project root (`project.find_project`; the workspace when
called with it): YAML front matter with `name` and `description`, then the instructions.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from agent_tutorial.adapters.filesystem import (
    ProtectedPathError,
    Target,
    Workspace,
    WorkspacePathError,
    is_binary,
    open_for_reading,
    resolve_workspace_path,
)
from agent_tutorial.core.paths import STATE_DIR
from agent_tutorial.core.tools import ToolDefinition, ToolFailure, ToolResult, tool_success

SKILL_FILE = "SKILL.md"
# Lowest precedence first: on a name clash the later location wins. `.agent_tutorial/` is
# the user's own, git-ignored configuration, which the agent itself may not write
# (chapter 3), so nothing committed to `skills/`, or written there by the agent, can
# replace a skill the user installed.
SKILL_LOCATIONS = (Path("skills"), Path(STATE_DIR) / "skills")
MAX_SKILL_BYTES = 64 * 1024  # the whole body enters the context; 64 KiB is ~16k tokens
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1_024
MAX_CATALOG_ENTRIES = 100
MAX_CATALOG_BYTES = 8_000
LOAD_SKILL = "load_skill"

_SLUG = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_CATALOG_HEADER = (
    "Skills (instructions for particular kinds of work). When a task matches one, call "
    f"{LOAD_SKILL} with its name and follow what it says:"
)


@dataclass(frozen=True, slots=True)
class Skill:
    """A valid skill; `path` is its manifest relative to the workspace."""

    name: str
    description: str
    body: str
    path: Path


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """A manifest that was skipped (or shadowed), and why; shown to the user once."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path.as_posix()}: {self.reason}"


class SkillRegistry:
    """The skills of one workspace, sorted by name, plus the problems found on the way."""

    def __init__(self, skills: Iterable[Skill] = (), problems: Iterable[SkillProblem] = ()) -> None:
        by_name: dict[str, Skill] = {}
        for skill in skills:
            if skill.name in by_name:
                raise ValueError(f"two skills are named {skill.name!r}")
            by_name[skill.name] = skill
        self.skills: tuple[Skill, ...] = tuple(sorted(by_name.values(), key=lambda s: s.name))
        self.problems: tuple[SkillProblem, ...] = tuple(problems)
        self._by_name = by_name

    @classmethod
    def discover(cls, project_root: Path) -> SkillRegistry:
        """Read every skill under `project_root`; a broken manifest becomes a problem, not an
        error. A directory without `SKILL.md` is not a skill and is skipped silently."""
        found: dict[str, Skill] = {}
        problems: list[SkillProblem] = []
        for location in SKILL_LOCATIONS:
            for manifest in _manifests(project_root, location, problems):
                try:
                    skill = _load_skill(project_root, manifest)
                except _BrokenManifest as broken:
                    problems.append(SkillProblem(manifest, broken.reason))
                    continue
                if skill.name in found:
                    shadowed = found[skill.name].path
                    problems.append(SkillProblem(shadowed, f"shadowed by {skill.path.as_posix()}"))
                found[skill.name] = skill
        return cls(found.values(), problems)

    def get(self, name: str) -> Skill | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return [skill.name for skill in self.skills]

    def catalog_text(self) -> str:
        """Name and description lines for the project context ("" when there are no skills):
        at most `MAX_CATALOG_ENTRIES` entries and `MAX_CATALOG_BYTES` UTF-8 bytes, with a
        closing line that says how many were left out."""
        if not self.skills:
            return ""
        lines = [_CATALOG_HEADER]
        used = _utf8_len(_CATALOG_HEADER)
        for shown, skill in enumerate(self.skills[:MAX_CATALOG_ENTRIES]):
            line = f"- {skill.name}: {' '.join(skill.description.split())}"
            cost = 1 + _utf8_len(line)  # 1 for the newline before it
            if used + cost + _left_out_cost(len(self.skills) - shown - 1) > MAX_CATALOG_BYTES:
                break
            lines.append(line)
            used += cost
        left_out = len(self.skills) - (len(lines) - 1)
        if left_out:
            lines.append(_left_out_line(left_out))
        return "\n".join(lines)


def load_skill_tool(registry: SkillRegistry) -> ToolDefinition:
    """The `load_skill` tool: returns one skill's instructions. Effect "read": it reads
    nothing but what discovery already read."""

    def load(arguments: LoadSkillInput) -> ToolResult:
        skill = registry.get(arguments.name)
        if skill is None:
            raise ToolFailure("unknown_skill", _unknown_skill_message(arguments.name, registry))
        return tool_success(
            f"# Skill: {skill.name}\nDirectory: {skill.path.parent.as_posix()}\n\n"
            f"{skill.body.strip()}"
        )

    return ToolDefinition(
        name=LOAD_SKILL,
        description=(
            "Load the full instructions of a skill listed in the project context. Call it "
            "before starting work that matches the skill's description."
        ),
        input_model=LoadSkillInput,
        handler=load,
        effect="read",
        subject_field="name",
    )


class LoadSkillInput(BaseModel):
    name: str = Field(description="The skill's name, exactly as listed.")


def _unknown_skill_message(name: str, registry: SkillRegistry) -> str:
    known = registry.names()
    if not known:
        return f"no skill named {name!r}; there are no skills in this workspace"
    listed = ", ".join(known[:MAX_CATALOG_ENTRIES])
    more = len(known) - MAX_CATALOG_ENTRIES
    suffix = f" and {more} more" if more > 0 else ""
    return f"no skill named {name!r}; known skills: {listed}{suffix}"


def _left_out_line(count: int) -> str:
    noun = "skill is" if count == 1 else "skills are"
    return f"({count} more {noun} not listed here to keep this short.)"


def _left_out_cost(count: int) -> int:
    return 1 + _utf8_len(_left_out_line(count)) if count else 0


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


# --- discovery -------------------------------------------------------------------------


class _BrokenManifest(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _manifests(workspace: Path, location: Path, problems: list[SkillProblem]) -> Iterator[Path]:
    """Workspace-relative `SKILL.md` paths under `location`, in name order."""
    root = workspace / location
    if not root.is_dir():
        return
    if location.parts[0] == STATE_DIR and (workspace / STATE_DIR).is_symlink():
        reason = f"refused: {STATE_DIR} is a symlink; skills are read from a real directory only"
        problems.append(SkillProblem(location, reason))
        return
    try:
        resolve_workspace_path(workspace, location.as_posix())
        entries = sorted(root.iterdir())
    except WorkspacePathError:
        problems.append(SkillProblem(location, "refused: it resolves outside the project"))
        return
    except OSError as error:
        problems.append(SkillProblem(location, f"unreadable: {_os_reason(error)}"))
        return
    for entry in entries:
        manifest = entry / SKILL_FILE
        if entry.is_dir() and (manifest.is_symlink() or manifest.exists()):
            yield location / entry.name / SKILL_FILE


def _load_skill(workspace: Path, manifest: Path) -> Skill:
    metadata, body = _split_front_matter(_read_manifest(workspace, manifest))
    name = _required_text(metadata, "name")
    description = _required_text(metadata, "description")
    directory = manifest.parent.name
    if len(name) > MAX_NAME_CHARS or not _SLUG.fullmatch(name):
        raise _BrokenManifest(
            f"name {name!r} is not a slug (lowercase letters and digits in words joined by "
            f"single hyphens, at most {MAX_NAME_CHARS} characters)"
        )
    if name != directory:
        raise _BrokenManifest(f"name {name!r} does not match its directory {directory!r}")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise _BrokenManifest(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")
    if not body.strip():
        raise _BrokenManifest("no instructions after the front matter")
    return Skill(name=name, description=description.strip(), body=body, path=manifest)


def _read_manifest(workspace: Path, manifest: Path) -> str:
    """Read through the same descriptor walk as the file tools, so a manifest that leads
    outside, or into the state folder's own files, is refused however it gets there."""
    try:
        with Workspace(workspace).target(manifest.as_posix()) as target:
            data = _regular_file_prefix(target, MAX_SKILL_BYTES + 1)
    except ProtectedPathError as error:
        raise _BrokenManifest(f"refused: {error}") from None
    except WorkspacePathError:
        raise _BrokenManifest("refused: it resolves outside the project") from None
    except OSError as error:
        raise _BrokenManifest(f"unreadable: {_os_reason(error)}") from None
    if len(data) > MAX_SKILL_BYTES:
        raise _BrokenManifest(f"too large: over {MAX_SKILL_BYTES // 1024} KiB")
    if is_binary(data):
        raise _BrokenManifest("binary file: not UTF-8 text")
    return data.decode("utf-8").removeprefix("\ufeff")


def _regular_file_prefix(target: Target, limit: int) -> bytes:
    # Checked on the open descriptor: a FIFO would block the read forever.
    if target.info is None or not stat.S_ISREG(target.info.st_mode):
        raise _BrokenManifest("unreadable: not a regular file")
    with os.fdopen(open_for_reading(target), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise _BrokenManifest("unreadable: not a regular file")
        return file.read(limit)


def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        raise _BrokenManifest("no front matter: the file must start with a '---' line")
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() == "---":
            front, body = "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
            return _parse_yaml(front), body
    raise _BrokenManifest("front matter is not closed by a '---' line")


def _parse_yaml(front: str) -> dict[str, Any]:
    try:
        metadata = yaml.safe_load(front)
    except yaml.YAMLError as error:
        reason = " ".join(str(error).split())
        raise _BrokenManifest(f"front matter is not valid YAML: {reason}") from None
    except RecursionError:
        raise _BrokenManifest("front matter is nested too deeply") from None
    if not isinstance(metadata, dict):
        raise _BrokenManifest("front matter must be a mapping with name and description")
    return metadata


def _required_text(metadata: dict[str, Any], field: str) -> str:
    if field not in metadata:
        raise _BrokenManifest(f"front matter has no {field!r}")
    value = metadata[field]
    if not isinstance(value, str) or not value.strip():
        raise _BrokenManifest(f"{field!r} must be a non-empty string")
    return value


def _os_reason(error: OSError) -> str:
    return error.strerror or type(error).__name__
