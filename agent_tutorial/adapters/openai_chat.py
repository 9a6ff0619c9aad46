"""The OpenAI-compatible chat-completions adapter: it streams each reply, assembles tool calls
from their deltas, and turns every provider's error reply into the typed errors of `core.model`.

This is the only module that imports the openai SDK.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, TypeGuard, TypeVar, cast

import httpx2
import openai

from agent_tutorial.adapters.chat_wire import CapParameter, WireOptions, wire_messages
from agent_tutorial.core.messages import ToolCall, assistant_message
from agent_tutorial.core.model import (
    AuthenticationError,
    BadRequestError,
    ConnectionFailedError,
    FinishReason,
    IncompleteStreamError,
    ModelError,
    ModelNotFoundError,
    ModelReply,
    ModelRequest,
    PromptTooLongError,
    ProviderError,
    RateLimitError,
    Usage,
    clamp_output_tokens,
)

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionChunk,
        ChatCompletionMessageParam,
        ChatCompletionToolChoiceOptionParam,
        ChatCompletionToolUnionParam,
    )
    from openai.types.completion_usage import CompletionUsage

# A cut stream is retried once; a second cut is reported, not retried forever.
_STREAM_ATTEMPTS = 2

# Local servers need no key, but the SDK refuses to start without one.
_PLACEHOLDER_API_KEY = "no-key-configured"

# Shorter "keys" are placeholders such as "EMPTY"; redacting them would mangle ordinary words.
_MIN_REDACTED_KEY_LENGTH = 8
_REDACTED = "[redacted]"

_DETAIL_LIMIT = 300

# ---------------------------------------------------------------------------------------------
# Error classification: a pure function from (status, body, message) to a typed error.
# ---------------------------------------------------------------------------------------------

_RATE_LIMIT_MARKERS = re.compile(
    r"rate[ _-]?limit|too many requests|tokens per|requests per|per minute|per min\b"
    r"|per day|\b[tr]p[md]\b|quota",
    re.IGNORECASE,
)

# One entry per known provider wording; the comment names who says it.
_OVERFLOW_MARKERS = re.compile(
    "|".join(
        (
            r"context_length_exceeded",  # OpenAI, Azure (error code)
            r"maximum context length",  # OpenAI, Azure, DeepSeek, OpenRouter, vLLM, Mistral
            r"exceeds? the context window",  # OpenAI
            r"exceed_context_size_error",  # llama.cpp (error type)
            r"exceeds? the available context size",  # llama.cpp
            r"requested tokens \(\d+\) exceed context window",  # llama-cpp-python, unformatted
            r"prompt is too long",  # Anthropic-compatible gateways
            r"range of input length",  # DashScope (Qwen)
            r"input token count.{0,40}exceeds",  # Gemini's OpenAI-compatible endpoint
            r"tokens \+ `?max_new_tokens`? must be",  # Hugging Face TGI
            r"context length of only",  # LM Studio
        )
    ),
    re.IGNORECASE,
)

# Key-shaped tokens some servers echo back; masked even when we do not know the key.
_KEY_LIKE = re.compile(r"\b((?:sk|pk|rk)-)[A-Za-z0-9_\-]{8,}|(Bearer\s+)\S+", re.IGNORECASE)
_SDK_PREFIX = re.compile(r"^Error code: \d+( - )?")
_HTML_TAG = re.compile(r"<[^>]+>")

_EXPLANATIONS: dict[type[ModelError], str] = {
    PromptTooLongError: "the request does not fit the model's context window",
    RateLimitError: "the endpoint is rate limiting requests",
    ModelNotFoundError: "the endpoint does not know this model or URL path",
    BadRequestError: "the endpoint rejected the request",
    ProviderError: "the endpoint failed",
    ConnectionFailedError: "could not reach the endpoint",
}


def classify_error(status: int | None, body: object, message: str) -> ModelError:
    """Map one provider error reply to a typed `ModelError` whose `str()` is one line.

    `status` is the HTTP status (None for a connection failure or an error event inside a
    stream), `body` the decoded JSON body (with or without an `error` wrapper) or its text,
    `message` the SDK's own message.
    """
    if status is None:
        status = _status_in_body(body)
    searchable = " ".join([*_strings_in(body), message])
    error_class = _error_class(status, searchable, body)
    explanation = _explain(error_class, status)
    where = f" ({status})" if status is not None else ""
    detail = _one_line(_provider_message(body) or _SDK_PREFIX.sub("", message))
    return error_class(f"{explanation}{where}: {detail}" if detail else f"{explanation}{where}")


def _error_class(status: int | None, searchable: str, body: object) -> type[ModelError]:
    if status is None and body is None:
        return ConnectionFailedError  # nothing came back; the message is ours, not the server's
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return ModelNotFoundError
    # Rate limits come first: "Request too large ... tokens per min" is a rate limit that
    # mentions tokens, and treating it as an overflow would compact for nothing.
    if _RATE_LIMIT_MARKERS.search(searchable):
        return RateLimitError
    # A bare 413 means the request body is too big; shrinking the history is the cure.
    if status == 413 or _OVERFLOW_MARKERS.search(searchable):
        return PromptTooLongError
    if status == 429:
        return RateLimitError
    if status is not None and 400 <= status < 500:
        return BadRequestError
    return ProviderError


def _explain(error_class: type[ModelError], status: int | None) -> str:
    if error_class is AuthenticationError:
        if status == 403:
            return "the endpoint refused access with this API key"
        return "the endpoint rejected the API key"
    if error_class is ProviderError and status is None:
        return "the endpoint reported an error"
    return _EXPLANATIONS[error_class]


def _error_object(body: object) -> object:
    """The error itself, whether the body wraps it in `{"error": ...}` or not (vLLM)."""
    if isinstance(body, dict) and "error" in body:
        return body["error"]
    return body


def _status_in_body(body: object) -> int | None:
    """An HTTP-like status some servers put in an error event's `code` field."""
    error = _error_object(body)
    code = error.get("code") if isinstance(error, dict) else None
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    return None


