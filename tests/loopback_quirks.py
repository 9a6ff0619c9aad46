"""Switchable behaviours of real OpenAI-compatible servers, for the loopback server.

Each quirk is modelled on traffic observed from a real server (named in its comment); none
of them was checked against a live server from this test suite, which reaches only
127.0.0.1. `LoopbackServer.quirks` applies them to every request: a quirk may refuse the
request, replace or hide the scripted reply, or rewrite its stream events.

The runaway streams at the end are replies rather than switches (`Reply(raw_stream=...)`):
streams that do not end on their own, as issue 17's red team served them.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Quirks:
    null_content_rejected: bool = False
    """llama-cpp-python: `"content": null` in any message fails its request validation
    with a 500 (which the SDK retries)."""

    tools_need_tool_choice: bool = False
    """llama-cpp-python's function-calling format: without `tool_choice` the model is not
    shown the tools, so it answers in text instead of the scripted tool call."""

    empty_stream_on_error: bool = False
    """llama-cpp-python: an error found while generating (a context overflow) is sent as
    `200 text/event-stream` with no event at all; without streaming it is a real error."""

    no_stream_usage: bool = False
    """Servers that ignore `stream_options.include_usage`: no usage chunk in streams."""

    system_only_first: bool = False
    """Gemma's and Mistral's chat templates: a system message anywhere but first fails
    to render (a 500 from llama.cpp-based servers)."""

    strict_alternation: bool = False
    """Chat templates that raise unless user and assistant turns alternate (two user turns
    in a row fail to render)."""

    calls_at_index_zero: bool = False
    """Servers that send every streamed tool call at `index` 0, told apart only by id."""

    duplicate_call_ids: bool = False
    """Servers that give every tool call in a reply the same id."""

    rejects_max_tokens: bool = False
    """OpenAI's reasoning models: `max_tokens` is refused; `max_completion_tokens` works."""

    rejects_tool_choice: bool = False
    """vLLM started without `--enable-auto-tool-choice`: `tool_choice: "auto"` is a 400."""

    honours_output_cap: bool = False
    """Every real server: a reply stops after the requested output cap (one content delta
    counts as one token here) with finish reason `length`."""

    @classmethod
    def all(cls) -> Quirks:
        return cls(**{item.name: True for item in fields(cls)})


LLAMA_CPP_PYTHON = Quirks(
    null_content_rejected=True,
    tools_need_tool_choice=True,
    empty_stream_on_error=True,
    no_stream_usage=True,
    system_only_first=True,  # with a Gemma model, as observed
    honours_output_cap=True,
)
"""llama-cpp-python 0.3's server as issue 9 observed it (Qwen2.5-Coder and Gemma 3)."""

DUPLICATE_CALL_ID = "call_0"
TOOLS_IGNORED_ANSWER = "I have no tools here."


