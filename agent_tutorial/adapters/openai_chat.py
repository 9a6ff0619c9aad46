"""The OpenAI-compatible chat-completions adapter: it sends each request in the shape real
servers accept (`chat_wire`), streams the reply (`chat_stream` reads it) within a deadline
and byte caps checked as it arrives (`bounded_transport`), and turns every provider's error
reply into the typed errors of `core.model` (`provider_errors`), with secrets masked by the
redactor it is given.

This is the only module that calls the openai SDK.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast

import httpx2
import openai

from agent_tutorial.adapters.bounded_transport import (
    BoundedClient,
    Clock,
    CompressedReply,
    DeadlinePassed,
    ReplyBounds,
    ReplyOverLimit,
    tls_verification,
)
from agent_tutorial.adapters.chat_stream import (
    ReplyCaps,
    StreamedReply,
    TextRelay,
    read_chunk,
    read_completion,
)
from agent_tutorial.adapters.chat_wire import CapParameter, WireOptions, wire_messages
from agent_tutorial.adapters.provider_errors import (
    classify_error,
    error_class_of,
    one_line,
    provider_message,
    room_for_output,
    strings_in,
)
from agent_tutorial.core.model import (
    BadRequestError,
    IncompleteStreamError,
    ModelError,
    ModelReply,
    ModelRequest,
    PromptTooLongError,
    ProviderError,
    ReplyTimeoutError,
)
from agent_tutorial.core.redaction import TextRedaction
from agent_tutorial.core.tools import MAX_TOOL_ARGUMENT_BYTES
from agent_tutorial.core.window import ContextWindow

if TYPE_CHECKING:
    from openai.types.chat import (
        ChatCompletionChunk,
        ChatCompletionMessageParam,
        ChatCompletionToolChoiceOptionParam,
        ChatCompletionToolUnionParam,
    )

# A cut stream is retried once; a second cut is reported, not retried forever.
_STREAM_ATTEMPTS = 2

# Local servers need no key, but the SDK refuses to start without one.
_PLACEHOLDER_API_KEY = "no-key-configured"


def _too_deep(what: str) -> ProviderError:
    """A reply nested deeper than Python's JSON decoder goes: no chat completion looks like
    that, so it is the provider's error, not a crash."""
    return ProviderError(f"the endpoint sent {what} nested too deeply to read as JSON")


def _non_stream_error(response: httpx2.Response, mask: Callable[[str], str]) -> ModelError | None:
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
    body = _json_or_text(text)
    if isinstance(body, dict) and ("error" in body or body.get("object") == "error"):
        return classify_error(None, body, "", mask=mask)
    detail = one_line(mask(provider_message(body)))
    return ProviderError(
        f"the endpoint answered with {media_type}, not an event stream; check the base URL, "
        f"or set stream = false if the server cannot stream" + (f": {detail}" if detail else "")
    )