def _provider_message(body: object) -> str:
    error = _error_object(body)
    if isinstance(error, str):
        return _HTML_TAG.sub(" ", error)
    if isinstance(error, dict):
        for key in ("message", "detail", "msg"):
            value = error.get(key)
            if isinstance(value, str) and value:
                return value
    return ""


def _strings_in(value: object, depth: int = 0) -> list[str]:
    """Every string in a decoded body; nested ones matter (OpenRouter embeds the upstream
    provider's raw error under `metadata.raw`)."""
    if isinstance(value, str):
        return [value]
    if depth > 4:
        return []
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings_in(item, depth + 1)]
    if isinstance(value, list):
        return [text for item in value for text in _strings_in(item, depth + 1)]
    return []


def _one_line(text: str) -> str:
    text = _KEY_LIKE.sub(lambda match: (match.group(1) or match.group(2)) + _REDACTED, text)
    text = " ".join(text.split())
    if len(text) > _DETAIL_LIMIT:
        return text[: _DETAIL_LIMIT - 1] + "…"
    return text


def _redact(text: str, api_key: str) -> str:
    if len(api_key) < _MIN_REDACTED_KEY_LENGTH:
        return text
    return text.replace(api_key, _REDACTED)


# ---------------------------------------------------------------------------------------------
# Stream assembly.
# ---------------------------------------------------------------------------------------------

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


@dataclass
class _PartialCall:
    id: str
    index: int | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def add_name(self, name: str) -> None:
        # Some servers repeat the whole name in every delta, others split it.
        if name != self.name:
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
        call_id = self.id or f"call_{uuid.uuid4().hex[:24]}"
        return ToolCall(id=call_id, name=self.name, arguments=arguments or "{}")


