"""Chapter 6: the task tool runs a fresh, isolated subagent and returns its final answer."""

from __future__ import annotations

import orjson
import pytest
from pydantic import BaseModel

from agent_tutorial.core.events import (
    EventBus,
    NestedEvent,
    Notice,
    TextDelta,
    ToolStarted,
)
from agent_tutorial.core.loop import AgentRunner, TurnInterrupted
from agent_tutorial.core.messages import (
    ToolMessage,
    system_message,
    tool_call,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import ModelReply, ProviderError
from agent_tutorial.core.tools import ToolDefinition, ToolRegistry, ToolResult, tool_success
from agent_tutorial.features.subagents import NestingSink, subagent_tools, task_tool
from agent_tutorial.features.todos import TodoTracker, todo_write_tool
from agent_tutorial.testing import ScriptedModel, ScriptedReply, text_reply, tool_reply
from tests.event_log import EventLog


class NoInput(BaseModel):
    pass


def interrupting_tool(_: NoInput) -> ToolResult:
    raise KeyboardInterrupt


class Family:
    """A parent runner whose `task` tool spawns children on the same scripted model."""

    def __init__(
        self, replies: list[ScriptedReply], *, max_result_bytes: int = 20_000, child_turns: int = 5
    ) -> None:
        self.model = ScriptedModel(replies)
        self.log = EventLog()
        self.bus = EventBus([self.log])
        self.tools = ToolRegistry(
            [
                ToolDefinition("noop", "Does nothing.", NoInput, lambda _: tool_success("ok")),
                ToolDefinition("interrupt", "Acts like Ctrl-C.", NoInput, interrupting_tool),
            ]
        )
        self.tools.register(task_tool(self.spawn, max_result_bytes=max_result_bytes))
        self.child_turns = child_turns
        self.children: list[AgentRunner] = []
        self.parent = AgentRunner(
            self.model,
            self.tools,
            system_prompt="parent system",
            events=self.bus,
            history=[user_message("earlier question"), text_reply("earlier answer").message],
        )

    def spawn(self, description: str) -> AgentRunner:
        child = AgentRunner(
            self.model,
            subagent_tools(self.tools),
            system_prompt="child system",
            max_turns=self.child_turns,
            events=EventBus([NestingSink(self.bus)]),
        )
        self.children.append(child)
        return child


def task_call(prompt: str = "find the bug", call_id: str = "t1") -> ModelReply:
    arguments = orjson.dumps({"description": "look for the bug", "prompt": prompt}).decode()
    return tool_reply(tool_call(call_id, "task", arguments))


def task_results(runner: AgentRunner) -> list[str]:
    return [m.content for m in runner.history if isinstance(m, ToolMessage)]


def test_child_first_request_holds_only_its_system_prompt_and_task_prompt() -> None:
    family = Family([task_call("find the bug"), text_reply("found it"), text_reply("done")])
    family.parent.run("please delegate")
    child_request = family.model.requests[1]
    assert child_request.messages == (
        system_message("child system"),
        user_message("find the bug"),
    )


def test_child_request_offers_no_task_tool() -> None:
    family = Family([task_call(), text_reply("found it"), text_reply("done")])
    family.parent.run("please delegate")
    assert [spec.name for spec in family.model.requests[0].tools] == ["noop", "interrupt", "task"]
    assert [spec.name for spec in family.model.requests[1].tools] == ["noop", "interrupt"]


def test_parent_receives_the_child_final_answer() -> None:
    family = Family([task_call(), text_reply("the bug is in parse()"), text_reply("done")])
    result = family.parent.run("please delegate")
    assert task_results(family.parent) == ["the bug is in parse()"]
    assert result.final_text == "done"
    family.model.assert_exhausted()


def test_each_task_gets_a_fresh_child() -> None:
    family = Family(
        [
            task_call("first job", "t1"),
            text_reply("one"),
            task_call("second job", "t2"),
            text_reply("two"),
            text_reply("done"),
        ]
    )
    family.parent.run("delegate twice")
    assert family.model.requests[3].messages == (
        system_message("child system"),
        user_message("second job"),
    )
    assert task_results(family.parent) == ["one", "two"]


def test_child_model_error_becomes_a_tool_error_for_the_parent() -> None:
    family = Family([task_call(), ProviderError("upstream 502"), text_reply("sorry")])
    result = family.parent.run("please delegate")
    [content] = task_results(family.parent)
    assert content.startswith("Error [subagent_model_error]:")
    assert "upstream 502" in content
    assert result.final_text == "sorry"


def test_child_run_error_becomes_a_tool_error_for_the_parent() -> None:
    family = Family(
        [task_call(), tool_reply(tool_call("c1", "noop", "{}")), text_reply("sorry")],
        child_turns=1,
    )
    family.parent.run("please delegate")
    [content] = task_results(family.parent)
    assert content.startswith("Error [subagent_failed]: the subagent stopped: stopped after 1")


def test_interrupt_inside_the_child_interrupts_the_parent_turn() -> None:
    family = Family([task_call(), tool_reply(tool_call("c1", "interrupt", "{}"))])
    with pytest.raises(TurnInterrupted):
        family.parent.run("please delegate")
    validate_tool_pairing(family.parent.history)
    assert task_results(family.parent)[-1].startswith("Error [interrupted]")


def delegated_once_with_a_child_tool_call() -> Family:
    """A parent that delegated once; its child called `noop` (id c1), then answered."""
    family = Family(
        [
            task_call(),
            tool_reply(tool_call("c1", "noop", "{}")),
            text_reply("found"),
            text_reply("ok"),
        ]
    )
    family.parent.run("please delegate")
    return family


def test_child_events_arrive_wrapped_at_depth_one() -> None:
    family = delegated_once_with_a_child_tool_call()
    nested = [event for event in family.log.events if isinstance(event, NestedEvent)]
    assert {event.depth for event in nested} == {1}
    inner = [event.event for event in nested]
    assert any(isinstance(e, ToolStarted) and e.call.id == "c1" for e in inner)
    assert TextDelta("found") in inner
    top_level_calls = [e.call.id for e in family.log.events if isinstance(e, ToolStarted)]
    assert top_level_calls == ["t1"]


def test_child_history_never_enters_the_parent_history() -> None:
    family = delegated_once_with_a_child_tool_call()
    parent_text = orjson.dumps([repr(m) for m in family.parent.history]).decode()
    assert "c1" not in parent_text
    assert family.children[0].history[0] == user_message("find the bug")


def test_long_answer_is_cut_on_a_character_boundary_within_the_budget() -> None:
    answer = "é" * 5_000  # 10,000 UTF-8 bytes
    family = Family([task_call(), text_reply(answer), text_reply("ok")], max_result_bytes=1_000)
    family.parent.run("please delegate")
    [content] = task_results(family.parent)
    assert len(content.encode("utf-8")) <= 1_000
    kept, note = content.split("\n[... truncated", 1)
    assert set(kept) == {"é"}
    assert f"the answer was 10,000 bytes; showing the first {len(kept.encode()):,} bytes]" in note


def test_answer_within_budget_is_returned_whole() -> None:
    answer = "x" * 1_000
    family = Family([task_call(), text_reply(answer), text_reply("ok")], max_result_bytes=1_000)
    family.parent.run("please delegate")
    assert task_results(family.parent) == [answer]


def test_empty_answer_says_so() -> None:
    family = Family([task_call(), text_reply(""), text_reply("ok")])
    family.parent.run("please delegate")
    assert task_results(family.parent) == ["(the subagent finished without a final answer)"]


def test_task_input_needs_a_prompt() -> None:
    family = Family([tool_reply(tool_call("t1", "task", '{"description": "x"}')), text_reply("ok")])
    family.parent.run("please delegate")
    [content] = task_results(family.parent)
    assert content.startswith("Error [invalid_arguments]: prompt")
    assert family.children == []


def test_task_tool_is_read_effect_with_the_description_as_subject() -> None:
    tool = task_tool(lambda _: pytest.fail("not called"))
    assert (tool.effect, tool.subject_field) == ("read", "description")


def test_tiny_result_budget_is_a_developer_error() -> None:
    with pytest.raises(ValueError, match="max_result_bytes"):
        task_tool(lambda _: pytest.fail("not called"), max_result_bytes=10)


def test_nesting_sink_flattens_deeper_events() -> None:
    log = EventLog()
    NestingSink(log, depth=1).emit(NestedEvent(1, Notice("info", "deep")))
    assert log.events == [NestedEvent(2, Notice("info", "deep"))]


def test_nesting_sink_rejects_depth_zero() -> None:
    with pytest.raises(ValueError, match="depth"):
        NestingSink(EventLog(), depth=0)


def test_subagent_tools_drop_task_and_the_parents_todo_write() -> None:
    parent_tools = ToolRegistry(
        [
            ToolDefinition("noop", "Does nothing.", NoInput, lambda _: tool_success("ok")),
            todo_write_tool(TodoTracker()),
            task_tool(lambda _: pytest.fail("not called")),
        ]
    )
    assert subagent_tools(parent_tools).names() == ["noop"]
    assert parent_tools.names() == ["noop", "todo_write", "task"]