def _json_or_text(text: str) -> object:
    """An error body as JSON, or as the text it is when it is not JSON (an HTML page, or
    JSON nested too deeply to parse)."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


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
    body = _json_or_text(response.text)
    if error_class_of(response.status_code, body) is PromptTooLongError:
        response.headers["x-should-retry"] = "false"


class _HttpClient(BoundedClient, openai.DefaultHttpxClient):
    """The SDK's default HTTP client with every reply bounded (`BoundedClient`), closed when
    garbage-collected as the SDK's own is, so an adapter nobody closed does not leak its
    pooled sockets."""

    def __del__(self) -> None:
        if not self.is_closed:
            self.close()


class OpenAIChatModel:
    """A `ModelClient` for any OpenAI-compatible chat-completions endpoint.

    Every reply is streamed (unless `wire.stream` is off); HTTP retries (408/409/429/5xx and
    connection errors) are the SDK's, with its backoff; a stream cut before its finish
    reason is retried once here, and a stream that ends before its first chunk is asked
    again once without streaming, which brings back the error or reply it hid.

    Each request has one deadline, `timeout_s`, for its whole reply, keepalives or not, and
    one that passes it is not retried (the server may still be computing). A reply's text,
    each call's arguments and its bytes on the wire are capped as they arrive (`ReplyCaps`,
    from the output cap and `max_tool_argument_bytes`).

    The output cap is the session's `window`'s (`wire.max_output_tokens` within the window
    as known, read at every request); a window a server names in an error is learned into
    it, which lowers the cap from then on (and the budgets of whatever else reads it).
    Every error's text passes through `redaction`, so a key the server echoes back, or a
    token shape in its message, is never shown.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        redaction: TextRedaction,
        max_retries: int = 2,
        timeout_s: float = 600.0,
        max_tool_argument_bytes: int = MAX_TOOL_ARGUMENT_BYTES,
        wire: WireOptions = WireOptions(),  # noqa: B008 - frozen, so sharing it is safe
        clock: Clock = time.monotonic,
        window: ContextWindow | None = None,
    ) -> None:
        self.model = model
        self._base_url = base_url
        self._redaction = redaction
        self._timeout_s = timeout_s
        self._wire = wire
        self._clock = clock
        self._caps = ReplyCaps.for_output_cap(wire.max_output_tokens, max_tool_argument_bytes)
        # OpenAI's reasoning models reject `max_tokens`; once one says so, this session
        # sends the cap as `max_completion_tokens`.
        self._cap_parameter: CapParameter = "max_tokens"
        self._window = window or ContextWindow(max_output_tokens=wire.max_output_tokens)
        http_client = _HttpClient(
            bounds=ReplyBounds(timeout_s, self._caps.body_bytes),
            clock=clock,
            timeout=timeout_s,
            verify=tls_verification(),
            event_hooks={"response": [_refuse_retry_of_overflow]},
        )
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or _PLACEHOLDER_API_KEY,
            max_retries=max_retries,
            timeout=timeout_s,
            http_client=http_client,
        )

    def complete(self, request: ModelRequest) -> ModelReply:
        started = self._clock()
        cap = self._window.output_cap_tokens
        while True:  # each signal below changes what is sent, and can be raised once only
            try:
                return self._complete(self._arguments(request, cap), request.on_text)
            except _CapParameterRejected:
                self._cap_parameter = "max_completion_tokens"
            except _OutputCapTooLarge as too_large:
                # This request gets the room left; later ones stay within the named window.
                self._window.learn(too_large.window_tokens)
                cap = too_large.room_tokens
            except ReplyOverLimit as over:  # raised by the transport, inside httpx's reads
                error = self._over_limit(over, waited_s=self._clock() - started)
                raise self._masked(error) from None
            except PromptTooLongError as error:  # later requests keep within a stated window
                if error.window_tokens is not None:
                    self._window.learn(error.window_tokens)
                raise self._masked(error) from None
            except ModelError as error:  # also a reply `chat_stream` could not read
                raise self._masked(error) from None

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIChatModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _complete(
        self, arguments: _RequestArguments, on_text: Callable[[str], None] | None
    ) -> ModelReply:
        relay = TextRelay(on_text)
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

    def _stream_once(self, arguments: _RequestArguments, on_text: TextRelay) -> StreamedReply:
        streamed = StreamedReply(self._caps)
        with self._open_stream(arguments) as stream:
            refused = _non_stream_error(stream.response, self._mask)
            if refused is not None:
                raise refused
            try:
                for chunk in stream:
                    on_text(read_chunk(streamed, chunk))
            except openai.APIConnectionError:
                # A connection dropped mid-reply is a cut stream; `complete` retries it once.
                return streamed
            except json.JSONDecodeError as error:
                raise ProviderError(
                    f"the endpoint sent a stream event that is not JSON ({error})"
                ) from None
            except RecursionError:  # the SDK's json.loads of one event
                raise _too_deep("a stream event") from None
            except openai.APIError as error:  # an error event inside the stream
                raise self._error(None, error.body, error.message) from None
        return streamed

    def _whole_reply(self, arguments: _RequestArguments, on_text: TextRelay) -> ModelReply:
        completion = self._call(
            lambda: self._client.chat.completions.create(**arguments, stream=False), arguments
        )
        reply = read_completion(completion, self._caps)
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
        temperature = self._wire.temperature
        return {
            "model": self.model,
            "messages": cast("list[ChatCompletionMessageParam]", messages),
            "tools": cast("list[ChatCompletionToolUnionParam]", tools) or openai.omit,
            "tool_choice": self._tool_choice(request) if tools else openai.omit,
            "temperature": openai.omit if temperature is None else temperature,
            "max_tokens": cap if self._cap_parameter == "max_tokens" else openai.omit,
            "max_completion_tokens": (
                cap if self._cap_parameter == "max_completion_tokens" else openai.omit
            ),
        }

    def _tool_choice(
        self, request: ModelRequest
    ) -> ChatCompletionToolChoiceOptionParam | openai.Omit:
        """A named tool when the request names one (llama-cpp-python calls a tool only when
        named); else `"auto"`, OpenAI's default, which llama-cpp-python's function-calling
        format needs to show the model any tool at all."""
        if not self._wire.send_tool_choice:
            return openai.omit
        if request.tool_choice is not None:
            return {"type": "function", "function": {"name": request.tool_choice}}
        return "auto"

    def _call(self, send: Callable[[], _Sent], arguments: _RequestArguments) -> _Sent:
        """Send one request, turning the SDK's errors into typed `ModelError`s (or into a
        signal for `complete` to send it again with the output cap the server wants)."""
        try:
            return send()
        except openai.APIStatusError as error:
            self._check_output_cap(error.body, arguments)
            raise self._error(error.status_code, error.body, error.message) from None
        except openai.APIConnectionError as error:  # after the SDK's retries
            raise self._error(None, None, self._connection_detail(error)) from None
        except openai.APIResponseValidationError as error:
            raise self._error(error.status_code, error.body, error.message) from None
        except RecursionError:  # the SDK's json.loads of a whole reply
            raise _too_deep("a reply") from None

    def _check_output_cap(self, body: object, arguments: _RequestArguments) -> None:
        if self._cap_parameter == "max_tokens" and _rejects_max_tokens(body):
            raise _CapParameterRejected from None
        sent = arguments[self._cap_parameter]
        room = room_for_output(body)
        if room is None or not isinstance(sent, int):
            return
        window, left = room
        # Less room than an eighth of the window is an overflow: compacting is the cure.
        if window <= left * _LEAST_OUTPUT_SHARE and left < sent:
            raise _OutputCapTooLarge(window, left) from None

    def _connection_detail(self, error: openai.APIConnectionError) -> str:
        reason = str(error.__cause__ or "") or error.message
        return f"{self._base_url}: {reason}"

    def _over_limit(self, over: ReplyOverLimit, *, waited_s: float) -> ModelError:
        if isinstance(over, DeadlinePassed):
            return ReplyTimeoutError(
                f"{self._base_url}: no complete reply within request_timeout_s = "
                f"{self._timeout_s:g} s; gave up after {waited_s:.1f} s in all (a request "
                f"that timed out is not sent again: the server may still be working on it)"
            )
        if isinstance(over, CompressedReply):
            return ProviderError(
                f"the endpoint sent its reply compressed ({one_line(over.encoding)}) although "
                f"asked not to; replies are read uncompressed so that their size can be bounded"
            )
        return ProviderError(
            f"the endpoint's reply passed {self._caps.body_bytes} bytes, more than its output "
            f"cap allows (it may ignore max_tokens, or send a line that never ends); the reply "
            f"was stopped there"
        )

    def _error(self, status: int | None, body: object, message: str) -> ModelError:
        """The typed error, with secrets masked even if the server echoed the key back.

        Raised `from None` by the callers so that no chained SDK exception, whose text may
        hold the key, reaches a traceback.
        """
        error = classify_error(status, body, message, mask=self._mask)
        if isinstance(error, BadRequestError) and self._blames_tool_choice(body, message):
            return BadRequestError(str(error) + _TOOL_CHOICE_HINT)
        return error

    def _mask(self, text: str) -> str:
        return self._redaction.redact(text).text

    def _masked(self, error: ModelError) -> ModelError:
        """The same error, its text masked, its other fields (a stated window) kept."""
        masked = type(error)(self._mask(str(error)))
        masked.__dict__.update(error.__dict__)
        return masked

    def _blames_tool_choice(self, body: object, message: str) -> bool:
        return self._wire.send_tool_choice and bool(
            _TOOL_CHOICE.search(" ".join([*strings_in(body), message]))
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
    temperature: float | openai.Omit
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


_LEAST_OUTPUT_SHARE = 8


def _rejects_max_tokens(body: object) -> bool:
    """OpenAI's reply for a model that takes only `max_completion_tokens`: "Unsupported
    parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'
    instead." (code `unsupported_parameter`, param `max_tokens`)."""
    return bool(_MAX_TOKENS_UNSUPPORTED.search(" ".join(strings_in(body))))
