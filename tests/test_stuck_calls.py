"""A model that keeps making the same call, or stops with an empty reply after tool results
(issue 16 saw both from a 1.5B model): repeats run with a note, past `MAX_IDENTICAL_CALLS`
the turn ends; an empty reply after results is asked once for an answer."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from agent_tutorial.core.loop import (
    EMPTY_REPLY_FOLLOW_UP,
    AgentRunner,
    FullContext,
    RepeatedCallError,
)
from agent_tutorial.core.messages import (
    ChatMessage,
    ToolCall,
    ToolMessage,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.repeats import MAX_IDENTICAL_CALLS, RepeatedCalls
from agent_tutorial.core.tools import (
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    tool_error,
    tool_success,
)
from agent_tutorial.testing import ScriptedModel, ScriptedReply, text_reply, tool_reply

NOTE = "this exact call already ran"


class Path(BaseModel):
    path: str


class Files:
    """A tiny workspace: `look` reads it, `touch` changes it, and every run is recorded."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.ran: list[str] = []

    def look(self, arguments: Path) -> ToolResult:
        self.ran.append(f"look {arguments.path}")
        return tool_success(", ".join(self.names) or "(empty)")

    def touch(self, arguments: Path) -> ToolResult:
        self.ran.append(f"touch {arguments.path}")
        self.names.append(arguments.path)
        return tool_success(f"created {arguments.path}")

    def registry(self) -> ToolRegistry:
        return ToolRegistry(
            [
                ToolDefinition("look", "List files.", Path, self.look),
                ToolDefinition("touch", "Create a file.", Path, self.touch, effect="write"),
            ]
        )


@pytest.fixture
def files() -> Files:
    return Files()


COUNTER = iter(range(1_000_000))


def call(name: str, path: str = ".", *, spacing: str = "") -> ToolCall:
    arguments = json.dumps({"path": path}).replace(":", f"{spacing}:")
    return tool_call(f"call_{next(COUNTER)}", name, arguments)


def runner(files: Files, *replies: ScriptedReply) -> AgentRunner:
    return AgentRunner(ScriptedModel(replies), files.registry())


def results(agent: AgentRunner) -> list[str]:
    return [message.content for message in agent.history if isinstance(message, ToolMessage)]


def test_the_same_call_runs_each_time_and_a_repeat_says_it_already_ran(files: Files) -> None:
    agent = runner(files, *(tool_reply(call("look")) for _ in range(3)), text_reply("done"))

    assert agent.run("what is here?").final_text == "done"

    assert files.ran == ["look ."] * 3
    first, second, third = results(agent)
    assert first == "(empty)"
    assert second.startswith("(empty)\n\n[Note: this exact call already ran once in this turn")
    assert "came back the same" in second
    assert f"{NOTE} 2 times" in third


def test_past_the_limit_the_call_is_not_run_and_the_turn_ends(files: Files) -> None:
    replies = [tool_reply(call("look")) for _ in range(MAX_IDENTICAL_CALLS + 1)]
    agent = runner(files, *replies)  # no answer scripted: a further request would fail

    with pytest.raises(RepeatedCallError) as stopped:
        agent.run("what is here?")

    assert files.ran == ["look ."] * MAX_IDENTICAL_CALLS
    assert results(agent)[-1].startswith("Error [repeated_call]: not run")
    validate_tool_pairing(agent.history)
    assert str(stopped.value) == (
        'the model made the same call (look {"path": "."}) 4 times with nothing changed in '
        "between; stopped"
    )


def test_a_change_in_between_makes_the_same_call_a_fresh_one(files: Files) -> None:
    agent = runner(
        files,
        tool_reply(call("look")),
        tool_reply(call("look")),
        tool_reply(call("touch", "a.txt")),  # the workspace changed
        *(tool_reply(call("look")) for _ in range(MAX_IDENTICAL_CALLS)),
        text_reply("done"),
    )

    assert agent.run("go").final_text == "done"

    shown = results(agent)
    assert NOTE in shown[1]
    assert NOTE not in shown[3] and shown[3] == "a.txt"
    assert files.ran.count("look .") == 2 + MAX_IDENTICAL_CALLS


def test_a_read_in_between_changes_nothing(files: Files) -> None:
    agent = runner(
        files,
        tool_reply(call("look")),
        tool_reply(call("look", "src")),
        tool_reply(call("look", spacing=" ")),  # the same arguments, spaced differently
        text_reply("done"),
    )

    agent.run("go")

    assert NOTE not in results(agent)[1]
    assert NOTE in results(agent)[2]


def test_the_same_write_again_with_nothing_between_is_a_repeat(files: Files) -> None:
    agent = runner(
        files, tool_reply(call("touch", "a")), tool_reply(call("touch", "a")), text_reply("ok")
    )

    agent.run("go")

    assert NOTE in results(agent)[1]


def test_a_new_prompt_starts_afresh(files: Files) -> None:
    agent = runner(
        files,
        tool_reply(call("look")),
        text_reply("first"),
        tool_reply(call("look")),
        text_reply("second"),
    )

    agent.run("one")
    agent.run("two")

    assert [NOTE in result for result in results(agent)] == [False, False]


