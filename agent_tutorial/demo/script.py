"""The vocabulary of a demo tour: the markers it prints, the files it looks at, and the
script of tool calls with what each one returned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

DEMO_BANNER = "[scripted demo model — not an LLM]"
"""Every tour's first text and its final report start with this, so nobody mistakes it."""
SUBAGENT_MARKER = "[demo subagent]"
"""Starts the prompt of the demo's own `task` call, so the child run knows its script."""

SOURCE_SUFFIXES = (".py", ".md")
DEFINITION_PATTERN = r"^(class|def) "
LISTED_LINES = 40
"""How many lines the chapter-1 `find`/`grep`/`head` commands show."""

StepKind: TypeAlias = Literal[
    "plan",
    "find",
    "list_dir",
    "read",
    "skim",
    "search",
    "count_lines",
    "delegate",
    "skill",
    "bulk",
    "large_read",
]


@dataclass(frozen=True, slots=True)
class SourceFile:
    path: str
    """Relative to the workspace, `/`-separated."""
    size: int


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call of the script; `narration` is the text sent along with it."""

    kind: StepKind
    tool: str
    arguments: dict[str, object]
    narration: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A step and the result it got; None when compaction folded the result into a summary
    before the demo saw it."""

    step: Step
    result: str | None


@dataclass(frozen=True, slots=True)
class Script:
    intro: str
    steps: tuple[Step, ...]
    files: tuple[SourceFile, ...]
