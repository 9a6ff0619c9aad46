"""Chapter 5: the agent's plan. `todo_write` replaces the whole plan at once, and a
request-only reminder nudges the model when it works for a while without updating it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Literal, TypeAlias

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    system_message,
)
from agent_tutorial.core.tools import ToolDefinition, ToolResult, tool_success

TODO_WRITE = "todo_write"
MAX_TODO_ITEMS = 50
MAX_TODO_CONTENT_CHARS = 500
REMINDER_AFTER_TOOL_ROUNDS = 3

TodoStatus: TypeAlias = Literal["pending", "in_progress", "completed"]

_STATUS_MARKS: dict[TodoStatus, str] = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}


class TodoItem(BaseModel):
    """One step of the plan."""

    model_config = ConfigDict(frozen=True)

    content: Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TODO_CONTENT_CHARS),
    ] = Field(description="What this step does, in a few words (imperative form).")
    status: TodoStatus = Field(description="pending, in_progress or completed.")


PlanListener: TypeAlias = Callable[[tuple[TodoItem, ...]], None]


def check_plan(items: Sequence[TodoItem]) -> None:
    """Raise `ValueError` unless `items` is a valid plan.

    Rules beyond each item's own: at most `MAX_TODO_ITEMS` items, and at most one item
    `in_progress`, because a plan says what the agent is doing *now*.
    """
    if len(items) > MAX_TODO_ITEMS:
        raise ValueError(f"a plan holds at most {MAX_TODO_ITEMS} items, got {len(items)}")
    working = [item.content for item in items if item.status == "in_progress"]
    if len(working) > 1:
        raise ValueError(f"at most one item may be in_progress, got {len(working)}: {working!r}")


class TodoWriteInput(BaseModel):
    todos: list[TodoItem] = Field(
        max_length=MAX_TODO_ITEMS,
        description="The complete plan, in order. It replaces the previous plan entirely.",
    )

    @model_validator(mode="after")
    def _plan_is_valid(self) -> TodoWriteInput:
        check_plan(self.todos)
        return self


class TodoTracker:
    """Holds the current plan; `on_change` hears every change (the terminal shows it)."""

    def __init__(self, on_change: PlanListener | None = None) -> None:
        self._items: tuple[TodoItem, ...] = ()
        self._on_change = on_change

    @property
    def items(self) -> tuple[TodoItem, ...]:
        return self._items

    def replace(self, items: Iterable[TodoItem]) -> None:
        """Make `items` the plan, or raise `ValueError` and keep the old one."""
        snapshot = tuple(items)
        check_plan(snapshot)
        if snapshot == self._items:
            return
        self._items = snapshot
        if self._on_change is not None:
            self._on_change(snapshot)

    def restore(self, history: Sequence[ChatMessage]) -> None:
        """Rebuild the plan from a resumed session's canonical history."""
        plan = latest_plan_in(history)
        if plan is not None:
            self.replace(plan)


def render_plan(items: Sequence[TodoItem]) -> str:
    """The plan as plain text, one `[x]` / `[~]` / `[ ]` line per item."""
    return "\n".join(f"{_STATUS_MARKS[item.status]} {item.content}" for item in items)


def todo_write_tool(tracker: TodoTracker) -> ToolDefinition:
    """The `todo_write` tool bound to `tracker`.

    Its effect is "read": it changes nothing but the agent's own plan, so no permission
    prompt is needed. An invalid snapshot never reaches the handler: the registry turns the
    validation error into a tool error and the plan stays as it was.
    """

    def write_plan(arguments: TodoWriteInput) -> ToolResult:
        tracker.replace(arguments.todos)
        return tool_success(_plan_summary(tracker.items))

    return ToolDefinition(
        name=TODO_WRITE,
        description=(
            "Write your plan for the current task as a checklist. Send the COMPLETE list "
            "every time: it replaces the previous plan. Use it for work with three or more "
            "steps; keep exactly one item in_progress while you work and mark items "
            f"completed as soon as they are done. At most {MAX_TODO_ITEMS} items."
        ),
        input_model=TodoWriteInput,
        handler=write_plan,
        effect="read",
    )


def _plan_summary(items: Sequence[TodoItem]) -> str:
    if not items:
        return "Plan cleared."
    done = sum(item.status == "completed" for item in items)
    return f"Plan updated ({done}/{len(items)} completed):\n{render_plan(items)}"


class TodoReminder:
    """`RequestGuidance` for chapter 5: reminders and the plan, added to one request only.

    It keeps no state: everything is derived from the canonical history and the tracker,
    so a resumed or compacted session behaves the same as a fresh one.
    """

    def __init__(self, tracker: TodoTracker) -> None:
        self.tracker = tracker

    def guidance(
        self, canonical: Sequence[ChatMessage], request: Sequence[ChatMessage]
    ) -> list[ChatMessage]:
        messages: list[ChatMessage] = []
        if self.tracker.items and request and _is_compacted_summary(request[0]):
            messages.append(system_message(_plan_after_compaction(self.tracker.items)))
        rounds = tool_rounds_since_plan_update(canonical)
        if rounds >= REMINDER_AFTER_TOOL_ROUNDS:
            messages.append(system_message(self._reminder(rounds)))
        return messages

    def _reminder(self, rounds: int) -> str:
        advice = (
            "use todo_write to mark finished items completed and the current one in_progress"
            if self.tracker.items
            else "if this task has several steps, use todo_write to write a plan"
        )
        return (
            f"Reminder: you have made {rounds} tool rounds without updating your plan; "
            f"{advice}. Do not mention this reminder to the user."
        )


def _plan_after_compaction(items: Sequence[TodoItem]) -> str:
    return (
        "Your current plan (kept across the compacted history; update it with todo_write):\n"
        + render_plan(items)
    )


def tool_rounds_since_plan_update(history: Sequence[ChatMessage]) -> int:
    """How many tool rounds end `history` with no `todo_write` call among them.

    Scans backwards and stops at the first `todo_write` call or the first message that is
    not part of a tool round (a user prompt, a final answer), so the cost is bounded by one
    run's turns, not by the length of the session.
    """
    rounds = 0
    for message in reversed(history):
        if isinstance(message, ToolMessage):
            continue
        if not (isinstance(message, AssistantMessage) and message.tool_calls):
            break
        if any(call.name == TODO_WRITE for call in message.tool_calls):
            break
        rounds += 1
    return rounds


def latest_plan_in(history: Sequence[ChatMessage]) -> tuple[TodoItem, ...] | None:
    """The plan set by the last `todo_write` call that succeeded, or None if there is none."""
    results = {m.tool_call_id: m.content for m in history if isinstance(m, ToolMessage)}
    for message in reversed(history):
        if not isinstance(message, AssistantMessage):
            continue
        for call in reversed(message.tool_calls):
            if call.name != TODO_WRITE or results.get(call.id, "Error").startswith("Error ["):
                continue
            try:
                return tuple(TodoWriteInput.model_validate_json(call.arguments).todos)
            except ValidationError:  # a hook rewrote the call; look further back
                continue
    return None


def _is_compacted_summary(message: ChatMessage) -> bool:
    # Chapter 8's summary is one system message holding a JSON object with this `kind`.
    # Parsed here rather than imported so chapter 5 does not depend on chapter 8's module.
    if not isinstance(message, SystemMessage) or not message.content.startswith("{"):
        return False
    try:
        payload = orjson.loads(message.content)
    except orjson.JSONDecodeError:
        return False
    return isinstance(payload, dict) and payload.get("kind") == "compacted_history"