class _ToolCallAssembler:
    """Builds whole tool calls from streamed deltas. A new call starts when the `index` or
    a non-empty `id` changes: some servers send every call at index 0 (told apart by id),
    others give two calls the same id (told apart by index; the loop renames them later).
    A delta that names an earlier call's index again, with no other id, goes back to it."""

    def __init__(self) -> None:
        self._calls: list[_PartialCall] = []
        self._by_index: dict[int, _PartialCall] = {}

    def add(
        self, index: int | None, call_id: str | None, name: str | None, arguments: object
    ) -> None:
        call = self._target(index, call_id)
        if name:
            call.add_name(name)
        if isinstance(arguments, dict | list):
            # llama.cpp and TGI have sent the arguments as a JSON object, not its text.
            arguments = json.dumps(arguments)
        if arguments:
            call.arguments.append(cast(str, arguments))

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


@dataclass
class _StreamedReply:
    """What one stream delivered so far; `finish_reason` stays None if the stream was cut."""

    text: list[str] = field(default_factory=list)
    tool_calls: _ToolCallAssembler = field(default_factory=_ToolCallAssembler)
    finish_reason: str | None = None
    usage: Usage | None = None
    chunks: int = 0

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take in one chunk; return the text it adds (empty if none)."""
        self.chunks += 1
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage) or self.usage
        added = ""
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue  # we ask for one choice; ignore anything else a server invents
            delta = choice.delta
            if delta is not None and delta.content:
                self.text.append(delta.content)
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

    def to_reply(self) -> ModelReply:
        calls = self.tool_calls.calls()
        content = "".join(self.text)
        message = assistant_message(None if calls and not content else content, calls)
        return ModelReply(message, _finish_reason(self.finish_reason, calls), self.usage)


def _read_chunk(streamed: _StreamedReply, chunk: ChatCompletionChunk) -> str:
    # The SDK builds chunks without validating them, so a server's malformed chunk (a bare
    # number, `choices` that is not a list) surfaces here as AttributeError or TypeError.
    try:
        return streamed.add(chunk)
    except (AttributeError, TypeError) as error:
        raise ProviderError(
            f"the endpoint sent a stream chunk this client cannot read ({_one_line(str(error))})"
        ) from None


class _TextRelay:
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


def _non_stream_error(response: httpx2.Response) -> ModelError | None:
    """The error for a 200 reply that is JSON or HTML instead of an event stream: a login
    page from a proxy, an error object, or a server that ignores `stream`. It is reported
    as it is, not taken for a cut stream and sent again."""
    media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    is_json = media_type == "application/json" or media_type.endswith("+json")
    if not is_json and media_type != "text/html":
        return None
    try:
        text = response.read().decode("utf-8", errors="replace")
    except httpx2.RequestError:  # the body broke off too; the media type is reason enough
        text = ""
    try:
        body: object = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        body = text
    if isinstance(body, dict) and ("error" in body or body.get("object") == "error"):
        return classify_error(None, body, "")
    detail = _one_line(_provider_message(body))
    return ProviderError(
        f"the endpoint answered with {media_type}, not an event stream; check the base URL, "
        f"or set stream = false if the server cannot stream" + (f": {detail}" if detail else "")
    )


def _finish_reason(raw: str | None, calls: tuple[ToolCall, ...]) -> FinishReason:
    reason = _FINISH_REASONS.get(raw or "", "other")
    # "tool_calls" exactly when there are calls to run, whatever the server called it
    # (some send "stop" with tool calls); "length" and "content_filter" always win.
    if reason in ("stop", "tool_calls", "other") and calls:
        return "tool_calls"
    if reason == "tool_calls":
        return "stop"
    return reason


def _usage(usage: CompletionUsage | None) -> Usage | None:
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


# ---------------------------------------------------------------------------------------------
# The client.
# ---------------------------------------------------------------------------------------------


def _refuse_retry_of_overflow(response: httpx2.Response) -> None:
    """Response hook: never send the same overflowing request twice.

    Some gateways report an overflow with 413, 429 or 5xx, which the SDK would retry; the
    `x-should-retry: false` header is the SDK's documented way to say "do not".
    """
    if response.status_code < 400:
        return
    response.read()
    try:
        body: object = json.loads(response.text)
    except json.JSONDecodeError:
        body = response.text
    if isinstance(classify_error(response.status_code, body, ""), PromptTooLongError):
        response.headers["x-should-retry"] = "false"


class _HttpClient(openai.DefaultHttpxClient):
    """The SDK's default HTTP client, closed when garbage-collected as the SDK's own is, so an
    adapter nobody closed does not leak its pooled sockets."""

    def __del__(self) -> None:
        if not self.is_closed:
            self.close()


class OpenAIChatModel:
    """A `ModelClient` for any OpenAI-compatible chat-completions endpoint.

    Every reply is streamed (unless `wire.stream` is off); HTTP retries (408/409/429/5xx and
    connection errors) are the SDK's, with its backoff; a stream cut before its finish
    reason is retried once here, and a stream that ends before its first chunk is asked
    again once without streaming, which brings back the error or reply it hid.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        max_retries: int = 2,
        timeout_s: float = 600.0,
        wire: WireOptions = WireOptions(),  # noqa: B008 - frozen, so sharing it is safe
    ) -> None:
        self.model = model
        self._base_url = base_url
        self._api_key = api_key
        self._timeout_s = timeout_s
        self._wire = wire
        # OpenAI's reasoning models reject `max_tokens`; once one says so, this session
        # sends the cap as `max_completion_tokens`.
        self._cap_parameter: CapParameter = "max_tokens"
        # A window a server named in an error; the cap stays within a quarter of it.
        self._window_tokens: int | None = None
        http_client = _HttpClient(
            timeout=timeout_s, event_hooks={"response": [_refuse_retry_of_overflow]}
        )
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or _PLACEHOLDER_API_KEY,
            max_retries=max_retries,
            timeout=timeout_s,
            http_client=http_client,
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        cap = clamp_output_tokens(self._wire.max_output_tokens, self._window_tokens)
        while True:  # each signal below changes what is sent, and can be raised once only
            try:
                return self._complete(self._arguments(request, cap), request.on_text)
            except _CapParameterRejected:
                self._cap_parameter = "max_completion_tokens"
            except _OutputCapTooLarge as too_large:
                self._window_tokens = too_large.window_tokens
                cap = too_large.room_tokens

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _complete(
        self, arguments: _RequestArguments, on_text: Callable[[str], None] | None
    ) -> ModelReply:
        relay = _TextRelay(on_text)
        if not self._wire.stream:
            return self._whole_reply(arguments, relay)
        for _ in range(_STREAM_ATTEMPTS):
            relay.new_attempt()
            streamed = self._stream_once(arguments, relay)
            if streamed.finish_reason is not None:
                return streamed.to_reply()
            if streamed.chunks == 0:
                # Some servers (llama-cpp-python on a context overflow or a tool choice it
                # cannot stream) answer 200 and close the stream without one event.
                relay.new_attempt()
                return self._whole_reply(arguments, relay)
        raise IncompleteStreamError(
            f"the endpoint's reply stream ended before the reply was finished, "
            f"{_STREAM_ATTEMPTS} times in a row (no finish reason); the server may have "
            f"crashed or a proxy cut the connection"
        )

    def _stream_once(self, arguments: _RequestArguments, on_text: _TextRelay) -> _StreamedReply:
        streamed = _StreamedReply()
        with self._open_stream(arguments) as stream:
            refused = _non_stream_error(stream.response)
            if refused is not None:
                raise type(refused)(_redact(str(refused), self._api_key))
            try:
                for chunk in stream:
                    on_text(_read_chunk(streamed, chunk))
            except openai.APIConnectionError:
                # A connection dropped mid-reply is a cut stream; `complete` retries it once.
                return streamed
            except json.JSONDecodeError as error:
                raise ProviderError(
                    f"the endpoint sent a stream event that is not JSON ({error})"
                ) from None
            except openai.APIError as error:  # an error event inside the stream
                raise self._error(None, error.body, error.message) from None
        return streamed

    def _whole_reply(self, arguments: _RequestArguments, on_text: _TextRelay) -> ModelReply:
        completion = self._call(
            lambda: self._client.chat.completions.create(**arguments, stream=False), arguments
        )
        reply = _read_completion(completion)
        on_text(reply.message.content or "")
        return reply

    def _open_stream(self, arguments: _RequestArguments) -> openai.Stream[ChatCompletionChunk]:
        return self._call(
            lambda: self._client.chat.completions.create(
                **arguments, stream=True, stream_options={"include_usage": True}
            ),
            arguments,
        )

    def _arguments(self, request: ModelRequest, cap: int) -> _RequestArguments:
        """Everything but the streaming fields, in the shape the servers accept."""
        messages = wire_messages(request.messages, merge_reminders=self._wire.merge_reminders)
        tools = [tool.to_wire() for tool in request.tools]
        # `tool_choice: "auto"` is OpenAI's default, but llama-cpp-python's function-calling
        # format does not show the model any tool without it.
        choice = "auto" if tools and self._wire.send_tool_choice else openai.omit
        return {
            "model": self.model,
            "messages": cast("list[ChatCompletionMessageParam]", messages),
            "tools": cast("list[ChatCompletionToolUnionParam]", tools) or openai.omit,
            "tool_choice": cast("ChatCompletionToolChoiceOptionParam", choice),
            "max_tokens": cap if self._cap_parameter == "max_tokens" else openai.omit,
            "max_completion_tokens": (
                cap if self._cap_parameter == "max_completion_tokens" else openai.omit
            ),
        }

    def _call(self, send: Callable[[], _Sent], arguments: _RequestArguments) -> _Sent:
        """Send one request, turning the SDK's errors into typed `ModelError`s (or into a
        signal for `complete` to send it again with the output cap the server wants)."""
        try:
            return send()
        except openai.APIStatusError as error:
            self._check_output_cap(error.body, arguments)
            raise self._error(error.status_code, error.body, error.message) from None
        except openai.APIConnectionError as error:  # includes timeouts, after the SDK's retries
            raise self._error(None, None, self._connection_detail(error)) from None
        except openai.APIResponseValidationError as error:
            raise self._error(error.status_code, error.body, error.message) from None

    def _check_output_cap(self, body: object, arguments: _RequestArguments) -> None:
        if self._cap_parameter == "max_tokens" and _rejects_max_tokens(body):
            raise _CapParameterRejected from None
        sent = arguments[self._cap_parameter]
        room = _room_for_output(body)
        if room is None or not isinstance(sent, int):
            return
        window, left = room
        # Less room than an eighth of the window is an overflow: compacting is the cure.
        if window <= left * _LEAST_OUTPUT_SHARE and left < sent:
            raise _OutputCapTooLarge(window, left) from None

    def _connection_detail(self, error: openai.APIConnectionError) -> str:
        if isinstance(error, openai.APITimeoutError):
            return f"{self._base_url}: no answer within {self._timeout_s:g} s"
        reason = str(error.__cause__ or "") or error.message
        return f"{self._base_url}: {reason}"

    def _error(self, status: int | None, body: object, message: str) -> ModelError:
        """The typed error, with the API key removed even if the server echoed it back.

        Raised `from None` by the callers so that no chained SDK exception, whose text may
        hold the key, reaches a traceback.
        """
        error = classify_error(status, body, message)
        text = _redact(str(error), self._api_key)
        if isinstance(error, BadRequestError) and self._blames_tool_choice(body, message):
            text += _TOOL_CHOICE_HINT
        return type(error)(text)

    def _blames_tool_choice(self, body: object, message: str) -> bool:
        return self._wire.send_tool_choice and bool(
            _TOOL_CHOICE.search(" ".join([*_strings_in(body), message]))
        )


