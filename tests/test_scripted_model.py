"""Specification of `ScriptedModel`, the strict fake model tests and docs rely on."""

from __future__ import annotations

import pytest

from agent_tutorial.core.messages import assistant_message, tool_call, user_message
from agent_tutorial.core.model import (
    ModelReply,
    ModelRequest,
    RateLimitError,
    make_request,
)
from agent_tutorial.testing import ScriptedModel, UnexpectedModelCall, text_reply, tool_reply


def ask(model: ScriptedModel, text: str = "hi") -> ModelReply:
    return model.complete(make_request([user_message(text)]))


def test_replies_come_back_in_script_order() -> None:
    model = ScriptedModel([text_reply("one"), text_reply("two")])

    assert [ask(model).message.content, ask(model).message.content] == ["one", "two"]


def test_every_request_is_recorded() -> None:
    model = ScriptedModel([text_reply("one"), text_reply("two")])

    ask(model, "first")
    ask(model, "second")

    assert [request.messages for request in model.requests] == [
        (user_message("first"),),
        (user_message("second"),),
    ]


def test_call_past_the_script_raises_unexpected_model_call() -> None:
    model = ScriptedModel([text_reply("one")])
    ask(model)

    with pytest.raises(UnexpectedModelCall, match="call 2 but only 1 replies"):
        ask(model)


def test_unexpected_model_call_fails_a_test_like_an_assertion() -> None:
    assert issubclass(UnexpectedModelCall, AssertionError)


def test_assert_exhausted_fails_while_replies_are_left() -> None:
    model = ScriptedModel([text_reply("one"), text_reply("two")])
    ask(model)

    with pytest.raises(AssertionError, match="1 scripted replies were never requested"):
        model.assert_exhausted()


def test_assert_exhausted_passes_once_every_reply_was_used() -> None:
    model = ScriptedModel([text_reply("one")])
    ask(model)

    model.assert_exhausted()


def test_scripted_model_error_is_raised() -> None:
    model = ScriptedModel([RateLimitError("slow down")])

    with pytest.raises(RateLimitError, match="slow down"):
        ask(model)

    assert len(model.requests) == 1


def test_callable_reply_receives_the_request() -> None:
    def reply_with_length(request: ModelRequest) -> ModelReply:
        return text_reply(f"{len(request.messages)} messages")

    model = ScriptedModel([reply_with_length])

    assert ask(model).message.content == "1 messages"


def test_on_text_receives_the_reply_content() -> None:
    streamed: list[str] = []
    model = ScriptedModel([text_reply("Hello.")])

    model.complete(make_request([user_message("hi")], on_text=streamed.append))

    assert streamed == ["Hello."]


def test_on_text_is_not_called_for_a_reply_without_text() -> None:
    streamed: list[str] = []
    model = ScriptedModel([tool_reply(tool_call("c1", "bash", "{}"))])

    model.complete(make_request([user_message("hi")], on_text=streamed.append))

    assert streamed == []


def test_text_reply_is_a_finished_answer() -> None:
    assert text_reply("done") == ModelReply(assistant_message("done"), "stop")


def test_tool_reply_carries_its_calls_and_optional_text() -> None:
    call = tool_call("c1", "bash", '{"command": "ls"}')

    assert tool_reply(call, content="Listing.") == ModelReply(
        assistant_message("Listing.", [call]), "tool_calls"
    )
