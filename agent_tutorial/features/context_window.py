"""What this session knows about the model's context window: its size in tokens (set, or
reported by the server), the reply's reserve, how many bytes a token is worth here
(calibrated from the provider's own counts) and what the latest request used.

Compaction turns the window into a byte budget with it; the REPL and the JSON result show
the latest prompt against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from agent_tutorial.core.messages import ChatMessage
from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest, ToolSpec, Usage
from agent_tutorial.features.compaction import history_utf8_bytes

INITIAL_BYTES_PER_TOKEN = 3.5
"""A conservative start: English prose runs near 4 bytes a token, JSON-escaped code lower."""
CALIBRATION_WEIGHT = 0.3
"""How much one observation moves the moving average."""
_PLAUSIBLE_BYTES_PER_TOKEN = (1.0, 8.0)  # outside this a count is not about this request
DEFAULT_OUTPUT_CAP_TOKENS = 8_192
"""The reply's reserve when no output cap is configured."""


class TokenCalibration:
    """Bytes per token as a moving average of (bytes sent / prompt tokens reported)."""

    def __init__(self, bytes_per_token: float = INITIAL_BYTES_PER_TOKEN) -> None:
        self.bytes_per_token = bytes_per_token
        self.observations = 0

    def observe(self, request_bytes: int, prompt_tokens: int) -> None:
        if request_bytes <= 0 or prompt_tokens <= 0:
            return
        ratio = request_bytes / prompt_tokens
        low, high = _PLAUSIBLE_BYTES_PER_TOKEN
        if not low <= ratio <= high:
            return
        weight = CALIBRATION_WEIGHT
        self.bytes_per_token = (1 - weight) * self.bytes_per_token + weight * ratio
        self.observations += 1

    def tokens_for(self, utf8_bytes: int) -> int:
        return round(utf8_bytes / self.bytes_per_token)

    def bytes_for(self, tokens: int) -> int:
        return int(tokens * self.bytes_per_token)


@dataclass(frozen=True, slots=True)
class WindowSize:
    """A known context window and the part of it kept for the reply."""

    tokens: int
    output_cap_tokens: int

    @classmethod
    def of(cls, tokens: int, output_cap_tokens: int | None = None) -> WindowSize:
        """The reply's reserve is its cap, at most a quarter of the window: a server such
        as vLLM refuses prompt + max_tokens over the window, with an error that reads like
        an overflow."""
        if tokens <= 0:
            raise ValueError(f"the context window must be positive, got {tokens}")
        cap = DEFAULT_OUTPUT_CAP_TOKENS if output_cap_tokens is None else output_cap_tokens
        return cls(tokens, max(1, min(cap, tokens // 4)))

    @property
    def prompt_tokens(self) -> int:
        """The most a prompt may hold."""
        return self.tokens - self.output_cap_tokens


class ContextMeter:
    """One per session: the window, when known, and the bytes-per-token calibration."""

    def __init__(self, window: WindowSize | None) -> None:
        self.window = window
        self.calibration = TokenCalibration()

    def observe(self, request_bytes: int, reply: ModelReply) -> None:
        if reply.usage is not None:
            self.calibration.observe(request_bytes, reply.usage.prompt_tokens)


def describe_prompt(usage: Usage, window: WindowSize | None) -> str:
    """The latest prompt's size for people: tokens, share of the window, cached tokens."""
    text = f"{usage.prompt_tokens:,} tokens"
    if window is not None:
        text += f" ({usage.prompt_tokens / window.tokens:.0%} of {window.tokens:,})"
    if usage.cached_prompt_tokens is not None:
        text += f", {usage.cached_prompt_tokens:,} cached"
    return text


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
