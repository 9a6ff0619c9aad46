"""A strict scripted model for tests and docs: it answers from a fixed list and fails loudly
on any call the script did not expect."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias

from agent_tutorial.core.messages import AssistantMessage, ToolCall, assistant_message
from agent_tutorial.core.model import ModelError, ModelReply, ModelRequest, Usage

ScriptedReply: TypeAlias = ModelReply | ModelError | Callable[[ModelRequest], ModelReply]


class UnexpectedModelCall(AssertionError):
    """The scripted model was called more times than it has replies."""


class ScriptedModel:
    """Returns (or raises) its replies in order and records every request in `.requests`.

    A reply may be a `ModelReply`, a `ModelError` to raise, or a function of the request.
    """

    def __init__(self, replies: Iterable[ScriptedReply]) -> None:
        self._replies = list(replies)
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        if len(self.requests) > len(self._replies):
            raise UnexpectedModelCall(
                f"call {len(self.requests)} but only {len(self._replies)} replies were scripted"
            )
        reply = self._replies[len(self.requests) - 1]
        if isinstance(reply, ModelError):
            raise reply
        if callable(reply):
            reply = reply(request)
        if request.on_text is not None and reply.message.content:
            request.on_text(reply.message.content)
        return reply

    def assert_exhausted(self) -> None:
        left = len(self._replies) - len(self.requests)
        if left:
            raise AssertionError(f"{left} scripted replies were never requested")


def text_reply(text: str, usage: Usage | None = None) -> ModelReply:
    return ModelReply(message=assistant_message(text), finish_reason="stop", usage=usage)


def tool_reply(*calls: ToolCall, content: str | None = None) -> ModelReply:
    message: AssistantMessage = assistant_message(content, calls)
    return ModelReply(message=message, finish_reason="tool_calls")
