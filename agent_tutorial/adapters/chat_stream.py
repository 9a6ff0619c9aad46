"""Reading replies: tool calls assembled from streamed deltas, finish reasons and usage
normalised across servers, a whole (non-streamed) completion read the same way, the caps
that end a reply as soon as its text or a call's arguments pass them, and the text relay
that shows a retried stream once.

No SDK calls here; the SDK's chunk and completion types are only read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeGuard

from agent_tutorial.adapters.provider_errors import one_line
from agent_tutorial.core.messages import ToolCall, assistant_message, new_call_id
from agent_tutorial.core.model import FinishReason, ModelReply, ProviderError, Usage
from agent_tutorial.core.tools import utf8_size

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.completion_usage import CompletionUsage


_TEXT_BYTES_PER_TOKEN = 32
"""More UTF-8 bytes than any tokenizer spends on a token, on average over a reply (about 4
for English and code, under 8 for CJK), so only a server that ignores its cap passes it."""

_WIRE_BYTES_PER_TOKEN = 1024
"""More bytes than a streamed chunk carrying one token takes on the wire: the SSE framing,
the ids, model name and fields servers add (~200-400 bytes), and the token itself."""

_WIRE_SLACK_BYTES = 1024 * 1024
"""Room for what is not one token per chunk: the role, finish and usage chunks, an error."""


@dataclass(frozen=True, slots=True)
class ReplyCaps:
    """What one reply may hold, read as it arrives; the reply ends with an error at the
    first byte past a cap. Every cap is far above what a server that honours the output
    cap can send, so only a runaway or hostile one meets them."""

    text_bytes: int
    """UTF-8 bytes of the reply's text."""
    argument_bytes: int
    """UTF-8 bytes of one tool call's arguments (`max_tool_argument_bytes`)."""
    body_bytes: int
    """Bytes of the whole reply on the wire (for the transport): what the two caps above
    cannot see, such as comments, fields this client ignores, or one endless line."""

    @classmethod
    def for_output_cap(cls, max_output_tokens: int, max_argument_bytes: int) -> ReplyCaps:
        return cls(
            text_bytes=max_output_tokens * _TEXT_BYTES_PER_TOKEN,
            argument_bytes=max_argument_bytes,
            body_bytes=max_output_tokens * _WIRE_BYTES_PER_TOKEN + _WIRE_SLACK_BYTES,
        )


_FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "content_filter": "content_filter",
}


MAX_TOOL_NAME_CHARS = 256
"""Far past any tool's name (OpenAI allows 64): a longer one is a server gone wrong."""


@dataclass
class _PartialCall:
    id: str
    index: int | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    argument_bytes: int = 0

    def add_name(self, name: str) -> None:
        # Some servers repeat the whole name in every delta, others split it.
        if name == self.name:
            return
        if len(self.name) + len(name) > MAX_TOOL_NAME_CHARS:  # else endless, and copied each time
            raise ProviderError(
                f"the endpoint sent a tool name longer than {MAX_TOOL_NAME_CHARS} characters "
                f"({one_line(self.name[:40])!r}…); the reply was stopped there"
            )
        self.name += name

    def continues_with(self, index: int | None, call_id: str | None) -> bool:
        """Whether a delta belongs to this call: neither its index nor a non-empty id differ
        (a missing one differs from nothing)."""
        same_index = index is None or self.index is None or index == self.index
        same_id = not call_id or not self.id or call_id == self.id
        return same_index and same_id

    def take(self, index: int | None, call_id: str | None) -> _PartialCall:
        """Adopt an index or id that arrives after the call's first delta."""
        if self.index is None:
            self.index = index
        if not self.id and call_id:
            self.id = call_id
        return self

    def finish(self) -> ToolCall:
        arguments = "".join(self.arguments)
        # Servers send "" for a call without arguments; "{}" is what the tool and every
        # provider reading the history back expect.
        call_id = self.id or new_call_id()
        return ToolCall(id=call_id, name=self.name, arguments=arguments or "{}")


