"""`DemoModel`, the `ModelClient` behind `--model demo`: it sends each request to the tour,
the summary answer or the subagent, then streams the reply and counts plausible usage."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import orjson

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    assistant_message,
    is_project_context,
    to_wire,
    tool_call,
)
from agent_tutorial.core.model import FinishReason, ModelReply, ModelRequest, Usage
from agent_tutorial.demo.report import write_report
from agent_tutorial.demo.script import DEMO_BANNER, Outcome, Script, Step
from agent_tutorial.demo.subagent import subagent_prompt, subagent_reply
from agent_tutorial.demo.summary import is_summary_request, summary_reply
from agent_tutorial.demo.text import to_json
from agent_tutorial.demo.tour import plan_tour

STREAM_PIECES = 3
BYTES_PER_TOKEN = 4


class DemoModel:
    """A `ModelClient` that plays a fixed, deterministic script. It is not an LLM.

    It keeps its own place in the script, because compaction may rewrite the request
    history, and reads the tool results it gets back only to make its report concrete.
    Chapter 8's summary requests are answered by the extractive summarizer without moving
    the script on; a subagent started by the demo's own `task` call makes one read.
    """

    def __init__(self, workspace: Path, *, long_session: bool = False) -> None:
        self.workspace = workspace
        self.long_session = long_session
        self._call_numbers = itertools.count(1)
        self._tour: _Tour | None = None

    def complete(self, request: ModelRequest) -> ModelReply:
        if is_summary_request(request):
            message = summary_reply(request.messages)
            if self._tour is not None:
                self._tour.summaries_answered += 1
        elif (task_prompt := subagent_prompt(request.messages)) is not None:
            message = subagent_reply(task_prompt, request, self._next_call_id)
        else:
            message = self._tour_step(request)
        finish: FinishReason = "tool_calls" if message.tool_calls else "stop"
        _stream(message.content or "", request.on_text)
        return ModelReply(message, finish, usage=_usage(request, message))

    def _tour_step(self, request: ModelRequest) -> AssistantMessage:
        if self._tour is None or _ends_with_prompt(request.messages):
            tools = {spec.name: spec for spec in request.tools}
            self._tour = _Tour(plan_tour(self.workspace, tools, long_session=self.long_session))
        tour = self._tour
        tour.take_result(request.messages)
        step = tour.next_step({spec.name for spec in request.tools})
        if step is None:
            self._tour = None
            return assistant_message(tour.report())
        call_id = self._next_call_id()
        tour.expect(step, call_id)
        call = tool_call(call_id, step.tool, to_json(step.arguments))
        return assistant_message(tour.narration(step), [call])

    def _next_call_id(self) -> str:
        return f"demo-call-{next(self._call_numbers)}"


class _Tour:
    """One prompt's walk through a script: where it is, and what each step returned."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.outcomes: list[Outcome] = []
        self.summaries_answered = 0
        self._position = 0
        self._waiting: tuple[Step, str] | None = None

    def take_result(self, messages: Sequence[ChatMessage]) -> None:
        """Record the result of the call made last, if the request still holds it."""
        if self._waiting is None:
            return
        step, call_id = self._waiting
        self._waiting = None
        self.outcomes.append(Outcome(step, _result_for(call_id, messages)))

    def next_step(self, offered: set[str]) -> Step | None:
        steps = self.script.steps
        while self._position < len(steps):
            step = steps[self._position]
            self._position += 1
            if step.tool in offered:
                return step
        return None

    def expect(self, step: Step, call_id: str) -> None:
        self._waiting = (step, call_id)

    def narration(self, step: Step) -> str | None:
        if not self.outcomes:  # the first reply says what this is
            return " ".join(filter(None, (DEMO_BANNER, self.script.intro, step.narration)))
        return step.narration

    def report(self) -> str:
        return write_report(self.script, self.outcomes, self.summaries_answered)


def _ends_with_prompt(messages: Sequence[ChatMessage]) -> bool:
    """True when the newest non-system message is a user prompt: a new run has begun. The
    request-only nudge chapter 8 adds after a summary is not a prompt, nor is the project
    context (all that comes before a summary, once one replaced the history)."""
    from agent_tutorial.features.compaction import CONTINUE_AFTER_SUMMARY

    for message in reversed(messages):
        if isinstance(message, UserMessage) and message.content == CONTINUE_AFTER_SUMMARY:
            continue
        if is_project_context(message):
            return False
        if not isinstance(message, SystemMessage):
            return isinstance(message, UserMessage)
    return False


def _result_for(call_id: str, messages: Sequence[ChatMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return message.content
    return None


def _stream(text: str, on_text: Callable[[str], None] | None) -> None:
    """Send `text` in a few word-aligned pieces, the way a streaming endpoint would."""
    if not text or on_text is None:
        return
    words = text.split(" ")
    size = math.ceil(len(words) / STREAM_PIECES)
    for start in range(0, len(words), size):
        end = start + size
        on_text(" ".join(words[start:end]) + (" " if end < len(words) else ""))


def _usage(request: ModelRequest, message: AssistantMessage) -> Usage:
    """Plausible token counts: UTF-8 bytes of the wire JSON over four."""
    sent = sum(len(orjson.dumps(to_wire(m))) for m in request.messages)
    sent += sum(len(orjson.dumps(spec.to_wire())) for spec in request.tools)
    prompt = math.ceil(sent / BYTES_PER_TOKEN)
    completion = math.ceil(len(orjson.dumps(to_wire(message))) / BYTES_PER_TOKEN)
    return Usage(prompt, completion, prompt + completion)