class _CapParameterRejected(Exception):
    """The server wants the output cap as `max_completion_tokens`; never leaves the adapter."""


class _OutputCapTooLarge(Exception):
    """The prompt fits the window but prompt plus cap does not (vLLM refuses that as if the
    prompt were too long); the request goes again with the room that is left."""

    def __init__(self, window_tokens: int, room_tokens: int) -> None:
        super().__init__(window_tokens, room_tokens)
        self.window_tokens = window_tokens
        self.room_tokens = room_tokens


_Sent = TypeVar("_Sent")


class _RequestArguments(TypedDict):
    model: str
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionToolUnionParam] | openai.Omit
    tool_choice: ChatCompletionToolChoiceOptionParam | openai.Omit
    max_tokens: int | openai.Omit
    max_completion_tokens: int | openai.Omit


_TOOL_CHOICE = re.compile(r"tool[_ ]choice", re.IGNORECASE)
_TOOL_CHOICE_HINT = (
    "; if this server does not accept tool_choice, set send_tool_choice = false "
    "(AGENT_TUTORIAL_SEND_TOOL_CHOICE=false)"
)
# Not vLLM's "'max_tokens' or 'max_completion_tokens' is too large", which is an overflow.
_MAX_TOKENS_UNSUPPORTED = re.compile(
    r"'?max_tokens'? is not supported|use '?max_completion_tokens'? instead", re.IGNORECASE
)