class _ToolCallAssembler:
    """Builds whole tool calls from streamed deltas. A new call starts when the `index` or
    a non-empty `id` changes: some servers send every call at index 0 (told apart by id),
    others give two calls the same id (told apart by index; the loop renames them later).
    A delta that names an earlier call's index again, with no other id, goes back to it.
    A call whose arguments pass `max_argument_bytes` ends the reply there."""

    def __init__(self, max_argument_bytes: int) -> None:
        self._max_argument_bytes = max_argument_bytes
        self._calls: list[_PartialCall] = []
        self._by_index: dict[int, _PartialCall] = {}

    def add(
        self, index: int | None, call_id: str | None, name: str | None, arguments: object
    ) -> None:
        call = self._target(index, call_id)
        if name:
            call.add_name(name)
        if arguments is not None and not isinstance(arguments, str):
            # llama.cpp and TGI have sent the arguments as a JSON object, not its text; any
            # other value becomes its text too, for the tool registry to refuse readably.
            arguments = json.dumps(arguments)
        if arguments:
            call.argument_bytes += utf8_size(arguments)
            if call.argument_bytes > self._max_argument_bytes:
                raise ProviderError(
                    f"the endpoint sent a tool call ({one_line(call.name)!r}) whose arguments "
                    f"pass {self._max_argument_bytes} bytes (max_tool_argument_bytes); "
                    f"the reply was stopped there"
                )
            call.arguments.append(arguments)

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(call.finish() for call in self._calls)

    def _target(self, index: int | None, call_id: str | None) -> _PartialCall:
        current = self._calls[-1] if self._calls else None
        earlier = self._by_index.get(index) if index is not None else None
        for candidate in (current, earlier):
            if candidate is not None and candidate.continues_with(index, call_id):
                return self._remember(candidate.take(index, call_id))
        call = _PartialCall(id=call_id or "", index=index)
        self._calls.append(call)
        return self._remember(call)

    def _remember(self, call: _PartialCall) -> _PartialCall:
        if call.index is not None:
            self._by_index[call.index] = call
        return call


