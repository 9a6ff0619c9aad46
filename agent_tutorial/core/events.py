"""Events the agent emits while it works, and the sinks that receive them.

The loop and the features only *emit*; the terminal renderer, the JSON summary and the
session log are sinks. Nothing here knows how an event is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

from agent_tutorial.core.messages import AssistantMessage, ChatMessage, ToolCall
from agent_tutorial.core.model import FinishReason, Usage
from agent_tutorial.core.tools import ToolResult

WAITING_INTERVAL_S = 5.0
"""Seconds between reports that the model is still awaited after a `TurnStarted`
(stream-json's `system/waiting` lines); `Settings.waiting_event_interval_s` starts here."""


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


ASKING_SOURCE = "approval"
"""The `source` of the "ask" decision announced just before the user is asked."""


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
