"""Chapter profiles: which capabilities each chapter adds to the shared loop.

Profiles are data. Each one is the previous chapter's profile plus what the chapter adds,
and the composition root asks `Capability.X in profile` instead of comparing profiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Capability(Enum):
    LOOP = "loop"
    BASH = "bash"
    TOOL_REGISTRY = "tool_registry"
    FILE_TOOLS = "file_tools"
    SEARCH_TOOLS = "search_tools"
    PERMISSIONS = "permissions"
    HOOKS = "hooks"
    TODOS = "todos"
    SUBAGENTS = "subagents"
    SKILLS = "skills"
    PROJECT_INSTRUCTIONS = "project_instructions"
    ARTIFACTS = "artifacts"
    COMPACTION = "compaction"
    MCP = "mcp"


@dataclass(frozen=True, slots=True)
class ChapterProfile:
    chapter: int
    title: str
    capabilities: frozenset[Capability]

    def plus(self, chapter: int, title: str, *added: Capability) -> ChapterProfile:
        return ChapterProfile(chapter, title, self.capabilities | frozenset(added))

    def __contains__(self, capability: object) -> bool:
        return capability in self.capabilities


P01 = ChapterProfile(1, "The agent loop", frozenset({Capability.LOOP, Capability.BASH}))
P02 = P01.plus(
    2,
    "Tools: files and search",
    Capability.TOOL_REGISTRY,
    Capability.FILE_TOOLS,
    Capability.SEARCH_TOOLS,
)
P03 = P02.plus(3, "Permission policy", Capability.PERMISSIONS)
P04 = P03.plus(4, "Hooks", Capability.HOOKS)
P05 = P04.plus(5, "Todo planning", Capability.TODOS)
P06 = P05.plus(6, "Subagents", Capability.SUBAGENTS)
P07 = P06.plus(7, "Skills", Capability.SKILLS, Capability.PROJECT_INSTRUCTIONS)
P08 = P07.plus(8, "Context compaction", Capability.ARTIFACTS, Capability.COMPACTION)
P09 = P08.plus(9, "MCP servers", Capability.MCP)

PROFILES: tuple[ChapterProfile, ...] = (P01, P02, P03, P04, P05, P06, P07, P08, P09)


def profile_for_chapter(chapter: int) -> ChapterProfile:
    for profile in PROFILES:
        if profile.chapter == chapter:
            return profile
    raise ValueError(f"chapter must be 1 to {len(PROFILES)}, got {chapter!r}")