class StreamedReply:
    """What one stream delivered so far, within `caps`; `finish_reason` stays None if the
    stream was cut."""

    def __init__(self, caps: ReplyCaps) -> None:
        self._max_text_bytes = caps.text_bytes
        self._text_bytes = 0
        self.text: list[str] = []
        self.tool_calls = _ToolCallAssembler(caps.argument_bytes)
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take in one chunk; return the text it adds (empty if none)."""
        self.chunks += 1
        if chunk.usage is not None:
            self.usage = read_usage(chunk.usage) or self.usage
        added = ""
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue  # we ask for one choice; ignore anything else a server invents
            delta = choice.delta
            if delta is not None and delta.content:
                self.add_text(delta.content)
                added += delta.content
            for call in (delta.tool_calls if delta is not None else None) or ():
                function = call.function
                self.tool_calls.add(
                    call.index,
                    call.id,
                    function.name if function is not None else None,
                    function.arguments if function is not None else None,
                )
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return added

    def add_text(self, text: str) -> None:
        self._text_bytes += utf8_size(text)
        if self._text_bytes > self._max_text_bytes:
            raise ProviderError(
                f"the endpoint sent more than {self._max_text_bytes} bytes of text in one "
                f"reply, more than its output cap allows (it may ignore max_tokens); "
                f"the reply was stopped there"
            )
        self.text.append(text)

    def to_reply(self) -> ModelReply:
        calls = self.tool_calls.calls()
        content = "".join(self.text)
        message = assistant_message(None if calls and not content else content, calls)
        return ModelReply(message, _finish_reason(self.finish_reason, calls), self.usage)


def read_chunk(streamed: StreamedReply, chunk: ChatCompletionChunk) -> str:
    # The SDK builds chunks without validating them, so a server's malformed chunk (a bare
    # number, `choices` that is not a list) surfaces here as AttributeError or TypeError.
    try:
        return streamed.add(chunk)
    except (AttributeError, TypeError) as error:
        raise ProviderError(
            f"the endpoint sent a stream chunk this client cannot read ({one_line(str(error))})"
        ) from None


class TextRelay:
    """Passes streamed text on to `on_text` once, across a cut stream and its retry.

    The retry starts the reply again: the part the cut stream already showed is not shown
    twice, and a retry that says something else starts on a new line.
    """

    def __init__(self, on_text: Callable[[str], None] | None) -> None:
        self._on_text = on_text
        self._shown = ""
        self._replaying: str | None = None  # what the cut stream showed, while repeated
        self._attempt = ""

    def new_attempt(self) -> None:
        self._replaying, self._attempt = (self._shown or None), ""

    def __call__(self, text: str) -> None:
        if not text or self._on_text is None:
            return
        if self._replaying is None:
            self._show(text)
            return
        self._attempt += text
        if self._replaying.startswith(self._attempt):
            return  # still repeating what is on screen
        caught_up = self._attempt.startswith(self._replaying)
        fresh = self._attempt[len(self._replaying) :] if caught_up else "\n" + self._attempt
        self._replaying = None
        self._show(fresh)

    def _show(self, text: str) -> None:
        assert self._on_text is not None
        self._shown += text
        self._on_text(text)


def _finish_reason(raw: str | None, calls: tuple[ToolCall, ...]) -> FinishReason:
    reason = _FINISH_REASONS.get(raw or "", "other")
    # "tool_calls" exactly when there are calls to run, whatever the server called it
    # (some send "stop" with tool calls); "length" and "content_filter" always win.
    if reason in ("stop", "tool_calls", "other") and calls:
        return "tool_calls"
    if reason == "tool_calls":
        return "stop"
    return reason


def read_usage(usage: CompletionUsage | None) -> Usage | None:
    """The counts as sent, or None (unknown) when the server did not send both of them:
    a missing count is not a count of 0. A `usage` that is not an object is unreadable."""
    if usage is None:
        return None
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    if not _is_count(prompt) or not _is_count(completion):
        return None
    total = usage.total_tokens
    total = total if _is_count(total) else prompt + completion
    return Usage(prompt, completion, total, _cached_tokens(usage))


def _cached_tokens(usage: CompletionUsage) -> int | None:
    """Prompt tokens read from the provider's prefix cache, where it reports them: OpenAI,
    vLLM and llama.cpp in `prompt_tokens_details.cached_tokens`, DeepSeek in
    `prompt_cache_hit_tokens`."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    if isinstance(cached, int) and cached >= 0:
        return cached
    hits = getattr(usage, "prompt_cache_hit_tokens", None)  # an extra field the SDK keeps
    return hits if isinstance(hits, int) and hits >= 0 else None


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_completion(completion: ChatCompletion, caps: ReplyCaps) -> ModelReply:
    """The reply in a whole (non-streamed) completion, within the same caps as a stream.
    The SDK does not validate it, so a malformed body surfaces here as AttributeError,
    TypeError or IndexError."""
    try:
        choice = completion.choices[0]
        message = choice.message
        whole = StreamedReply(caps)
        whole.add_text(message.content or "")
        for index, call in enumerate(message.tool_calls or ()):
            function = getattr(call, "function", None)  # absent from "custom" tool calls
            name, arguments = (getattr(function, key, None) for key in ("name", "arguments"))
            whole.tool_calls.add(index, call.id, name, arguments)
        whole.finish_reason = choice.finish_reason
        whole.usage = read_usage(completion.usage)
        return whole.to_reply()
    except (AttributeError, TypeError, IndexError) as error:
        raise ProviderError(
            f"the endpoint sent a reply this client cannot read ({one_line(str(error))})"
        ) from None