# vLLM's two wordings for prompt + cap over the window; the prompt's own count is in both.
_PROMPT_AND_CAP_TOO_LONG = (
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens and your request has "
        r"(?P<prompt>\d+) input tokens"
    ),
    re.compile(
        r"maximum context length is (?P<window>\d+) tokens\. However, you requested \d+ "
        r"tokens \((?P<prompt>\d+) in the messages, \d+ in the completion\)"
    ),
)


_LEAST_OUTPUT_SHARE = 8


def _room_for_output(body: object) -> tuple[int, int] | None:
    """(window, tokens left for the reply) from an error that says both, else None."""
    text = " ".join(_strings_in(body))
    for pattern in _PROMPT_AND_CAP_TOO_LONG:
        match = pattern.search(text)
        if match is not None:
            window = int(match.group("window"))
            return window, window - int(match.group("prompt"))
    return None


def _rejects_max_tokens(body: object) -> bool:
    """OpenAI's reply for a model that takes only `max_completion_tokens`: "Unsupported
    parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
    instead." (code `unsupported_parameter`, param `max_tokens`)."""
    return bool(_MAX_TOKENS_UNSUPPORTED.search(" ".join(_strings_in(body))))


def _read_completion(completion: ChatCompletion) -> ModelReply:
    """The reply in a whole (non-streamed) completion. The SDK does not validate it, so a
    malformed body surfaces here as AttributeError, TypeError or IndexError."""
    try:
        choice = completion.choices[0]
        message = choice.message
        calls = _ToolCallAssembler()
        for index, call in enumerate(message.tool_calls or ()):
            function = getattr(call, "function", None)  # absent from "custom" tool calls
            name, arguments = (getattr(function, key, None) for key in ("name", "arguments"))
            calls.add(index, call.id, name, arguments)
        streamed = _StreamedReply(
            text=[message.content or ""],
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            usage=_usage(completion.usage),
        )
        return streamed.to_reply()
    except (AttributeError, TypeError, IndexError) as error:
        raise ProviderError(
            f"the endpoint sent a reply this client cannot read ({_one_line(str(error))})"
        ) from None