@pytest.mark.parametrize("empty", ["", "  \n"])
def test_an_empty_reply_after_tool_results_is_asked_once_for_an_answer(
    files: Files, empty: str
) -> None:
    agent = runner(files, tool_reply(call("look")), text_reply(empty), text_reply("Nothing."))

    result = agent.run("what is here?")

    assert (result.final_text, result.turns) == ("Nothing.", 3)
    assert agent.history[4] == user_message(EMPTY_REPLY_FOLLOW_UP)


def test_an_empty_reply_again_ends_the_run_empty(files: Files) -> None:
    agent = runner(files, tool_reply(call("look")), text_reply(""), text_reply(""))

    assert agent.run("what is here?").final_text == ""


def test_an_empty_first_reply_is_not_asked_again(files: Files) -> None:
    agent = runner(files, text_reply(""))  # no tool results: nothing to answer from

    assert agent.run("hi").turns == 1


def test_an_answer_after_tool_results_ends_the_run(files: Files) -> None:
    agent = runner(files, tool_reply(call("look")), text_reply("Empty."))

    assert agent.run("hi").turns == 2


class ClearsResults(FullContext):
    """A context policy that shows the model every tool result as cleared (as chapter 8's
    micro layer does to old ones)."""

    def prepare(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        return [
            tool_message("[cleared]", message.tool_call_id)
            if isinstance(message, ToolMessage)
            else message
            for message in history
        ]


def test_a_call_whose_result_the_model_no_longer_sees_is_not_a_repeat(files: Files) -> None:
    replies = [tool_reply(call("look")) for _ in range(MAX_IDENTICAL_CALLS + 1)]
    agent = AgentRunner(
        ScriptedModel([*replies, text_reply("done")]), files.registry(), context=ClearsResults()
    )

    assert agent.run("go").final_text == "done"

    assert not any(NOTE in result for result in results(agent))


# The record of calls itself (RepeatedCalls)

LOOK = '{"path": "."}'


def test_arguments_in_another_key_order_make_the_same_call() -> None:
    repeats = RepeatedCalls()
    repeats.record(
        tool_call("call_a", "grep", '{"pattern": "x", "path": "."}'),
        tool_success("hit"),
        may_change=False,
    )

    again = repeats.record(
        tool_call("call_b", "grep", '{"path": ".", "pattern": "x"}'),
        tool_success("hit"),
        may_change=False,
    )

    assert NOTE in again.content


def test_arguments_that_are_not_json_make_the_same_call_only_with_the_same_text() -> None:
    repeats = RepeatedCalls()
    repeats.record(tool_call("call_a", "grep", "{oops"), tool_success("?"), may_change=False)

    other = repeats.record(
        tool_call("call_b", "grep", "{other"), tool_success("?"), may_change=False
    )
    same = repeats.record(
        tool_call("call_c", "grep", "{other"), tool_success("?"), may_change=False
    )

    assert NOTE not in other.content
    assert NOTE in same.content


def test_a_repeat_that_came_back_differently_says_so_in_its_note() -> None:
    repeats = RepeatedCalls()
    repeats.record(tool_call("call_a", "look", LOOK), tool_success("one"), may_change=False)

    again = repeats.record(tool_call("call_b", "look", LOOK), tool_success("two"), may_change=False)

    assert again.content == (
        "two\n\n[Note: this exact call already ran once in this turn with nothing changed in "
        "between, and came back differently then. Running it again tells you nothing new: use "
        "this result, try something different, or answer.]"
    )


def test_the_call_past_the_limit_is_refused_and_becomes_the_stuck_one() -> None:
    repeats = RepeatedCalls()
    look = tool_call("call_a", "look", LOOK)
    assert repeats.stuck is None
    for _ in range(MAX_IDENTICAL_CALLS):
        assert repeats.refusal(look) is None
        repeats.record(look, tool_success("a.txt"), may_change=False)

    refused = repeats.refusal(look)

    assert refused == tool_error(
        "repeated_call",
        f"not run: this exact call already ran {MAX_IDENTICAL_CALLS} times with nothing "
        "changed in between; the turn ends here",
    )
    assert repeats.stuck == look


def test_a_limit_of_one_refuses_the_first_repeat() -> None:
    repeats = RepeatedCalls(limit=1)
    look = tool_call("call_a", "look", LOOK)
    assert repeats.refusal(look) is None

    repeats.record(look, tool_success("a.txt"), may_change=False)

    assert repeats.refusal(look) is not None


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^limit must be at least 1, got 0$"):
        RepeatedCalls(limit=0)


def test_a_request_that_shows_the_result_as_it_came_back_keeps_the_repeat() -> None:
    repeats = RepeatedCalls()
    first = tool_call("call_a", "look", LOOK)
    shown = repeats.record(first, tool_success("a.txt"), may_change=False)
    canonical: list[ChatMessage] = [
        user_message("go"),
        assistant_message(None, [first]),
        tool_message(shown.content, first.id),
    ]

    repeats.forget_unseen(canonical, list(canonical))  # an equal request, built anew
    again = repeats.record(
        tool_call("call_b", "look", LOOK), tool_success("a.txt"), may_change=False
    )

    assert NOTE in again.content
