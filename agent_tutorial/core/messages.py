"""Chat messages, their OpenAI wire shape, and the tool-call pairing rule every history obeys.

A history is *paired* when each assistant tool call is answered by exactly one tool message
before the next non-tool message, and no tool message answers anything else.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call requested by the model; `arguments` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class SystemMessage:
    content: str
    role: Literal["system"] = field(default="system", init=False)


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: str
    role: Literal["user"] = field(default="user", init=False)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    role: Literal["assistant"] = field(default="assistant", init=False)


@dataclass(frozen=True, slots=True)
class ToolMessage:
    content: str
    tool_call_id: str
    role: Literal["tool"] = field(default="tool", init=False)


ChatMessage: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
History: TypeAlias = Sequence[ChatMessage]


class ToolPairingError(ValueError):
    """A history breaks the tool-call pairing rule; the message says where."""


def system_message(content: str) -> SystemMessage:
    return SystemMessage(content=content)


def user_message(content: str) -> UserMessage:
    return UserMessage(content=content)


_PROJECT_CONTEXT_OPEN, _PROJECT_CONTEXT_CLOSE = "<project_context>", "</project_context>"


def project_context_message(text: str) -> UserMessage:
    """The project's part of the prompt (where it is, its instructions, its skills) as the
    user message that follows the system prompt in every request. Marked, so that neither
    the model nor a reader of a request takes it for something the user typed (Codex CLI
    marks its environment context the same way)."""
    return UserMessage(content=f"{_PROJECT_CONTEXT_OPEN}\n{text}\n{_PROJECT_CONTEXT_CLOSE}")


def is_project_context(message: ChatMessage) -> bool:
    return isinstance(message, UserMessage) and message.content.startswith(_PROJECT_CONTEXT_OPEN)


def assistant_message(content: str | None, tool_calls: Sequence[ToolCall] = ()) -> AssistantMessage:
    return AssistantMessage(content=content, tool_calls=tuple(tool_calls))


def tool_message(content: str, tool_call_id: str) -> ToolMessage:
    return ToolMessage(content=content, tool_call_id=tool_call_id)


def tool_call(id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def new_call_id() -> str:
    """An id in OpenAI's shape for a call that came without one (some servers send none,
    and a call read from a model's text has none)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def to_wire(message: ChatMessage) -> dict[str, Any]:
    """The OpenAI chat-completions shape of one message."""
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": message.content, "tool_call_id": message.tool_call_id}
    if isinstance(message, AssistantMessage):
        wire: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            wire["tool_calls"] = [_call_to_wire(call) for call in message.tool_calls]
        return wire
    return {"role": message.role, "content": message.content}


def _call_to_wire(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def from_wire(wire: dict[str, Any]) -> ChatMessage:
    """Inverse of `to_wire`; raises `ValueError` on a shape it does not know."""
    role = wire.get("role")
    content = wire.get("content")
    if role == "tool":
        return tool_message(
            _require_str(content, "content"), _require_str(wire.get("tool_call_id"), "tool_call_id")
        )
    if role == "assistant":
        calls = tuple(_call_from_wire(item) for item in _require_list(wire.get("tool_calls")))
        if content is not None and not isinstance(content, str):
            raise ValueError("assistant content must be a string or null")
        return assistant_message(content, calls)
    if role == "system":
        return system_message(_require_str(content, "content"))
    if role == "user":
        return user_message(_require_str(content, "content"))
    raise ValueError(f"unknown message role {role!r}")


def _require_list(value: object) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"tool calls must be a list, got {type(value).__name__}")
    return value


def _call_from_wire(item: object) -> ToolCall:
    if not isinstance(item, dict):
        raise ValueError(f"a tool call must be an object, got {type(item).__name__}")
    function = item.get("function") or {}
    if not isinstance(function, dict):
        raise ValueError(f"a tool call's function must be an object, got {type(function).__name__}")
    return tool_call(
        _require_str(item.get("id"), "tool call id"),
        _require_str(function.get("name"), "tool call name"),
        _require_str(function.get("arguments"), "tool call arguments"),
    )


def _require_str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {type(value).__name__}")
    return value


def validate_tool_pairing(history: History) -> None:
    """Raise `ToolPairingError` unless every tool call is answered exactly once, in place."""
    PairingTracker.of(history)


class PairingTracker:
    """The pairing rule kept as a history grows: each `append` checks one message against
    the calls seen so far, in time independent of the history's length.

    A history is paired when every message was appended without error and nothing is
    pending (`check_answered`).
    """

    def __init__(self) -> None:
        self.call_ids: set[str] = set()
        """Every tool call id the history holds."""
        self._pending: set[str] = set()
        """The ids of the calls still waiting for their result."""
        self._length = 0

    @classmethod
    def of(cls, history: History) -> PairingTracker:
        """The tracker of a whole history; `ToolPairingError` unless it is paired."""
        tracker = cls()
        for message in history:
            tracker.append(message)
        tracker.check_answered()
        return tracker

    def append(self, message: ChatMessage) -> None:
        """Take in the next message; `ToolPairingError` (and nothing taken in) if it
        breaks the rule."""
        if isinstance(message, ToolMessage):
            self._check_result(message)
            self._pending.remove(message.tool_call_id)
        else:
            self.check_answered()
            if isinstance(message, AssistantMessage):
                self._add_calls(message.tool_calls)
        self._length += 1

    def check_answered(self) -> None:
        """`ToolPairingError` if a call still waits for its result."""
        if self._pending:
            missing = sorted(self._pending)
            raise ToolPairingError(
                f"missing tool result for {missing!r} before message {self._length}"
            )

    def _add_calls(self, calls: Sequence[ToolCall]) -> None:
        ids: set[str] = set()
        for call in calls:
            if call.id in self.call_ids or call.id in ids:
                raise ToolPairingError(
                    f"duplicate tool call id {call.id!r} at message {self._length}"
                )
            ids.add(call.id)
        self.call_ids.update(ids)
        self._pending.update(ids)

    def _check_result(self, message: ToolMessage) -> None:
        call_id, index = message.tool_call_id, self._length
        if call_id in self._pending:
            return
        if call_id in self.call_ids:
            raise ToolPairingError(f"duplicate tool result for call {call_id!r} at message {index}")
        if not self._pending:
            raise ToolPairingError(f"orphan tool result {call_id!r} at message {index}")
        raise ToolPairingError(
            f"tool result id {call_id!r} at message {index} matches none of the pending calls "
            f"{sorted(self._pending)!r}"
        )


def iter_message_groups(history: History) -> Iterator[tuple[ChatMessage, ...]]:
    """Split a paired history into groups: a plain message, or an assistant turn with its
    tool calls plus all of their results. Compaction cuts whole groups only."""
    group: list[ChatMessage] = []
    for message in history:
        if isinstance(message, ToolMessage) and group:
            group.append(message)
            continue
        if group:
            yield tuple(group)
        group = [message]
        if not (isinstance(message, AssistantMessage) and message.tool_calls):
            yield tuple(group)
            group = []
    if group:
        yield tuple(group)


def is_tool_group(group: Sequence[ChatMessage]) -> bool:
    first = group[0]
    return isinstance(first, AssistantMessage) and bool(first.tool_calls)
