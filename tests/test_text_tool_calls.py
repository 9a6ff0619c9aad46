"""Specification of `TextToolCalls`, the model client that turns calls a model wrote as text
into real calls: what it sends, what it returns, what it shows while the reply streams, and
when `auto` turns to the text protocol. Driven with `ScriptedModel` (the wire itself is
tests/test_text_tool_calls_cli.py's)."""

from __future__ import annotations

import re

import pytest

from agent_tutorial.adapters.text_tool_calls import SwitchReason, TextToolCalls
from agent_tutorial.core.messages import ToolCall, assistant_message, user_message
from agent_tutorial.core.model import (
    FinishReason,
    ModelReply,
    ModelRequest,
    ToolSpec,
    Usage,
    make_request,
)
from agent_tutorial.testing import ScriptedModel, ScriptedReply, tool_reply

GLOB_TOOL = ToolSpec(
    "glob", "Find files by name.", {"type": "object", "properties": {"pattern": {}}}
)
READ_TOOL = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {}}})
GLOB = '{"name": "glob", "arguments": {"pattern": "*.py"}}'
READ = '{"name": "read_file", "arguments": {"path": "a.txt"}}'
GLOB_LIST = '<tools>\n{"type": "function", "function": {"name": "glob", "description": "Find'
FIRST, SECOND = Usage(10, 2, 12), Usage(20, 3, 23)
CALL_ID = re.compile(r"call_[0-9a-f]{24}")


class Session:
    """One `TextToolCalls` over scripted replies, with what it showed and said."""

    def __init__(self, mode: str, *replies: ScriptedReply) -> None:
        self.model = ScriptedModel(replies)
        self.shown: list[str] = []
        self.switches: list[SwitchReason] = []
        assert mode in ("auto", "text")
        self.client = TextToolCalls(
            self.model, "auto" if mode == "auto" else "text", self.switches.append
        )

    def ask(self, *tools: ToolSpec, streamed: bool = True) -> ModelReply:
        on_text = self.shown.append if streamed else None
        request = make_request([user_message("How many?")], tools or (GLOB_TOOL,), on_text)
        return self.client.complete(request)

    @property
    def requests(self) -> list[ModelRequest]:
        return self.model.requests


def reply(text: str, usage: Usage | None = None, finish: FinishReason = "stop") -> ModelReply:
    return ModelReply(assistant_message(text), finish, usage)


def only_call(answer: ModelReply) -> ToolCall:
    (call,) = answer.message.tool_calls
    assert CALL_ID.fullmatch(call.id)
    return call


# --- replies that are answers -------------------------------------------------------------


def test_an_answer_is_returned_and_shown_as_it_is_with_the_tools_on_the_wire() -> None:
    answered = reply("Two files.", FIRST)
    session = Session("auto", answered)

    assert session.ask() is answered
    assert "".join(session.shown) == "Two files."
    assert session.requests[0].tools == (GLOB_TOOL,)
    assert not session.client.describes_tools and session.switches == []


def test_an_answer_held_while_it_might_be_a_call_is_shown_once_it_is_not() -> None:
    text = 'The pattern is {"a": 1} here.'
    session = Session("auto", reply(text))

    session.ask()

    assert "".join(session.shown) == text


def test_an_answer_to_a_request_that_streams_nothing_is_returned() -> None:
    session = Session("auto", reply('Maybe {"a": 1}.'))

    assert session.ask(streamed=False).message.content == 'Maybe {"a": 1}.'


def test_a_request_offering_no_tools_goes_to_the_model_untouched() -> None:
    session = Session("auto", reply("Hi."))
    request = make_request([user_message("hi")], (), session.shown.append)

    session.client.complete(request)

    assert session.requests[0] is request  # its own on_text: with no tool, nothing is held
    assert session.shown == ["Hi."]


# --- calls written as text ----------------------------------------------------------------


def test_a_call_written_as_text_comes_back_as_a_call_and_auto_turns_to_text() -> None:
    session = Session(
        "auto", reply(f"Let me look.\n<tool_call>\n{GLOB}\n</tool_call>", FIRST), reply("Two.")
    )

    answer = session.ask()

    assert answer.message.content == "Let me look."
    assert (only_call(answer).name, only_call(answer).arguments) == ("glob", '{"pattern": "*.py"}')
    assert (answer.finish_reason, answer.usage) == ("tool_calls", FIRST)
    assert "<tool_call>" not in "".join(session.shown)
    assert session.switches == ["calls_in_text"] and session.client.describes_tools
    session.ask()
    assert session.requests[1].tools == ()  # described in the prompt from now on
    assert session.switches == ["calls_in_text"]  # said once


