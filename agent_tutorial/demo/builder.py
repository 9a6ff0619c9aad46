"""`ScriptBuilder` collects a tour's steps, dropping any the request cannot run, and the
helpers here add the steps that both file-tool tours share."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from agent_tutorial.core.model import ToolSpec
from agent_tutorial.demo.script import (
    SUBAGENT_MARKER,
    Script,
    SourceFile,
    Step,
    StepKind,
)


class ScriptBuilder:
    """Collects steps, leaving out any whose tool (or argument names) the request lacks."""

    def __init__(self, tools: Mapping[str, ToolSpec], phases: Sequence[str] = ()) -> None:
        self.tools = tools
        self.phases = phases
        self.steps: list[Step] = []

    def add(
        self, kind: StepKind, tool: str, arguments: dict[str, object], narration: str = ""
    ) -> None:
        spec = self.tools.get(tool)
        if spec is not None and _accepts(spec, arguments):
            self.steps.append(Step(kind, tool, arguments, narration or None))

    def phase(self, current: int) -> None:
        """Update the plan: phases before `current` done, `current` in progress."""
        todos = [
            {"content": phase, "status": _phase_status(index, current)}
            for index, phase in enumerate(self.phases)
        ]
        self.add("plan", "todo_write", {"todos": todos})

    def finish_plan(self) -> None:
        self.phase(len(self.phases))

    def build(self, intro: str, files: Sequence[SourceFile]) -> Script:
        return Script(intro, tuple(self.steps), tuple(files))


def _phase_status(index: int, current: int) -> str:
    if index < current:
        return "completed"
    return "in_progress" if index == current else "pending"


def _accepts(spec: ToolSpec, arguments: Mapping[str, object]) -> bool:
    properties = spec.parameters.get("properties", {})
    required = spec.parameters.get("required", [])
    return set(arguments) <= set(properties) and set(required) <= set(arguments)


def add_listing(script: ScriptBuilder) -> None:
    script.add("find", "glob", {"pattern": "**/*.py"}, "Listing the source files.")
    script.add("find", "glob", {"pattern": "**/*.md"})


def add_skill(script: ScriptBuilder, workspace: Path) -> None:
    if "load_skill" not in script.tools:
        return
    from agent_tutorial.features.skills import SkillRegistry  # only chapters with skills

    names = sorted(SkillRegistry.discover(workspace).names())
    if names:
        narration = f"The skill catalog lists `{names[0]}`; loading it first."
        script.add("skill", "load_skill", {"name": names[0]}, narration)


def add_delegation(script: ScriptBuilder, file: SourceFile) -> None:
    arguments: dict[str, object] = {
        "description": f"Skim {file.path}",
        "prompt": f"{SUBAGENT_MARKER} Read the first lines of `{file.path}` and report "
        "in one sentence how it starts.",
    }
    script.add("delegate", "task", arguments, f"Handing `{file.path}` to a subagent.")


def wc_command(files: Iterable[SourceFile]) -> str:
    return "wc -l -- " + " ".join(shlex.quote(file.path) for file in files)
