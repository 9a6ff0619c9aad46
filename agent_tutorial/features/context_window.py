"""What this session knows about the model's context window: its size in tokens (set, or
reported by the server), the reply's reserve, how many bytes a token is worth here
(calibrated from the provider's own counts) and what the latest request used.

Compaction turns the window into a byte budget with it; the REPL and the JSON result show
the latest prompt against it.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from agent_tutorial.core.messages import ChatMessage
from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest, ToolSpec
from agent_tutorial.features.compaction import history_utf8_bytes
from agent_tutorial.features.compaction.budget import TokenCalibration, WindowSize


class ContextMeter:
    """One per session: the window, when known, and the bytes-per-token calibration."""

    def __init__(self, window: WindowSize | None) -> None:
        self.window = window
        self.calibration = TokenCalibration()

    def request_text(self, history_bytes: int) -> str:
        """`history_bytes` of request history in tokens, estimated with the calibration, and
        their share of the window when known: `≈3,100 tok, 24% of window`."""
        tokens = self.calibration.tokens_for(history_bytes)
        if self.window is None:
            return f"≈{tokens:,} tok"
        return f"≈{tokens:,} tok, {tokens / self.window.tokens:.0%} of window"

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