@pytest.mark.parametrize(
    ("finish", "kept"),
    [("stop", "tool_calls"), ("length", "length"), ("content_filter", "content_filter")],
)
def test_a_reply_cut_at_its_cap_stays_cut_and_any_other_finish_is_a_call(
    finish: FinishReason, kept: FinishReason
) -> None:
    session = Session("auto", reply(GLOB, finish=finish))

    assert session.ask().finish_reason == kept


def test_text_mode_describes_the_tools_in_the_prompt_from_the_first_request() -> None:
    session = Session("text", reply(GLOB))

    answer = session.ask()

    assert only_call(answer).name == "glob"
    assert session.requests[0].tools == ()
    assert session.switches == []  # text mode is the protocol itself: nothing to say


def test_in_text_mode_a_bare_functions_marker_stays_the_answer() -> None:
    marker = reply("functions.glob:")
    session = Session("text", marker)

    assert session.ask() is marker
    assert "".join(session.shown) == "functions.glob:"


# --- a repeated tool list -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "total"),
    [
        (FIRST, SECOND, Usage(30, 5, 35)),
        (None, SECOND, SECOND),
        (FIRST, None, FIRST),
        (None, None, None),
    ],
)
def test_a_repeated_tool_list_is_asked_again_in_text_and_both_replies_are_counted(
    first: Usage | None, second: Usage | None, total: Usage | None
) -> None:
    session = Session("auto", reply(GLOB_LIST, first), reply("Two files.", second))

    answer = session.ask()

    assert answer.message == assistant_message("Two files.")
    assert answer.usage == total
    assert "".join(session.shown) == "Two files."
    assert session.switches == ["echoed_tool_list"]
    assert [request.tools for request in session.requests] == [(GLOB_TOOL,), ()]


def test_in_text_mode_a_repeated_tool_list_stays_the_answer() -> None:
    session = Session("text", reply(GLOB_LIST))

    assert session.ask().message.content == GLOB_LIST
    assert len(session.requests) == 1


# --- a bare functions.NAME: marker in auto ------------------------------------------------


def test_a_bare_marker_is_asked_again_naming_the_tool_and_its_native_call_is_the_reply() -> None:
    native = tool_reply(ToolCall("call_1", "glob", '{"pattern": "*.py"}'))
    session = Session(
        "auto",
        reply("Let me look.\nfunctions.glob:", FIRST),
        ModelReply(native.message, "tool_calls", SECOND),
    )

    answer = session.ask()

    assert answer.message == assistant_message("Let me look.", native.message.tool_calls)
    assert (answer.finish_reason, answer.usage) == ("tool_calls", Usage(30, 5, 35))
    again = session.requests[1]
    assert (again.tool_choice, again.tools, again.on_text) == ("glob", (GLOB_TOOL,), None)
    assert session.switches == [] and not session.client.describes_tools


def test_a_bare_marker_alone_asked_again_gives_a_call_with_no_text() -> None:
    native = tool_reply(ToolCall("call_1", "glob", '{"pattern": "*.py"}'), content="calling")
    session = Session("auto", reply("functions.glob:"), native)

    assert session.ask().message.content is None


def test_a_bare_marker_asked_again_may_be_answered_with_the_call_written_as_text() -> None:
    session = Session(
        "auto",
        reply("Let me look.\nfunctions.glob:", FIRST),
        reply(GLOB, SECOND, finish="length"),
    )

    answer = session.ask(GLOB_TOOL, READ_TOOL)

    assert answer.message.content == "Let me look."
    assert only_call(answer).name == "glob"
    assert (answer.finish_reason, answer.usage) == ("length", Usage(30, 5, 35))
    assert session.switches == ["calls_in_text"]


def test_a_bare_marker_asked_again_takes_only_a_call_to_the_tool_it_named() -> None:
    session = Session("auto", reply("functions.glob:", FIRST), reply(READ, SECOND))

    answer = session.ask(GLOB_TOOL, READ_TOOL)

    assert answer.message == assistant_message("functions.glob:")
    assert answer.usage == Usage(30, 5, 35)
    assert "".join(session.shown) == "functions.glob:"
    assert session.switches == []


def test_a_bare_marker_that_brings_no_call_again_is_shown_as_the_answer() -> None:
    session = Session("auto", reply("functions.glob:", FIRST), reply("I cannot.", SECOND))

    answer = session.ask()

    assert answer.message == assistant_message("functions.glob:")
    assert answer.usage == Usage(30, 5, 35)
    assert session.shown == ["functions.glob:"]


def test_a_bare_marker_that_brings_no_call_shows_nothing_where_nothing_streams() -> None:
    session = Session("auto", reply("functions.glob:"), reply("I cannot."))

    assert session.ask(streamed=False).message.content == "functions.glob:"