def refusal(quirks: Quirks, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The error status and body a server with these quirks answers `body` with, if any."""
    messages = body.get("messages") or []
    if quirks.null_content_rejected and any(
        "content" in message and message["content"] is None for message in messages
    ):
        return 500, _validation_error("content", "Input should be a valid string")
    if quirks.system_only_first and any(
        message.get("role") == "system" for message in messages[1:]
    ):
        return 500, {"error": {"message": "System role must be first in the conversation"}}
    if quirks.strict_alternation and any(
        first.get("role") == second.get("role") == "user"
        for first, second in itertools.pairwise(messages)
    ):
        return 500, {"error": {"message": "Conversation roles must alternate user/assistant"}}
    if quirks.rejects_max_tokens and "max_tokens" in body:
        return 400, {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        }
    if quirks.rejects_tool_choice and body.get("tool_choice") == "auto":
        return 400, {
            "object": "error",
            "message": '"auto" tool choice requires --enable-auto-tool-choice and '
            "--tool-call-parser to be set",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    return None


def _validation_error(field: str, message: str) -> dict[str, Any]:
    return {
        "detail": [{"type": "string_type", "loc": ["body", "messages", 2, field], "msg": message}]
    }


def ignores_tools(quirks: Quirks, body: dict[str, Any]) -> bool:
    return quirks.tools_need_tool_choice and bool(body.get("tools")) and "tool_choice" not in body


def output_cap(body: dict[str, Any]) -> int | None:
    cap = body.get("max_completion_tokens", body.get("max_tokens"))
    return cap if isinstance(cap, int) else None


def rewrite_events(
    quirks: Quirks, events: list[dict[str, Any]], cap: int | None
) -> list[dict[str, Any]]:
    """The stream events a server with these quirks would send instead of `events`."""
    if quirks == Quirks():
        return events  # as scripted, malformed events included
    events = copy.deepcopy(events)
    if quirks.no_stream_usage:
        events = [event for event in events if not event.get("usage")]
        for event in events:
            event.pop("usage", None)
    for call in _tool_call_deltas(events):
        if quirks.calls_at_index_zero:
            call["index"] = 0
        if quirks.duplicate_call_ids and call.get("id"):
            call["id"] = DUPLICATE_CALL_ID
    if quirks.honours_output_cap and cap is not None:
        events = _capped(events, cap)
    return events


def _tool_call_deltas(events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for event in events:
        for choice in event.get("choices") or ():
            yield from (choice.get("delta") or {}).get("tool_calls") or ()


def _capped(events: list[dict[str, Any]], cap: int) -> list[dict[str, Any]]:
    """Events up to the cap-th content delta, then a `length` finish."""
    kept: list[dict[str, Any]] = []
    tokens = 0
    for event in events:
        deltas = [choice.get("delta") or {} for choice in event.get("choices") or ()]
        if any(delta.get("content") for delta in deltas):
            if tokens == cap:
                kept.append(_finish_event(event, "length"))
                return kept
            tokens += 1
        kept.append(event)
    return kept


def _finish_event(template: dict[str, Any], reason: str) -> dict[str, Any]:
    return {**template, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def whole_completion(
    quirks: Quirks, events: list[dict[str, Any]], cap: int | None
) -> dict[str, Any]:
    """What a server with these quirks answers without streaming (stream quirks aside)."""
    unstreamed = replace(quirks, calls_at_index_zero=False, no_stream_usage=False)
    return completion_from_events(rewrite_events(unstreamed, events, cap))


def completion_from_events(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole (non-streamed) completion a stream of events adds up to."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish_reason = None
    usage = None
    for event in events:
        usage = event.get("usage") or usage
        for choice in event.get("choices") or ():
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            for position, call in enumerate(delta.get("tool_calls") or ()):
                _add_call_delta(calls, call.get("index", position), call)
            finish_reason = choice.get("finish_reason") or finish_reason
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[index] for index in sorted(calls)]
    completion = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": "loopback-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    return {**completion, "usage": usage} if usage else completion


def _add_call_delta(calls: dict[int, dict[str, Any]], index: int, delta: dict[str, Any]) -> None:
    call = calls.setdefault(
        index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
    )
    call["id"] = delta.get("id") or call["id"]
    function = delta.get("function") or {}
    call["function"]["name"] += function.get("name") or ""
    arguments = function.get("arguments") or ""
    call["function"]["arguments"] += (
        arguments if isinstance(arguments, str) else json.dumps(arguments)
    )


# --- Runaway streams: bytes for as long as the client reads -----------------------------------

RawStream = Callable[[], Iterator[bytes]]
"""What `Reply(raw_stream=...)` sends: the generator runs until the client hangs up."""

KEEPALIVE = b": keepalive\n\n"


def sse_data(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """One streamed chunk of the loopback model's reply, in OpenAI's shape."""
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "loopback-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def keepalive_trickle(
    pause: Callable[[], None],
    *,
    keepalives: int | None = None,
    then: Sequence[dict[str, Any]] = (),
) -> RawStream:
    """A stream held open by SSE comments, as OpenRouter (`: OPENROUTER PROCESSING`) and
    proxies in front of a slow model send them: a comment after each `pause()`,
    `keepalives` times (None: for ever), then the events `then` and `[DONE]`."""

    def stream() -> Iterator[bytes]:
        yield sse_data(chunk({"role": "assistant", "content": ""}))
        for _ in itertools.count() if keepalives is None else range(keepalives):
            pause()
            yield KEEPALIVE
        yield b"".join(map(sse_data, then)) + b"data: [DONE]\n\n"

    return stream


def endless_content(piece: str = "all work and no play " * 200) -> RawStream:
    """A model that never stops, on a server that ignores `max_tokens`: content deltas."""
    more = sse_data(chunk({"content": piece}))

    def stream() -> Iterator[bytes]:
        yield sse_data(chunk({"role": "assistant", "content": ""}))
        yield from itertools.repeat(more)

    return stream


def endless_arguments(name: str = "write_file", piece: str = "x" * 4096) -> RawStream:
    """One tool call whose arguments never end."""
    start = {"index": 0, "id": "call_endless", "type": "function"}
    opening = {**start, "function": {"name": name, "arguments": '{"path": "a", "content": "'}}
    more = sse_data(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))

    def stream() -> Iterator[bytes]:
        yield sse_data(chunk({"role": "assistant", "content": None, "tool_calls": [opening]}))
        yield from itertools.repeat(more)

    return stream


def endless_line(piece: bytes = b"x" * 65536) -> RawStream:
    """An event whose line never ends: the SDK's SSE decoder keeps a line whole until its
    newline, so no chunk ever reaches the adapter."""

    def stream() -> Iterator[bytes]:
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "'
        yield from itertools.repeat(piece)

    return stream


def padded_to(size: int, events: Sequence[dict[str, Any]]) -> RawStream:
    """`events` and `[DONE]`, preceded by one SSE comment that makes the body exactly `size`
    bytes: a reply at a byte cap, or one byte past it."""
    body = b"".join(map(sse_data, events)) + b"data: [DONE]\n\n"
    padding = size - len(body) - len(b":\n\n")
    if padding < 0:
        raise ValueError(f"the events alone are {len(body)} bytes, more than {size}")
    whole = b":" + b"p" * padding + b"\n\n" + body

    def stream() -> Iterator[bytes]:
        yield whole

    return stream
