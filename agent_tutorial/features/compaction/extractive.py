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
from agent_tutorial.features.compaction.summary import (
    FOCUS_PREFIX,
    SUMMARY_INSTRUCTION,
    CompactionSummary,
    is_compacted_summary,
    parse_summary_content,
)

_FILE_TOOLS = ("read_file", "write_file", "edit_file")
_SUBJECT_ARGUMENTS = ("path", "command", "pattern")
_ITEM_CHARS = 200
_GOAL_CHARS = 1_000
_MAX_FINDINGS = 6
_MAX_FILES = 20
_MAX_REMAINING = 10
_MAX_CONSTRAINTS = 6
_GENERIC_GOAL = "Continue the task from the conversation so far."
_GENERIC_REMAINING = "Continue from the latest user request."


class ExtractiveSummarizer:
    """Goal from the latest user prompt, files from file-tool arguments, findings from the
    first lines of the latest results, remaining work from the latest todo list; an earlier
    summary in the history carries its fields forward."""

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
        return CompactionSummary(
            current_goal=_goal(requests, earlier),
            key_findings=_findings(history, calls, earlier),
            files_read_or_changed=_files(calls.values(), earlier),
            remaining_work=_remaining_work(calls.values(), earlier),
            user_constraints=_constraints(requests[:-1] + focus, earlier),
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


def _goal(requests: Sequence[str], earlier: CompactionSummary | None) -> str:
    if requests:
        return _clip(requests[-1], _GOAL_CHARS)
    return earlier.current_goal if earlier is not None else _GENERIC_GOAL


def _findings(
    history: History, calls: dict[str, ToolCall], earlier: CompactionSummary | None
) -> tuple[str, ...]:
    latest: list[str] = []
    for message in reversed(history):
        if len(latest) == _MAX_FINDINGS:
            break
        if isinstance(message, ToolMessage):
            finding = _finding(message, calls.get(message.tool_call_id))
            if finding is not None:
                latest.append(finding)
    carried = list(earlier.key_findings) if earlier is not None else []
    return tuple(_unique([*carried, *reversed(latest)])[-_MAX_FINDINGS:])


def _finding(message: ToolMessage, call: ToolCall | None) -> str | None:
    """`tool subject: first line`, or where a persisted result's full text is."""
    lines = [line.strip() for line in message.content.splitlines() if line.strip()]
    if not lines or lines[0] == COMPACTED_TOOL_RESULT:
        return None
    first = lines[0]
    if first == "<persisted-tool-result>" and len(lines) > 1:
        first = "full output in " + lines[1].removeprefix("path: ")
    return _clip(f"{_label(call)}: {first}", _ITEM_CHARS)


def _label(call: ToolCall | None) -> str:
    if call is None:
        return "tool"
    arguments = _arguments(call)
    for name in _SUBJECT_ARGUMENTS:
        value = arguments.get(name)
        if isinstance(value, str) and value.strip():
            return f"{call.name} {value.strip()}"
    return call.name


def _files(calls: Iterable[ToolCall], earlier: CompactionSummary | None) -> tuple[str, ...]:
    paths = list(earlier.files_read_or_changed) if earlier is not None else []
    for call in calls:
        path = _arguments(call).get("path") if call.name in _FILE_TOOLS else None
        if isinstance(path, str) and path.strip():
            paths.append(_clip(path, _ITEM_CHARS))
    return tuple(_unique(paths)[-_MAX_FILES:])


def _remaining_work(
    calls: Iterable[ToolCall], earlier: CompactionSummary | None
) -> tuple[str, ...]:
    todo_calls = [call for call in calls if call.name == "todo_write"]
    if todo_calls:
        remaining = _open_todos(_arguments(todo_calls[-1]).get("todos"))
    else:
        remaining = list(earlier.remaining_work) if earlier is not None else []
    return tuple(remaining[:_MAX_REMAINING]) or (_GENERIC_REMAINING,)


def _open_todos(todos: object) -> list[str]:
    if not isinstance(todos, list):
        return []
    return [
        _clip(item["content"], _ITEM_CHARS)
        for item in todos
        if isinstance(item, dict)
        and isinstance(item.get("content"), str)
        and item["content"].strip()
        and item.get("status") != "completed"
    ]


def _constraints(messages: Sequence[str], earlier: CompactionSummary | None) -> tuple[str, ...]:
    carried = list(earlier.user_constraints) if earlier is not None else []
    said = [_clip(text, _ITEM_CHARS) for text in messages]
    return tuple(_unique([*carried, *said])[-_MAX_CONSTRAINTS:])


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
