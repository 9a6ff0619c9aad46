"""Events the agent emits while it works, and the sinks that receive them.

The loop and the features only *emit*; the terminal renderer, the JSON summary and the
session log are sinks. Nothing here knows how an event is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from agent_tutorial.core.messages import AssistantMessage, ChatMessage, ToolCall, to_wire
from agent_tutorial.core.model import FinishReason, Usage
from agent_tutorial.core.tools import ToolResult


@dataclass(frozen=True, slots=True)
class TurnStarted:
    turn: int


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ModelReplied:
    message: AssistantMessage
    finish_reason: FinishReason
    usage: Usage | None


@dataclass(frozen=True, slots=True)
class ToolStarted:
    call: ToolCall
    subject: str


@dataclass(frozen=True, slots=True)
class ToolFinished:
    call: ToolCall
    result: ToolResult
    seconds: float


@dataclass(frozen=True, slots=True)
class MessageAppended:
    """A message entered canonical history (the session log records these)."""

    message: ChatMessage


@dataclass(frozen=True, slots=True)
class CompactionApplied:
    """One compaction layer changed what the model will see.

    `layer` is one of persist, snip, micro, summary, reactive; `text` is the one-line
    description the terminal shows; `bytes_saved` feeds the JSON summary.
    """

    layer: str
    text: str
    count: int = 0
    bytes_saved: int = 0
    details: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Notice:
    level: Literal["info", "warning", "error"]
    text: str


@dataclass(frozen=True, slots=True)
class PermissionDecided:
    """The permission policy decided about one call (chapter 3)."""

    tool: str
    subject: str
    decision: Literal["allow", "ask", "deny"]
    reason: str
    source: str


@dataclass(frozen=True, slots=True)
class UsageReported:
    """Tokens spent by a model call outside the loop (a chapter-8 summary request), so
    that totals count every call the run made."""

    usage: Usage
    purpose: Literal["summary"]


@dataclass(frozen=True, slots=True)
class NestedEvent:
    """An event from a subagent, shown indented under the parent's tool line."""

    depth: int
    event: Event


Event: TypeAlias = (
    TurnStarted
    | TextDelta
    | ModelReplied
    | ToolStarted
    | ToolFinished
    | MessageAppended
    | CompactionApplied
    | Notice
    | PermissionDecided
    | UsageReported
    | NestedEvent
)


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class EventBus:
    """Fans one event out to every sink; shared by the runner and its features."""

    def __init__(self, sinks: Iterable[EventSink] = ()) -> None:
        self._sinks: list[EventSink] = list(sinks)

    def subscribe(self, sink: EventSink) -> None:
        self._sinks.append(sink)

    def emit(self, event: Event) -> None:
        for sink in self._sinks:
            sink.emit(event)


class EventLog:
    """A sink that keeps every event; handy in tests and for the JSON summary."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)


def event_record(event: Event) -> dict[str, Any]:
    """The JSON-ready record of one event (stream-json output and the session log)."""
    if isinstance(event, NestedEvent):
        return {**event_record(event.event), "depth": event.depth}
    if isinstance(event, TurnStarted):
        return {"type": "turn_started", "turn": event.turn}
    if isinstance(event, TextDelta):
        return {"type": "text_delta", "text": event.text}
    if isinstance(event, MessageAppended):
        return {"type": "message", "message": to_wire(event.message)}
    if isinstance(event, ModelReplied):
        usage = None if event.usage is None else usage_record(event.usage)
        return {"type": "model_reply", "finish_reason": event.finish_reason, "usage": usage}
    if isinstance(event, ToolStarted):
        return {"type": "tool_started", "id": event.call.id, "name": event.call.name}
    if isinstance(event, ToolFinished):
        return {
            "type": "tool_finished",
            "id": event.call.id,
            "name": event.call.name,
            "is_error": event.result.is_error,
            "error_code": event.result.error_code,
            "bytes": len(event.result.content.encode()),
            "seconds": round(event.seconds, 3),
        }
    if isinstance(event, CompactionApplied):
        return {
            "type": "compaction",
            "layer": event.layer,
            "text": event.text,
            "count": event.count,
            "bytes_saved": event.bytes_saved,
            "details": dict(event.details),
        }
    if isinstance(event, PermissionDecided):
        return {
            "type": "permission",
            "tool": event.tool,
            "subject": event.subject,
            "decision": event.decision,
            "reason": event.reason,
            "source": event.source,
        }
    if isinstance(event, UsageReported):
        return {"type": "usage", "purpose": event.purpose, **usage_record(event.usage)}
    return {"type": "notice", "level": event.level, "text": event.text}


def usage_record(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
