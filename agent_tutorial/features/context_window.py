"""What this session knows about the model's context window: its size in tokens (the
session's one `ContextWindow`: set, reported by the server, or stated in an overflow
error), the reply's reserve, how many bytes a token is worth here (calibrated from the
provider's own counts) and what the latest request used.

Compaction turns the window into a byte budget with it; the REPL and the JSON result show
the latest prompt against it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import orjson

from agent_tutorial.core.messages import ChatMessage
from agent_tutorial.core.model import (
    ModelClient,
    ModelReply,
    ModelRequest,
    PromptTooLongError,
    ToolSpec,
)
from agent_tutorial.core.window import ContextWindow
from agent_tutorial.features.compaction import history_utf8_bytes
from agent_tutorial.features.compaction.budget import TokenCalibration, WindowSize


class ContextMeter:
    """One per session: the session's window, as it is known now, and the bytes-per-token
    calibration."""

    def __init__(self, context_window: ContextWindow | None = None) -> None:
        self.context_window = context_window or ContextWindow()
        self.calibration = TokenCalibration()

    @property
    def window(self) -> WindowSize | None:
        """The window and the reply's reserve in it; None while unknown."""
        tokens = self.context_window.tokens
        if tokens is None:
            return None
        return WindowSize.of(tokens, self.context_window.max_output_tokens)

    def request_text(self, history_bytes: int) -> str:
        """`history_bytes` of request history in tokens, estimated with the calibration, and
        their share of the window when known: `≈3,100 tok, 24% of window`."""
        tokens = self.calibration.tokens_for(history_bytes)
        if self.window is None:
            return f"≈{tokens:,} tok"
        return f"≈{tokens:,} tok, {tokens / self.window.tokens:.0%} of window"

    def known_window_tokens(self) -> int | None:
        """The window as known now, in tokens (None: unknown)."""
        return self.context_window.tokens

    def observe(self, request_bytes: int, reply: ModelReply) -> None:
        if reply.usage is not None:
            self.calibration.observe(request_bytes, reply.usage.prompt_tokens)


def request_utf8_bytes(messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> int:
    """The request's size as compaction counts it: the messages' transcript lines and the
    tool schemas as compact JSON."""
    schemas = orjson.dumps([tool.to_wire() for tool in tools]) if tools else b""
    return history_utf8_bytes(messages) + len(schemas)


class MeteredModel:
    """The model as chapter 8 sees it: every reply's usage calibrates the meter against
    the bytes of the request that produced it (summary requests included)."""

    def __init__(self, model: ModelClient, meter: ContextMeter) -> None:
        self.model = model
        self.meter = meter

    def complete(self, request: ModelRequest) -> ModelReply:
        size = request_utf8_bytes(request.messages, request.tools)
        reply = self.model.complete(request)
        self.meter.observe(size, reply)
        return reply


RefusalSink = Callable[[int, PromptTooLongError], None]
"""Told of each agent request refused as too long: its bytes of messages and tool schemas
(`request_utf8_bytes`) and the error, with what it states."""


class WindowFromOverflow:
    """The model as chapter 8 sees it: a window a provider states in its overflow error
    (`PromptTooLongError.window_tokens`) is learned into the session's window (the meter's
    `ContextWindow`) for the rest of the session, as `--context-window` would set it, so
    the loop's one retry after the refusal fits. Only a window smaller than the known one
    is taken; `on_window` is told when the window changed during the call (the adapter may
    have learned it first). A count of the refused request it states calibrates bytes per
    token; `on_refusal` is told of every refused request that carried tools (an agent
    request, not a summary's). The error goes on to the loop either way."""

    def __init__(
        self,
        model: ModelClient,
        meter: ContextMeter,
        on_window: Callable[[int], None],
        on_refusal: RefusalSink | None = None,
    ) -> None:
        self.model = model
        self.meter = meter
        self.on_window = on_window
        self.on_refusal = on_refusal

    def complete(self, request: ModelRequest) -> ModelReply:
        known = self.meter.context_window.tokens
        try:
            return self.model.complete(request)
        except PromptTooLongError as error:
            self._learn(request, error, known)
            raise

    def _learn(self, request: ModelRequest, error: PromptTooLongError, known: int | None) -> None:
        size = request_utf8_bytes(request.messages, request.tools)
        if error.prompt_tokens is not None:
            self.meter.calibration.learn_from_refusal(size, error.prompt_tokens)
        window = self.meter.context_window
        if error.window_tokens is not None:
            window.learn(error.window_tokens)
        if window.tokens is not None and window.tokens != known:
            self.on_window(window.tokens)
        if request.tools and self.on_refusal is not None:
            self.on_refusal(size, error)
