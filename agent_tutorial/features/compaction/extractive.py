"""A model-free summarizer that fills the five summary fields from the history itself.

The demo model answers summary requests with it, and compaction falls back on it when a
model-written summary cannot be had, so it never fails on a paired history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from agent_tutorial.core.messages import (
    AssistantMessage,
    History,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent_tutorial.features.compaction.layers import COMPACTED_TOOL_RESULT
from agent_tutorial.features.compaction.settings import CompactionSettings
from agent_tutorial.features.compaction.summary import (
    FOCUS_PREFIX,
    SUMMARY_INSTRUCTION,
    CompactionSummary,
    is_compacted_summary,
    parse_summary_content,
)

_FILE_TOOLS = ("read_file", "write_file", "edit_file")
_SUBJECT_ARGUMENTS = ("path", "command", "pattern")
_GENERIC_GOAL = "Continue the task from the conversation so far."
_GENERIC_REMAINING = "Continue from the latest user request."
_DEFAULTS = CompactionSettings()


class ExtractiveSummarizer:
    """Goal from the latest user prompt, files from file-tool arguments, findings from the
    first lines of the latest results, remaining work from the latest todo list; an earlier
    summary in the history carries its fields forward. How long and how many: `settings`'
    `extractive_...` numbers."""

    def __init__(self, settings: CompactionSettings = _DEFAULTS) -> None:
        self._limits = settings

    def summarize(self, history: History) -> CompactionSummary:
        earlier = _earlier_summary(history)
        prompts = [
            message.content
            for message in history
            if isinstance(message, UserMessage)
            and message.content.strip()
            and message.content != SUMMARY_INSTRUCTION
        ]
        requests = [prompt for prompt in prompts if not prompt.startswith(FOCUS_PREFIX)]
        focus = [prompt for prompt in prompts if prompt.startswith(FOCUS_PREFIX)]
        calls = _calls_by_id(history)
        limits = self._limits
        return CompactionSummary(
            current_goal=_goal(requests, earlier, limits),
            key_findings=_findings(history, calls, earlier, limits),
            files_read_or_changed=_files(calls.values(), earlier, limits),
            remaining_work=_remaining_work(calls.values(), earlier, limits),
            user_constraints=_constraints(requests[:-1] + focus, earlier, limits),
        )


def _earlier_summary(history: History) -> CompactionSummary | None:
    for message in reversed(history):
        if isinstance(message, SystemMessage) and is_compacted_summary(message):
            return parse_summary_content(message.content)[0]
    return None


def _calls_by_id(history: History) -> dict[str, ToolCall]:
    return {
        call.id: call
        for message in history
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }


def _goal(
    requests: Sequence[str], earlier: CompactionSummary | None, limits: CompactionSettings
) -> str:
    if requests:
        return _clip(requests[-1], limits.extractive_goal_chars)
    return earlier.current_goal if earlier is not None else _GENERIC_GOAL


def _findings(
    history: History,
    calls: dict[str, ToolCall],
    earlier: CompactionSummary | None,
    limits: CompactionSettings,
) -> tuple[str, ...]:
    latest: list[str] = []
    most = limits.extractive_max_findings
    for message in reversed(history):
        if len(latest) == most:
            break
        if isinstance(message, ToolMessage):
            finding = _finding(message, calls.get(message.tool_call_id), limits)
            if finding is not None:
                latest.append(finding)
    carried = list(earlier.key_findings) if earlier is not None else []
    return tuple(_unique([*carried, *reversed(latest)])[-most:])


def _finding(message: ToolMessage, call: ToolCall | None, limits: CompactionSettings) -> str | None:
    """`tool subject: first line`, or where a persisted result's full text is."""
    lines = [line.strip() for line in message.content.splitlines() if line.strip()]
    if not lines or lines[0] == COMPACTED_TOOL_RESULT:
        return None
    first = lines[0]
    if first == "<persisted-tool-result>" and len(lines) > 1:
        first = "full output in " + lines[1].removeprefix("path: ")
    return _clip(f"{_label(call)}: {first}", limits.extractive_item_chars)


def _label(call: ToolCall | None) -> str:
    if call is None:
        return "tool"
    arguments = _arguments(call)
    for name in _SUBJECT_ARGUMENTS:
        value = arguments.get(name)
        if isinstance(value, str) and value.strip():
            return f"{call.name} {value.strip()}"
    return call.name


def _files(
    calls: Iterable[ToolCall], earlier: CompactionSummary | None, limits: CompactionSettings
) -> tuple[str, ...]:
    paths = list(earlier.files_read_or_changed) if earlier is not None else []
    for call in calls:
        path = _arguments(call).get("path") if call.name in _FILE_TOOLS else None
        if isinstance(path, str) and path.strip():
            paths.append(_clip(path, limits.extractive_item_chars))
    return tuple(_unique(paths)[-limits.extractive_max_files :])


def _remaining_work(
    calls: Iterable[ToolCall], earlier: CompactionSummary | None, limits: CompactionSettings
) -> tuple[str, ...]:
    todo_calls = [call for call in calls if call.name == "todo_write"]
    if todo_calls:
        todos = _arguments(todo_calls[-1]).get("todos")
        remaining = _open_todos(todos, limits.extractive_item_chars)
    else:
        remaining = list(earlier.remaining_work) if earlier is not None else []
    return tuple(remaining[: limits.extractive_max_remaining]) or (_GENERIC_REMAINING,)


def _open_todos(todos: object, item_chars: int) -> list[str]:
    if not isinstance(todos, list):
        return []
    return [
        _clip(item["content"], item_chars)
        for item in todos
        if isinstance(item, dict)
        and isinstance(item.get("content"), str)
        and item["content"].strip()
        and item.get("status") != "completed"
    ]


def _constraints(
    messages: Sequence[str], earlier: CompactionSummary | None, limits: CompactionSettings
) -> tuple[str, ...]:
    carried = list(earlier.user_constraints) if earlier is not None else []
    said = [_clip(text, limits.extractive_item_chars) for text in messages]
    return tuple(_unique([*carried, *said])[-limits.extractive_max_constraints :])


def _arguments(call: ToolCall) -> dict[str, Any]:
    try:
        arguments = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


def _clip(text: str, limit: int) -> str:
    """One line of at most `limit` characters (whitespace runs become one space)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
