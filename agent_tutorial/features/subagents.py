"""Chapter 6: the `task` tool hands a self-contained job to a fresh agent and returns its
final answer, so the parent's context holds the result rather than all the work behind it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from pydantic import BaseModel, Field

from agent_tutorial.core.events import Event, EventSink, NestedEvent
from agent_tutorial.core.loop import AgentRunError, AgentRunner, TurnInterrupted
from agent_tutorial.core.model import ModelError
from agent_tutorial.core.tools import (
    ToolDefinition,
    ToolFailure,
    ToolRegistry,
    ToolResult,
    tool_success,
)
from agent_tutorial.features.todos import TODO_WRITE

TASK = "task"
SUBAGENT_MAX_TURNS = 30
DEFAULT_MAX_RESULT_BYTES = 20_000
_MIN_RESULT_BYTES = 200  # room for the truncation note and a useful start of the answer

SubagentFactory: TypeAlias = Callable[[str], AgentRunner]
"""Builds a fresh runner for one task; it receives the task's short description."""


class NestingSink:
    """Forwards a subagent's events to the parent's bus, wrapped in `NestedEvent`.

    `depth` is how many levels this sink adds; an event that is already nested (from a
    deeper agent) keeps one flat wrapper whose depth is the sum.
    """

    def __init__(self, parent: EventSink, depth: int = 1) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self.parent = parent
        self.depth = depth

    def emit(self, event: Event) -> None:
        if isinstance(event, NestedEvent):
            self.parent.emit(NestedEvent(self.depth + event.depth, event.event))
        else:
            self.parent.emit(NestedEvent(self.depth, event))


def subagent_tools(parent_tools: ToolRegistry) -> ToolRegistry:
    """The parent's tools a subagent gets: all but `task` (no subagents of its own) and
    `todo_write`, which is bound to the parent's plan and would overwrite it."""
    return parent_tools.without(TASK, TODO_WRITE)


class TaskInput(BaseModel):
    description: str = Field(
        min_length=1,
        max_length=200,
        description="A short (3-8 word) label for the job, shown to the user.",
    )
    prompt: str = Field(
        min_length=1,
        description=(
            "Complete, self-contained instructions: the subagent sees nothing of this "
            "conversation. Say what to find or do and what to report back."
        ),
    )


def task_tool(
    spawn: SubagentFactory, *, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
) -> ToolDefinition:
    """The `task` tool: run `spawn(description).run(prompt)` and return the final text.

    `spawn` (from the composition root) must build a *fresh* runner: no history, the same
    model, guards and hooks, `subagent_tools(parent_tools)` and its own turn limit, with
    events going to a `NestingSink` on the parent's bus. The effect is "read" because
    `task` itself touches nothing: every tool call the subagent makes passes through the
    same permission policy, so asking about `task` as well would only ask twice.
    """
    if max_result_bytes < _MIN_RESULT_BYTES:
        raise ValueError(f"max_result_bytes must be at least {_MIN_RESULT_BYTES}")

    def run_task(arguments: TaskInput) -> ToolResult:
        final_text = _run_subagent(spawn(arguments.description), arguments.prompt)
        if not final_text.strip():
            return tool_success("(the subagent finished without a final answer)")
        return tool_success(_truncate_utf8(final_text, max_result_bytes))

    return ToolDefinition(
        name=TASK,
        description=(
            "Hand a self-contained job (research across many files, a focused change) to a "
            "subagent with a fresh context and your tools except task and todo_write. It "
            "cannot see this conversation, so the prompt must say everything it needs. Only "
            "its final answer comes back to you."
        ),
        input_model=TaskInput,
        handler=run_task,
        effect="read",
        subject_field="description",
    )


def _run_subagent(runner: AgentRunner, prompt: str) -> str:
    try:
        return runner.run(prompt).final_text
    except TurnInterrupted:
        # Ctrl-C inside the subagent interrupts the parent's turn as well; the parent's
        # loop turns KeyboardInterrupt into paired `interrupted` results.
        raise KeyboardInterrupt from None
    except AgentRunError as error:
        raise ToolFailure("subagent_failed", f"the subagent stopped: {error}") from error
    except ModelError as error:
        raise ToolFailure(
            "subagent_model_error", f"the subagent's model call failed: {error}"
        ) from error


def _truncate_utf8(text: str, max_bytes: int) -> str:
    """`text` if it fits in `max_bytes` UTF-8 bytes, else its start plus a note (all within
    `max_bytes`), never cutting a character in half."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    note = f"\n[... truncated: the answer was {len(encoded):,} bytes; showing the first "
    note_end = " bytes]"
    # The kept size appears in the note, so reserve room for its widest form.
    keep = max_bytes - len(note.encode()) - len(note_end) - len(f"{max_bytes:,}")
    kept = encoded[:keep].decode("utf-8", errors="ignore")
    return f"{kept}{note}{len(kept.encode()):,}{note_end}"
