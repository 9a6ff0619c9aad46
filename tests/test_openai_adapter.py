"""The OpenAI adapter against the loopback server: streaming, tool-call assembly, finish
reasons, usage, retries, provider error shapes and cut streams, all over real HTTP."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from agent_tutorial.adapters.openai_chat import OpenAIChatModel
from agent_tutorial.core.messages import (
    assistant_message,
    system_message,
    to_wire,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.model import (
    AuthenticationError,
    BadRequestError,
    ConnectionFailedError,
    IncompleteStreamError,
    ModelError,
    ModelNotFoundError,
    ModelRequest,
    PromptTooLongError,
    ProviderError,
    RateLimitError,
    ToolSpec,
    Usage,
)
from tests.conftest import TEST_API_KEY, MakeAdapter, key_redactor
from tests.loopback import (
    LoopbackServer,
    Reply,
    cut_stream,
    delta_stream,
    error_reply,
    text_stream,
    tool_stream,
)
from tests.test_error_classification import OVERFLOW_REPLIES

MAX_RETRIES = 2
BASH_SPEC = ToolSpec(
    name="bash",
    description="Run a shell command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)


@pytest.fixture
def model(make_adapter: MakeAdapter) -> OpenAIChatModel:
    return make_adapter(max_retries=MAX_RETRIES)


def ask(text: str = "hello", **fields: Any) -> ModelRequest:
    return ModelRequest(messages=(user_message(text),), **fields)


def tool_delta(
    arguments: str, *, call_id: str | None = None, name: str | None = None, index: int | None = None
) -> dict[str, Any]:
    call: dict[str, Any] = {"function": {"arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    if index is not None:
        call["index"] = index
    return {"tool_calls": [call]}


# --- streaming text ------------------------------------------------------------------------


def test_streamed_text_reaches_on_text_piece_by_piece(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(text_stream("Hello, streaming world", pieces=3))
    pieces: list[str] = []

    reply = model.complete(ask(on_text=pieces.append))

    assert len(pieces) == 3
    assert "".join(pieces) == "Hello, streaming world"
    assert reply.message.content == "Hello, streaming world"
    assert reply.message.tool_calls == ()
    assert reply.finish_reason == "stop"


def test_empty_answer_is_empty_text_not_none(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(text_stream(""))

    reply = model.complete(ask())

    assert reply.message.content == ""
    assert reply.finish_reason == "stop"


def test_usage_is_reported(loopback: LoopbackServer, model: OpenAIChatModel) -> None:
    loopback.queue(text_stream("hi", usage=(120, 7)))

    assert model.complete(ask()).usage == Usage(120, 7, 127)


def test_usage_is_none_when_the_server_sends_none(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(delta_stream([{"role": "assistant", "content": "hi"}], usage=None))

    assert model.complete(ask()).usage is None


@pytest.mark.parametrize(
    ("wire_reason", "expected"),
    [
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("eos", "stop"),
        ("something_new", "other"),
    ],
)
def test_finish_reasons_are_normalised(
    loopback: LoopbackServer, model: OpenAIChatModel, wire_reason: str, expected: str
) -> None:
    loopback.queue(text_stream("partial answer", finish_reason=wire_reason))

    assert model.complete(ask()).finish_reason == expected


# --- request shape -------------------------------------------------------------------------


def test_request_streams_with_usage_and_omits_empty_tools(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(text_stream("ok"))

    model.complete(ask("hi there"))

    body = loopback.requests[0]
    assert body["model"] == "loopback-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body
    assert body["messages"] == [{"role": "user", "content": "hi there"}]


def test_request_sends_history_and_tools_in_wire_shape(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    history = (
        system_message("be brief"),
        user_message("list files"),
        assistant_message(None, [tool_call("call_1", "bash", '{"command": "ls"}')]),
        tool_message("a.py", "call_1"),
    )
    loopback.queue(text_stream("one file"))

    model.complete(ModelRequest(messages=history, tools=(BASH_SPEC,)))

    body = loopback.requests[0]
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {**to_wire(history[2]), "content": ""},
        to_wire(history[3]),
    ]
    assert body["tools"] == [BASH_SPEC.to_wire()]
    assert body["tool_choice"] == "auto"


def test_the_api_key_is_sent_as_a_bearer_token(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(text_stream("ok"))

    model.complete(ask())

    assert loopback.headers[0]["authorization"] == f"Bearer {TEST_API_KEY}"


# --- tool calls ----------------------------------------------------------------------------


def test_tool_call_arguments_split_across_chunks_are_joined(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    arguments = {"command": "grep -rn 'def main' src/ | head -20"}
    loopback.queue(tool_stream([("call_a", "bash", arguments)], split=5))

    reply = model.complete(ask(tools=(BASH_SPEC,)))

    assert reply.message.tool_calls == (
        tool_call("call_a", "bash", '{"command": "grep -rn \'def main\' src/ | head -20"}'),
    )
    assert reply.message.content is None
    assert reply.finish_reason == "tool_calls"


def test_two_calls_in_one_message_keep_their_order_and_arguments(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(
        tool_stream(
            [("call_a", "glob", {"pattern": "**/*.py"}), ("call_b", "grep", {"pattern": "TODO"})],
            content="Looking around.",
        )
    )
    pieces: list[str] = []

    reply = model.complete(ask(on_text=pieces.append))

    assert reply.message.tool_calls == (
        tool_call("call_a", "glob", '{"pattern": "**/*.py"}'),
        tool_call("call_b", "grep", '{"pattern": "TODO"}'),
    )
    assert reply.message.content == "Looking around."
    assert pieces == ["Looking around."]


def test_calls_without_index_are_told_apart_by_id(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(
        delta_stream(
            [
                tool_delta('{"pattern"', call_id="call_a", name="glob"),
                tool_delta(': "*.md"}'),
                tool_delta('{"path": ', call_id="call_b", name="read_file"),
                tool_delta('"README.md"}'),
            ],
            finish_reason="tool_calls",
        )
    )

    reply = model.complete(ask())

    assert reply.message.tool_calls == (
        tool_call("call_a", "glob", '{"pattern": "*.md"}'),
        tool_call("call_b", "read_file", '{"path": "README.md"}'),
    )


def test_calls_that_all_claim_index_zero_are_told_apart_by_id(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(
        delta_stream(
            [
                tool_delta('{"a": ', call_id="call_a", name="first", index=0),
                tool_delta("1}", index=0),
                tool_delta('{"b": ', call_id="call_b", name="second", index=0),
                tool_delta("2}", index=0),
            ],
            finish_reason="tool_calls",
        )
    )

    reply = model.complete(ask())

    assert reply.message.tool_calls == (
        tool_call("call_a", "first", '{"a": 1}'),
        tool_call("call_b", "second", '{"b": 2}'),
    )


def test_a_repeated_id_and_name_continue_the_same_call(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(
        delta_stream(
            [
                tool_delta('{"command": ', call_id="call_a", name="bash", index=0),
                tool_delta('"pwd"}', call_id="call_a", name="bash", index=0),
            ],
            finish_reason="tool_calls",
        )
    )

    reply = model.complete(ask())

    assert reply.message.tool_calls == (tool_call("call_a", "bash", '{"command": "pwd"}'),)


def test_calls_without_ids_get_distinct_ids_and_empty_arguments_become_an_object(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(
        delta_stream(
            [tool_delta("", name="list_todos", index=0), tool_delta("", name="pwd", index=1)],
            finish_reason="tool_calls",
        )
    )

    calls = model.complete(ask()).message.tool_calls

    assert [(call.name, call.arguments) for call in calls] == [("list_todos", "{}"), ("pwd", "{}")]
    assert all(call.id for call in calls)
    assert calls[0].id != calls[1].id


def test_tool_calls_with_finish_reason_stop_count_as_tool_calls(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(
        delta_stream(
            [tool_delta('{"command": "ls"}', call_id="call_a", name="bash", index=0)],
            finish_reason="stop",
        )
    )

    assert model.complete(ask()).finish_reason == "tool_calls"


# --- retries and errors --------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
def test_retryable_statuses_are_retried_until_success(
    loopback: LoopbackServer, model: OpenAIChatModel, status: int
) -> None:
    loopback.queue(
        error_reply(status, {"error": {"message": "busy, try later"}}), text_stream("ok")
    )

    reply = model.complete(ask())

    assert reply.message.content == "ok"
    assert len(loopback.requests) == 2


def test_a_connection_dropped_before_the_reply_is_retried(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    def drop_connection(body: dict[str, Any]) -> Reply:
        raise ConnectionAbortedError("loopback drops this connection on purpose")

    loopback.queue(drop_connection, text_stream("ok"))

    assert model.complete(ask()).message.content == "ok"
    assert len(loopback.requests) == 2


def test_persistent_server_errors_become_provider_error_after_retries(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(*[error_reply(503, {"error": {"message": "overloaded"}})] * (MAX_RETRIES + 1))

    with pytest.raises(ProviderError, match=r"\(503\): overloaded"):
        model.complete(ask())
    assert len(loopback.requests) == MAX_RETRIES + 1


def test_rate_limit_mentioning_tokens_is_a_rate_limit_after_retries(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    body = {
        "error": {
            "message": "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, "
            "Used 29000, Requested 4000. Please try again in 2s.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    loopback.queue(*[error_reply(429, body)] * (MAX_RETRIES + 1))

    with pytest.raises(RateLimitError):
        model.complete(ask())
    assert len(loopback.requests) == MAX_RETRIES + 1


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, ModelNotFoundError),
    ],
)
def test_client_errors_are_never_retried(
    loopback: LoopbackServer, model: OpenAIChatModel, status: int, error_type: type[ModelError]
) -> None:
    loopback.queue(error_reply(status, {"error": {"message": "no"}}), text_stream("never sent"))

    with pytest.raises(error_type):
        model.complete(ask())
    assert len(loopback.requests) == 1


def test_an_error_body_nested_too_deeply_to_parse_is_reported_once_not_retried(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    nested = Reply(status=400, raw_body=b"[" * 100_000 + b"]" * 100_000)
    loopback.queue(nested, text_stream("never sent"))

    with pytest.raises(BadRequestError):
        model.complete(ask())
    assert len(loopback.requests) == 1


def test_authentication_error_is_one_readable_line(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(error_reply(401, {"error": {"message": "Invalid\nAPI key", "code": "bad"}}))

    with pytest.raises(AuthenticationError) as caught:
        model.complete(ask())

    assert str(caught.value) == "the endpoint rejected the API key (401): Invalid API key"


def test_the_api_key_echoed_by_the_server_is_redacted(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(error_reply(401, {"error": {"message": f"Incorrect API key: {TEST_API_KEY}"}}))

    with pytest.raises(AuthenticationError) as caught:
        model.complete(ask())

    assert TEST_API_KEY not in str(caught.value)
    assert "[REDACTED:OPENAI_API_KEY]" in str(caught.value)
    assert caught.value.__suppress_context__


def test_an_error_event_inside_the_stream_is_classified(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    overflow = {"message": "This model's maximum context length is 4096 tokens.", "code": 400}
    loopback.queue(Reply(sse_events=[{"error": overflow}]))

    with pytest.raises(PromptTooLongError, match=r"\(400\)"):
        model.complete(ask())


def test_an_unreachable_endpoint_is_a_connection_failure() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = f"http://127.0.0.1:{port}/v1"

    with (
        OpenAIChatModel(
            base_url=unreachable,
            api_key="k",
            model="m",
            redaction=key_redactor("k"),
            max_retries=0,
        ) as client,
        pytest.raises(ConnectionFailedError, match="could not reach the endpoint") as caught,
    ):
        client.complete(ask())
    assert unreachable in str(caught.value)


# --- overflow: every provider shape, sent exactly once ---------------------------------------


@pytest.mark.parametrize("provider", sorted(OVERFLOW_REPLIES))
def test_every_provider_overflow_is_prompt_too_long_and_sent_once(
    loopback: LoopbackServer, model: OpenAIChatModel, provider: str
) -> None:
    status, body = OVERFLOW_REPLIES[provider]
    loopback.queue(error_reply(status, body), text_stream("must not be reached"))

    with pytest.raises(PromptTooLongError) as caught:
        model.complete(ask())

    assert len(loopback.requests) == 1
    assert f"({status})" in str(caught.value)
    assert "\n" not in str(caught.value)


# --- cut streams ---------------------------------------------------------------------------


def test_a_cut_stream_is_retried_once_and_then_succeeds(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(cut_stream("half an ans"), text_stream("a whole answer"))

    reply = model.complete(ask())

    assert reply.message.content == "a whole answer"
    assert reply.finish_reason == "stop"
    assert len(loopback.requests) == 2


def test_a_stream_cut_twice_is_an_incomplete_stream_error(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    loopback.queue(cut_stream(), cut_stream(), text_stream("must not be reached"))

    with pytest.raises(IncompleteStreamError, match="ended before the reply was finished"):
        model.complete(ask())
    assert len(loopback.requests) == 2


def test_a_stream_that_ends_with_done_but_no_finish_reason_is_cut(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    no_finish = delta_stream([{"content": "almost"}], finish_reason=None)
    loopback.queue(no_finish, no_finish)

    with pytest.raises(IncompleteStreamError):
        model.complete(ask())
    assert len(loopback.requests) == 2
