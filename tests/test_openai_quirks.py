"""The adapter against the loopback server with real servers' quirks switched on, through the
real openai SDK: tool_choice, null content, errors hidden in empty streams, the output cap,
one leading system message, missing usage and streamed tool-call ids."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_tutorial.adapters.chat_wire import WireOptions
from agent_tutorial.adapters.openai_chat import OpenAIChatModel
from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.model import (
    BadRequestError,
    ModelRequest,
    PromptTooLongError,
    ProviderError,
    ToolSpec,
)
from tests.conftest import MakeAdapter
from tests.loopback import (
    LoopbackServer,
    cut_stream,
    empty_stream,
    error_reply,
    text_stream,
    tool_stream,
)
from tests.loopback_quirks import LLAMA_CPP_PYTHON, TOOLS_IGNORED_ANSWER, Quirks
from tests.test_error_classification import OVERFLOW_REPLIES

BASH = ToolSpec(
    name="bash",
    description="Run a shell command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}},
)
LS_CALL = tool_call("call_1", "bash", '{"command": "ls"}')
AFTER_A_TOOL_ROUND = (
    system_message("You are an agent."),
    user_message("list files"),
    assistant_message(None, [LS_CALL]),
    tool_message("a.py", "call_1"),
    system_message("Reminder: plan"),
)

MakeModel = Callable[..., OpenAIChatModel]


@pytest.fixture
def make_model(make_adapter: MakeAdapter) -> MakeModel:
    """An adapter for the loopback server with these wire options (no SDK retries)."""
    return lambda **options: make_adapter(wire=WireOptions(**options))


def ask(*messages: Any, tools: tuple[ToolSpec, ...] = (BASH,), **fields: Any) -> ModelRequest:
    return ModelRequest(messages=messages or (user_message("hello"),), tools=tools, **fields)


# --- tool_choice -----------------------------------------------------------------------------


def test_tools_go_out_with_tool_choice_auto(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(text_stream("ok"))

    make_model().complete(ask())

    assert loopback.requests[0]["tool_choice"] == "auto"


def test_no_tool_choice_without_tools(loopback: LoopbackServer, make_model: MakeModel) -> None:
    loopback.queue(text_stream("ok"))

    make_model().complete(ask(tools=()))

    assert "tool_choice" not in loopback.requests[0]
    assert "tools" not in loopback.requests[0]


def test_the_setting_turns_tool_choice_off(loopback: LoopbackServer, make_model: MakeModel) -> None:
    loopback.queue(text_stream("ok"))

    make_model(send_tool_choice=False).complete(ask())

    assert "tool_choice" not in loopback.requests[0]
    assert loopback.requests[0]["tools"] == [BASH.to_wire()]


def test_a_named_tool_choice_goes_out_as_a_function_choice(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(tool_stream([("call_1", "bash", {"command": "ls"})]))

    reply = make_model().complete(ask(tool_choice="bash"))

    assert loopback.requests[0]["tool_choice"] == {"type": "function", "function": {"name": "bash"}}
    assert reply.message.tool_calls[0].name == "bash"


def test_the_setting_leaves_out_a_named_tool_choice_too(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(text_stream("ok"))

    make_model(send_tool_choice=False).complete(ask(tool_choice="bash"))

    assert "tool_choice" not in loopback.requests[0]


def test_a_server_that_hides_tools_without_tool_choice_gets_to_call_them(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(tools_need_tool_choice=True)
    loopback.queue(tool_stream([("call_a", "bash", {"command": "ls"})]))

    reply = make_model().complete(ask())

    assert reply.message.tool_calls == (tool_call("call_a", "bash", '{"command": "ls"}'),)


def test_that_server_answers_in_text_when_tool_choice_is_off(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    """The quirk itself: what issue 9 saw with llama-cpp-python before this change."""
    loopback.quirks = Quirks(tools_need_tool_choice=True)
    loopback.queue(tool_stream([("call_a", "bash", {"command": "ls"})]))

    reply = make_model(send_tool_choice=False).complete(ask())

    assert reply.message.content == TOOLS_IGNORED_ANSWER


def test_a_rejected_tool_choice_names_the_setting_in_one_line(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(rejects_tool_choice=True)

    with pytest.raises(BadRequestError) as caught:
        make_model().complete(ask())

    message = str(caught.value)
    assert "--enable-auto-tool-choice" in message
    assert "set send_tool_choice = false" in message
    assert "\n" not in message


def test_an_unrelated_bad_request_gets_no_tool_choice_hint(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(error_reply(400, {"error": {"message": "temperature is out of range"}}))

    with pytest.raises(BadRequestError) as caught:
        make_model().complete(ask())

    assert "send_tool_choice" not in str(caught.value)


# --- null content ----------------------------------------------------------------------------


def test_a_history_with_a_text_free_tool_call_is_accepted_by_a_strict_server(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(null_content_rejected=True)
    loopback.queue(text_stream("one file"))

    reply = make_model().complete(ask(*AFTER_A_TOOL_ROUND))

    assert reply.message.content == "one file"
    assert not loopback.refused
    assert loopback.requests[0]["messages"][2]["content"] == ""


# --- empty streams ---------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["llama.cpp", "openai"])
def test_an_overflow_hidden_in_an_empty_stream_is_prompt_too_long(
    loopback: LoopbackServer, make_model: MakeModel, provider: str
) -> None:
    loopback.quirks = Quirks(empty_stream_on_error=True)
    loopback.queue(error_reply(*OVERFLOW_REPLIES[provider]))

    with pytest.raises(PromptTooLongError):
        make_model().complete(ask())

    assert [body["stream"] for body in loopback.requests] == [True, False]


def test_a_reply_hidden_behind_an_empty_stream_arrives_without_streaming(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(empty_stream(), tool_stream([("call_a", "bash", {"command": "ls"})]))
    shown: list[str] = []

    reply = make_model().complete(ask(on_text=shown.append))

    assert reply.message.tool_calls == (tool_call("call_a", "bash", '{"command": "ls"}'),)
    assert reply.finish_reason == "tool_calls"
    assert [body["stream"] for body in loopback.requests] == [True, False]
    assert "stream_options" not in loopback.requests[1]


def test_text_that_arrives_without_streaming_is_shown_once(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(empty_stream(), text_stream("the whole answer"))
    shown: list[str] = []

    reply = make_model().complete(ask(on_text=shown.append))

    assert reply.message.content == "the whole answer"
    assert shown == ["the whole answer"]


def test_a_stream_cut_mid_reply_is_still_retried_streaming(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(cut_stream("half"), text_stream("whole"))

    assert make_model().complete(ask()).message.content == "whole"
    assert [body["stream"] for body in loopback.requests] == [True, True]


def test_with_streaming_off_every_request_is_one_whole_reply(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(
        tool_stream([("call_a", "glob", {"pattern": "*"}), ("call_b", "grep", {"pattern": "x"})]),
        text_stream("done", usage=(40, 2)),
    )
    model = make_model(stream=False)

    calls = model.complete(ask()).message.tool_calls
    answer = model.complete(ask())

    assert [call.name for call in calls] == ["glob", "grep"]
    assert answer.message.content == "done"
    assert answer.usage is not None and answer.usage.prompt_tokens == 40
    assert [body["stream"] for body in loopback.requests] == [False, False]


# --- the output cap --------------------------------------------------------------------------


def test_every_request_carries_the_output_cap(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(empty_stream(), text_stream("a"), text_stream("b"))
    model = make_model(max_output_tokens=1_000)

    model.complete(ask())
    model.complete(ask())

    assert [body["max_tokens"] for body in loopback.requests] == [1_000, 1_000, 1_000]


def test_the_default_cap_is_8192(loopback: LoopbackServer, make_model: MakeModel) -> None:
    loopback.queue(text_stream("a"))

    make_model().complete(ask())

    assert loopback.requests[0]["max_tokens"] == 8_192


def test_a_runaway_reply_stops_at_the_cap_with_finish_reason_length(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(honours_output_cap=True)
    loopback.queue(text_stream("word " * 200, pieces=200))

    reply = make_model(max_output_tokens=5).complete(ask())

    assert reply.finish_reason == "length"
    assert reply.message.content == "word " * 5


def test_a_server_that_wants_max_completion_tokens_gets_it_for_the_rest_of_the_session(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(rejects_max_tokens=True)
    loopback.queue(text_stream("first"), text_stream("second"))
    model = make_model(max_output_tokens=2_000)

    assert model.complete(ask()).message.content == "first"
    assert model.complete(ask()).message.content == "second"

    assert ["max_tokens" in body for body in loopback.requests] == [True, False, False]
    assert [body.get("max_completion_tokens") for body in loopback.requests[1:]] == [2_000] * 2


def test_vllm_naming_both_cap_parameters_is_not_a_request_to_switch(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(error_reply(400, vllm_cap_too_large(4_096, 3_500, 8_192)), text_stream("ok"))

    make_model().complete(ask())

    assert all("max_completion_tokens" not in body for body in loopback.requests)


def vllm_cap_too_large(window: int, prompt: int, cap: int) -> dict[str, Any]:
    return {
        "object": "error",
        "message": f"'max_tokens' or 'max_completion_tokens' is too large: {cap}. This model's "
        f"maximum context length is {window} tokens and your request has {prompt} input "
        f"tokens ({cap} > {window} - {prompt}).",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }


def test_a_cap_that_does_not_fit_beside_the_prompt_is_lowered_and_the_window_kept(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    """vLLM with a 4,096-token window refuses prompt + 8,192; the prompt itself fits."""
    loopback.queue(
        error_reply(400, vllm_cap_too_large(4_096, 3_500, 8_192)),
        text_stream("fits"),
        text_stream("next"),
    )
    model = make_model()

    assert model.complete(ask()).message.content == "fits"
    assert model.complete(ask()).message.content == "next"

    assert [body["max_tokens"] for body in loopback.requests] == [8_192, 596, 1_024]


def test_a_prompt_that_leaves_less_than_an_eighth_of_the_window_is_still_an_overflow(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(error_reply(400, vllm_cap_too_large(4_096, 3_800, 8_192)))

    with pytest.raises(PromptTooLongError):
        make_model().complete(ask())
    assert len(loopback.requests) == 1


def test_after_an_overflow_stating_the_window_the_cap_keeps_within_it(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(error_reply(*OVERFLOW_REPLIES["llama.cpp"]), text_stream("ok"))
    model = make_model()

    with pytest.raises(PromptTooLongError) as refused:
        model.complete(ask())
    model.complete(ask())

    assert refused.value.window_tokens == 4_096
    assert [body["max_tokens"] for body in loopback.requests] == [8_192, 1_024]


def test_an_overflow_stating_no_window_leaves_the_cap_as_it_was(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(error_reply(*OVERFLOW_REPLIES["llama.cpp-type-only"]), text_stream("ok"))
    model = make_model()

    with pytest.raises(PromptTooLongError) as refused:
        model.complete(ask())
    model.complete(ask())

    assert refused.value.window_tokens is None
    assert [body["max_tokens"] for body in loopback.requests] == [8_192, 8_192]


# --- temperature ---------------------------------------------------------------------------------


def test_no_temperature_is_sent_unless_one_is_set(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.queue(text_stream("ok"), text_stream("ok"))

    make_model().complete(ask())
    make_model(temperature=0.0).complete(ask())

    assert "temperature" not in loopback.requests[0]
    assert loopback.requests[1]["temperature"] == 0


# --- one leading system message ----------------------------------------------------------------


def test_a_template_that_allows_only_a_leading_system_message_accepts_every_request(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(system_only_first=True)
    loopback.queue(text_stream("ok"))

    make_model().complete(ask(*AFTER_A_TOOL_ROUND))

    assert not loopback.refused
    roles = [message["role"] for message in loopback.requests[0]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]


@pytest.mark.parametrize(
    "then",
    [system_message("Reminder: plan"), user_message("second")],
    ids=["a reminder", "a prompt after one whose request failed"],
)
def test_merging_satisfies_a_template_that_demands_alternation(
    loopback: LoopbackServer, make_model: MakeModel, then: ChatMessage
) -> None:
    loopback.quirks = Quirks(strict_alternation=True, system_only_first=True)
    loopback.queue(text_stream("ok"))

    make_model(merge_reminders=True).complete(
        ask(system_message("prompt"), user_message("first"), then)
    )

    assert not loopback.refused
    assert [message["role"] for message in loopback.requests[0]["messages"]] == ["system", "user"]


def test_without_merging_that_template_refuses_a_reminder_after_a_user_turn(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(strict_alternation=True)

    with pytest.raises(ProviderError, match="must alternate"):
        make_model().complete(
            ask(system_message("prompt"), user_message("do it"), system_message("Reminder"))
        )


# --- usage -----------------------------------------------------------------------------------


def test_usage_a_stream_does_not_report_is_unknown(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = Quirks(no_stream_usage=True)
    loopback.queue(text_stream("hi", usage=(100, 3)))

    assert make_model().complete(ask()).usage is None


# --- streamed tool-call ids ------------------------------------------------------------------

TWO_CALLS = [("call_a", "glob", {"pattern": "*.py"}), ("call_b", "grep", {"pattern": "TODO"})]


@pytest.mark.parametrize(
    "quirks",
    [
        Quirks(calls_at_index_zero=True),
        Quirks(duplicate_call_ids=True),
        Quirks(calls_at_index_zero=True, no_stream_usage=True),
    ],
    ids=["index-zero", "duplicate-ids", "index-zero-no-usage"],
)
def test_two_streamed_calls_stay_two_calls(
    loopback: LoopbackServer, make_model: MakeModel, quirks: Quirks
) -> None:
    loopback.quirks = quirks
    loopback.queue(tool_stream(TWO_CALLS, split=3))

    calls = make_model().complete(ask()).message.tool_calls

    assert [(call.name, call.arguments) for call in calls] == [
        ("glob", '{"pattern": "*.py"}'),
        ("grep", '{"pattern": "TODO"}'),
    ]


def test_the_llama_cpp_python_quirks_allow_a_tool_round_trip(
    loopback: LoopbackServer, make_model: MakeModel
) -> None:
    loopback.quirks = LLAMA_CPP_PYTHON
    loopback.queue(tool_stream([("call_1", "bash", {"command": "ls"})]), text_stream("a.py"))
    model = make_model()

    first = model.complete(ask(system_message("prompt"), user_message("list files")))
    second = model.complete(ask(*AFTER_A_TOOL_ROUND))

    assert first.message.tool_calls == (LS_CALL,)
    assert second.message.content == "a.py"
    assert not loopback.refused
