"""The manager wired into `AgentRunner` as its context policy (request history, tool-result
processing and overflow recovery), driven by a scripted model."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pydantic import BaseModel

from agent_tutorial.core.events import EventBus, Notice
from agent_tutorial.core.loop import AgentRunner, ContextOverflowError
from agent_tutorial.core.messages import (
    ChatMessage,
    ToolMessage,
    system_message,
    tool_call,
    validate_tool_pairing,
)
from agent_tutorial.core.model import PromptTooLongError
from agent_tutorial.core.tools import ToolDefinition, ToolRegistry, ToolResult, tool_success
from agent_tutorial.features.compaction import (
    SUMMARY_SYSTEM_PROMPT,
    CompactionManager,
    CompactionSettings,
    ModelHistorySummarizer,
    summary_message,
)
from agent_tutorial.testing import ScriptedModel, ScriptedReply, text_reply, tool_reply
from tests.event_log import EventLog
from tests.test_compaction_support import (
    SUMMARY,
    TRANSCRIPT_1,
    FakeSummarizer,
    counting_ids,
    history_with,
)


class EmitInput(BaseModel):
    size: int


def emit_tool() -> ToolDefinition:
    """A tool whose result is `size` bytes of text."""

    def handler(arguments: BaseModel) -> ToolResult:
        assert isinstance(arguments, EmitInput)
        return tool_success("r" * arguments.size)

    return ToolDefinition("emit", "Return some text.", EmitInput, handler)


def emit(call_id: str, size: int) -> ScriptedReply:
    return tool_reply(tool_call(call_id, "emit", f'{{"size": {size}}}'))


def runner_with(
    manager: CompactionManager, model: ScriptedModel, history: list[ChatMessage] | None = None
) -> AgentRunner:
    return AgentRunner(
        model,
        ToolRegistry([emit_tool()]),
        context=manager,
        history=history or [],
    )


def manager_in(
    workspace: Path, summarizer: object = None, log: EventLog | None = None, **settings: object
) -> CompactionManager:
    bus = EventBus([log] if log is not None else [])
    return CompactionManager(
        workspace,
        summarizer or FakeSummarizer(),  # type: ignore[arg-type]
        id_generator=counting_ids(),
        on_event=bus.emit,
        settings=CompactionSettings(**settings),  # type: ignore[arg-type]
    )


def test_large_result_enters_history_as_a_preview_with_its_bytes_on_disk(
    workspace: Path,
) -> None:
    model = ScriptedModel([emit("c1", 36_000), text_reply("done")])
    runner = runner_with(manager_in(workspace), model)

    runner.run("read the big file")

    result = runner.history[2]
    assert isinstance(result, ToolMessage)
    assert result.content.startswith(
        "<persisted-tool-result>\npath: .agent_tutorial/artifacts/tool-result-id-1.txt\n"
    )
    assert model.requests[1].messages[2] == result
    artifact = workspace / ".agent_tutorial/artifacts/tool-result-id-1.txt"
    assert artifact.read_bytes() == b"r" * 36_000


def test_overflow_is_recovered_once_with_the_summary_and_recent_groups(workspace: Path) -> None:
    model = ScriptedModel([PromptTooLongError("maximum context length"), text_reply("done")])
    earlier = history_with(9, "out")
    runner = runner_with(manager_in(workspace), model, earlier)

    result = runner.run("and now?")

    assert result.final_text == "done"
    retried = model.requests[1].messages
    assert retried[0] == summary_message(SUMMARY, TRANSCRIPT_1)
    assert retried[1:] == (*earlier[-8:], runner.history[-2])  # the last five groups
    model.assert_exhausted()


def test_a_second_overflow_in_the_same_turn_ends_the_run(workspace: Path) -> None:
    model = ScriptedModel([PromptTooLongError("too long"), PromptTooLongError("still too long")])
    runner = runner_with(manager_in(workspace), model, history_with(9))

    with pytest.raises(ContextOverflowError, match="try /compact or a fresh session"):
        runner.run("and now?")

    assert len(model.requests) == 2
    model.assert_exhausted()


def test_the_turn_after_a_recovery_starts_from_its_summary(workspace: Path) -> None:
    model = ScriptedModel(
        [PromptTooLongError("too long"), text_reply("first"), text_reply("second")]
    )
    runner = runner_with(manager_in(workspace), model, history_with(9))
    runner.run("one")

    runner.run("two")

    assert model.requests[2].messages[0] == summary_message(SUMMARY, TRANSCRIPT_1)
    assert model.requests[2].messages[-1] == runner.history[-2]


def test_bad_summaries_open_the_circuit_and_the_run_still_finishes(workspace: Path) -> None:
    # Each result is about 20,000 bytes and stays inline; three of them exceed the threshold.
    # Each call asks for its own size: the same call again would be a stuck call.
    bad_summary = text_reply("Sure! Here is a summary of the conversation.")
    script: list[ScriptedReply] = [
        emit("c1", 20_001),
        emit("c2", 20_002),
        emit("c3", 20_003),
        bad_summary,
        emit("c4", 20_004),
        bad_summary,
        emit("c5", 20_005),
        bad_summary,
        emit("c6", 20_006),
        text_reply("done despite it all"),
    ]
    model = ScriptedModel(script)
    log = EventLog()
    runner = runner_with(manager_in(workspace, ModelHistorySummarizer(model), log), model)

    result = runner.run("read everything")

    assert result.final_text == "done despite it all"
    model.assert_exhausted()
    summary_requests = [r for r in model.requests if r.messages[0].content == SUMMARY_SYSTEM_PROMPT]
    assert [model.requests.index(r) for r in summary_requests] == [3, 5, 7]
    assert all(request.tools == () for request in summary_requests)
    notices = [event for event in log.events if isinstance(event, Notice)]
    assert len(notices) == 4
    assert "automatic summaries are off" in notices[-1].text
    validate_tool_pairing(runner.history)


def test_a_failed_batch_becomes_paired_processing_errors(workspace: Path) -> None:
    manager = CompactionManager(workspace, FakeSummarizer(), id_generator=lambda: "NOT VALID")
    model = ScriptedModel(
        [
            tool_reply(
                tool_call("c1", "emit", '{"size": 40000}'), tool_call("c2", "emit", '{"size": 5}')
            ),
            text_reply("done"),
        ]
    )
    runner = runner_with(manager, model)

    runner.run("go")

    results = [message for message in runner.history if isinstance(message, ToolMessage)]
    assert [message.tool_call_id for message in results] == ["c1", "c2"]
    assert all(
        message.content.startswith("Error [tool_result_processing_error]: artifact id")
        for message in results
    )
    assert not (workspace / ".agent_tutorial").exists()


def test_the_summary_request_carries_the_prompt_and_the_cheap_history(workspace: Path) -> None:
    model = ScriptedModel(
        [emit("c1", 29_000), emit("c2", 29_000), text_reply(summary_json()), text_reply("ok")]
    )
    runner = runner_with(manager_in(workspace, ModelHistorySummarizer(model)), model)

    runner.run("go")

    summary_request = model.requests[2]
    assert summary_request.messages[0] == system_message(SUMMARY_SYSTEM_PROMPT)
    assert summary_request.messages[1:-1] == tuple(runner.history[:5])
    final_request = model.requests[3]
    assert final_request.messages == (summary_message(SUMMARY, TRANSCRIPT_1),)
    assert (workspace / TRANSCRIPT_1).exists()


def summary_json() -> str:
    return orjson.dumps(SUMMARY.to_json_object()).decode()
