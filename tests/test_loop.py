"""Specification of the agent loop, driven by `ScriptedModel` and small real tools: turns,
pairing, errors that stop a run, and every extension point (processors, overflow recovery,
guards, guidance, turn guards, events)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pytest
from pydantic import BaseModel, Field

from agent_tutorial.core.events import (
    EventBus,
    MessageAppended,
    ModelReplied,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)
from agent_tutorial.core.loop import (
    AgentRunner,
    ContextOverflowError,
    ContextPolicy,
    FullContext,
    MaxTurnsExceeded,
    ProcessorError,
    ReplyCutOff,
    RequestGuidance,
    RunResult,
    TurnGuard,
    TurnInterrupted,
)
from agent_tutorial.core.messages import (
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolPairingError,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import ModelReply, PromptTooLongError, Usage
from agent_tutorial.core.tools import (
    ParsedCall,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    tool_error,
    tool_success,
)
from agent_tutorial.testing import ScriptedModel, ScriptedReply, text_reply, tool_reply
from tests.event_log import EventLog


class EchoInput(BaseModel):
    text: str = Field(description="Text to echo back.")


class Bench:
    """Real tools that record which calls actually ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def echo(self, arguments: EchoInput) -> ToolResult:
        self.ran.append(arguments.text)
        return tool_success(f"echo: {arguments.text}")

    def interrupt(self, arguments: EchoInput) -> ToolResult:
        self.ran.append(arguments.text)
        raise KeyboardInterrupt

    def registry(self) -> ToolRegistry:
        return ToolRegistry(
            [
                ToolDefinition("echo", "Echo text.", EchoInput, self.echo, subject_field="text"),
                ToolDefinition("hang", "Wait for Ctrl-C.", EchoInput, self.interrupt),
            ]
        )


@pytest.fixture
def bench() -> Bench:
    return Bench()


def echo(call_id: str, text: str) -> ToolCall:
    return tool_call(call_id, "echo", json.dumps({"text": text}))


def scripted(*replies: ScriptedReply) -> ScriptedModel:
    return ScriptedModel(replies)


def tool_messages(history: Sequence[ChatMessage]) -> list[ToolMessage]:
    return [message for message in history if isinstance(message, ToolMessage)]


# Turns and results


def test_plain_answer_ends_the_run_in_one_turn(bench: Bench) -> None:
    model = scripted(text_reply("Hello.", usage=Usage(10, 2, 12)))

    result = AgentRunner(model, bench.registry()).run("hi")

    assert result == RunResult(final_text="Hello.", turns=1, usage=Usage(10, 2, 12))
    model.assert_exhausted()


def test_usage_is_summed_over_turns_and_missing_usage_counts_as_zero(bench: Bench) -> None:
    model = scripted(
        dataclasses.replace(tool_reply(echo("c1", "a")), usage=Usage(10, 5, 15)),
        tool_reply(echo("c2", "b")),
        text_reply("done", usage=Usage(20, 1, 21)),
    )

    result = AgentRunner(model, bench.registry()).run("go")

    assert (result.turns, result.usage) == (3, Usage(30, 6, 36))


def test_tool_calls_run_in_order_and_results_are_appended_in_call_order(bench: Bench) -> None:
    model = scripted(
        tool_reply(echo("c1", "one"), echo("c2", "two"), echo("c3", "three")),
        text_reply("done"),
    )
    runner = AgentRunner(model, bench.registry())

    runner.run("go")

    assert bench.ran == ["one", "two", "three"]
    assert runner.history[2:5] == [
        tool_message("echo: one", "c1"),
        tool_message("echo: two", "c2"),
        tool_message("echo: three", "c3"),
    ]
    validate_tool_pairing(runner.history)


def test_bad_calls_in_a_batch_are_answered_and_the_run_goes_on(bench: Bench) -> None:
    batch = (
        echo("c1", "a"),
        tool_call("c2", "no_such_tool", "{}"),
        tool_call("c3", "echo", '{"text": '),
        echo("c4", "d"),
    )
    model = scripted(tool_reply(*batch), text_reply("recovered"))

    result = AgentRunner(model, bench.registry()).run("go")

    assert result.final_text == "recovered"
    assert bench.ran == ["a", "d"]
    seen = tool_messages(model.requests[1].messages)
    assert [message.tool_call_id for message in seen] == ["c1", "c2", "c3", "c4"]
    assert seen[1].content.startswith("Error [unknown_tool]: ")
    assert seen[2].content.startswith("Error [invalid_json]: ")


def test_every_request_the_model_sees_is_paired(bench: Bench) -> None:
    model = scripted(
        tool_reply(echo("c1", "a"), tool_call("c2", "nope", "[]")),
        tool_reply(tool_call("c3", "echo", "not json")),
        tool_reply(echo("c4", "b"), echo("c5", "c"), echo("c6", "d")),
        text_reply("done"),
    )

    AgentRunner(model, bench.registry(), system_prompt="Be terse.").run("go")

    assert len(model.requests) == 4
    for request in model.requests:
        validate_tool_pairing(request.messages)


def test_call_id_reused_from_an_earlier_turn_is_renamed(bench: Bench) -> None:
    # Some servers number calls call_0, call_1… afresh every turn.
    model = scripted(
        tool_reply(echo("call_0", "a")), tool_reply(echo("call_0", "b")), text_reply("ok")
    )
    runner = AgentRunner(model, bench.registry())

    result = runner.run("go")

    assert result.final_text == "ok"
    assert [message.tool_call_id for message in tool_messages(runner.history)] == [
        "call_0",
        "call_0_2",
    ]
    assert bench.ran == ["a", "b"]
    validate_tool_pairing(runner.history)


def test_call_id_repeated_within_one_reply_is_renamed(bench: Bench) -> None:
    model = scripted(tool_reply(echo("call_0", "a"), echo("call_0", "b")), text_reply("ok"))
    runner = AgentRunner(model, bench.registry())

    runner.run("go")

    assert tool_messages(runner.history) == [
        tool_message("echo: a", "call_0"),
        tool_message("echo: b", "call_0_2"),
    ]
    validate_tool_pairing(runner.history)


def test_system_prompt_leads_every_request_but_stays_out_of_history(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), system_prompt="Be terse.")

    runner.run("go")

    assert [request.messages[0] for request in model.requests] == [system_message("Be terse.")] * 2
    assert not any(isinstance(message, SystemMessage) for message in runner.history)


def test_without_a_system_prompt_the_request_starts_with_the_prompt(bench: Bench) -> None:
    model = scripted(text_reply("done"))

    AgentRunner(model, bench.registry()).run("go")

    assert model.requests[0].messages == (user_message("go"),)


def test_request_offers_the_registry_tools_in_order(bench: Bench) -> None:
    model = scripted(text_reply("done"))

    AgentRunner(model, bench.registry()).run("go")

    assert [spec.name for spec in model.requests[0].tools] == ["echo", "hang"]


def test_run_continues_an_existing_history(bench: Bench) -> None:
    earlier: list[ChatMessage] = [user_message("first"), assistant_message("answer")]
    model = scripted(text_reply("done"))

    AgentRunner(model, bench.registry(), history=earlier).run("second")

    assert model.requests[0].messages == (*earlier, user_message("second"))


# Errors that stop a run


def test_max_turns_stops_a_model_that_never_answers(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), tool_reply(echo("c2", "b")))
    runner = AgentRunner(model, bench.registry(), max_turns=2)

    with pytest.raises(MaxTurnsExceeded, match="2 turns"):
        runner.run("go")

    assert len(model.requests) == 2
    validate_tool_pairing(runner.history)


def test_max_turns_of_one_says_turn_in_the_singular(bench: Bench) -> None:
    runner = AgentRunner(scripted(tool_reply(echo("c1", "a"))), bench.registry(), max_turns=1)

    with pytest.raises(MaxTurnsExceeded, match="after 1 turn without"):
        runner.run("go")


def test_max_turns_below_one_is_rejected(bench: Bench) -> None:
    with pytest.raises(ValueError, match="max_turns"):
        AgentRunner(scripted(), bench.registry(), max_turns=0)


def test_unpaired_starting_history_is_rejected(bench: Bench) -> None:
    with pytest.raises(ToolPairingError):
        AgentRunner(scripted(), bench.registry(), history=[tool_message("x", "c1")])


class DropsToolResults(FullContext):
    """A broken context policy: its requests and recoveries lose the tool results."""

    def prepare(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        return [message for message in history if not isinstance(message, ToolMessage)]

    def recover_from_overflow(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        return self.prepare(history)


def test_an_unpaired_request_from_the_context_policy_is_never_sent(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), context=DropsToolResults())

    with pytest.raises(ToolPairingError, match="missing tool result"):
        runner.run("go")

    assert len(model.requests) == 1  # the first request had nothing to unpair


class RecoversWithoutResults(FullContext):
    def recover_from_overflow(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        return DropsToolResults().prepare(history)


def test_an_unpaired_recovery_is_never_sent(bench: Bench) -> None:
    history: list[ChatMessage] = [user_message("go"), assistant_message(None, [echo("c1", "a")])]
    history.append(tool_message("echo: a", "c1"))
    model = scripted(PromptTooLongError("too long"))
    runner = AgentRunner(model, bench.registry(), context=RecoversWithoutResults(), history=history)

    with pytest.raises(ToolPairingError):
        runner.run("again")

    assert len(model.requests) == 1


@pytest.mark.parametrize(
    ("finish_reason", "explanation"),
    [("length", "output-token limit"), ("content_filter", "content filter")],
)
def test_cut_off_reply_stops_the_run_with_a_clear_reason(
    bench: Bench, finish_reason: str, explanation: str
) -> None:
    reply = ModelReply(assistant_message("half an ans"), finish_reason)  # type: ignore[arg-type]

    with pytest.raises(ReplyCutOff, match=explanation):
        AgentRunner(scripted(reply), bench.registry()).run("go")


def test_tool_calls_of_a_cut_off_reply_never_run(bench: Bench) -> None:
    reply = ModelReply(assistant_message(None, [echo("c1", "a")]), "length")
    runner = AgentRunner(scripted(reply), bench.registry())

    with pytest.raises(ReplyCutOff):
        runner.run("go")

    assert bench.ran == []
    validate_tool_pairing(runner.history)


# History processor


class ClearToolResults(FullContext):
    """A history processor that hides tool output from the request (like micro-compaction)."""

    def __init__(self) -> None:
        self.seen: list[list[ChatMessage]] = []

    def prepare(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        self.seen.append(list(history))
        return [
            tool_message("[cleared]", message.tool_call_id)
            if isinstance(message, ToolMessage)
            else message
            for message in history
        ]


def test_history_processor_output_is_what_the_model_receives(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))

    AgentRunner(model, bench.registry(), context=ClearToolResults()).run("go")

    assert tool_messages(model.requests[1].messages) == [tool_message("[cleared]", "c1")]


def test_history_processor_leaves_canonical_history_unchanged(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    processor = ClearToolResults()
    runner = AgentRunner(model, bench.registry(), context=processor)

    runner.run("go")

    assert tool_messages(runner.history) == [tool_message("echo: a", "c1")]
    assert tool_messages(processor.seen[1]) == [tool_message("echo: a", "c1")]


# Tool-result processor


class Shout(FullContext):
    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        return [tool_success(result.content.upper()) for result in results]


class BrokenProcessor(FullContext):
    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        raise ProcessorError("artifact directory is read-only")


class DropsOne(FullContext):
    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        return results[1:]


def test_tool_result_processor_rewrites_the_batch_before_it_is_appended(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a"), echo("c2", "b")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), context=Shout())

    runner.run("go")

    assert tool_messages(runner.history) == [
        tool_message("ECHO: A", "c1"),
        tool_message("ECHO: B", "c2"),
    ]


@pytest.mark.parametrize("processor", [BrokenProcessor(), DropsOne()], ids=["raises", "short"])
def test_failing_tool_result_processor_gives_every_call_a_processing_error(
    bench: Bench, processor: ContextPolicy
) -> None:
    model = scripted(tool_reply(echo("c1", "a"), echo("c2", "b")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), context=processor)

    result = runner.run("go")

    results = tool_messages(runner.history)
    assert [message.tool_call_id for message in results] == ["c1", "c2"]
    for message in results:
        assert message.content.startswith("Error [tool_result_processing_error]: ")
    validate_tool_pairing(runner.history)
    assert result.final_text == "done"


# Context overflow


class ShrinkToSummary(FullContext):
    """An overflow recovery that replaces the whole history with one summary message."""

    def __init__(self) -> None:
        self.calls = 0

    def recover_from_overflow(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        self.calls += 1
        return [user_message(f"summary of {len(history)} messages")]


def test_prompt_too_long_without_recovery_is_a_context_overflow(bench: Bench) -> None:
    model = scripted(PromptTooLongError("prompt is too long"))

    with pytest.raises(ContextOverflowError, match="prompt is too long"):
        AgentRunner(model, bench.registry()).run("go")


def test_overflow_is_recovered_once_and_the_turn_succeeds(bench: Bench) -> None:
    model = scripted(PromptTooLongError("too long"), text_reply("done"))
    recovery = ShrinkToSummary()

    result = AgentRunner(model, bench.registry(), context=recovery).run("go")

    assert result.final_text == "done"
    assert recovery.calls == 1
    assert model.requests[1].messages == (user_message("summary of 1 messages"),)


def test_second_overflow_in_a_turn_ends_the_run_suggesting_compact(bench: Bench) -> None:
    model = scripted(PromptTooLongError("too long"), PromptTooLongError("still too long"))
    recovery = ShrinkToSummary()

    with pytest.raises(ContextOverflowError, match="/compact"):
        AgentRunner(model, bench.registry(), context=recovery).run("go")

    assert len(model.requests) == 2
    assert recovery.calls == 1


def test_overflow_can_be_recovered_again_in_a_later_turn(bench: Bench) -> None:
    model = scripted(
        PromptTooLongError("too long"),
        tool_reply(echo("c1", "a")),
        PromptTooLongError("too long"),
        text_reply("done"),
    )
    recovery = ShrinkToSummary()

    result = AgentRunner(model, bench.registry(), context=recovery).run("go")

    assert (result.final_text, recovery.calls) == ("done", 2)


# Call guards


class Veto:
    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        return tool_error("permission_denied", f"{parsed.tool.name} is not allowed")

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        return result


class Redact:
    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        return dataclasses.replace(parsed, arguments=EchoInput(text="[redacted]"))

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        return tool_success(result.content + " (checked)")


def test_call_guard_veto_answers_without_running_the_tool(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), guards=[Veto()])

    runner.run("go")

    assert bench.ran == []
    assert tool_messages(runner.history) == [
        tool_message("Error [permission_denied]: echo is not allowed", "c1")
    ]


def test_call_guard_can_rewrite_the_arguments(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "secret")), text_reply("done"))

    AgentRunner(model, bench.registry(), guards=[Redact()]).run("go")

    assert bench.ran == ["[redacted]"]


def test_call_guard_after_call_can_rewrite_the_result(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), guards=[Redact()])

    runner.run("go")

    assert tool_messages(runner.history) == [tool_message("echo: [redacted] (checked)", "c1")]


class ManualClock:
    """Stands in for the loop's `time` module: it moves only when a test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class SlowGuard:
    """A guard that takes 100 s before the call (a person at the approval prompt) and 2 s
    after it (a PostToolUse hook), or refuses the call after its 100 s."""

    def __init__(self, clock: ManualClock, *, refuse: bool = False) -> None:
        self.clock = clock
        self.refuse = refuse

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        self.clock.now += 100.0
        return tool_error("permission_denied", "declined") if self.refuse else parsed

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        self.clock.now += 2.0
        return result


@pytest.mark.parametrize(("refuse", "seconds"), [(False, 2.0), (True, 0.0)])
def test_a_tools_time_starts_when_the_guards_let_it_through(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, refuse: bool, seconds: float
) -> None:
    clock = ManualClock()
    monkeypatch.setattr("agent_tutorial.core.loop.time", clock)
    log = EventLog()
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    guard = SlowGuard(clock, refuse=refuse)

    AgentRunner(model, bench.registry(), guards=[guard], events=EventBus([log])).run("go")

    finished = [event for event in log.events if isinstance(event, ToolFinished)]
    assert [event.seconds for event in finished] == [seconds]


# Request guidance


class Reminder:
    def guidance(
        self, canonical: Sequence[ChatMessage], request: Sequence[ChatMessage]
    ) -> Sequence[ChatMessage]:
        return [system_message(f"Reminder: {len(canonical)} messages so far.")]


def test_guidance_is_appended_to_the_request(bench: Bench) -> None:
    model = scripted(text_reply("done"))
    guidance: list[RequestGuidance] = [Reminder()]

    AgentRunner(model, bench.registry(), guidance=guidance).run("go")

    assert model.requests[0].messages == (
        user_message("go"),
        system_message("Reminder: 1 messages so far."),
    )


def test_guidance_never_enters_canonical_history(bench: Bench) -> None:
    model = scripted(tool_reply(echo("c1", "a")), text_reply("done"))
    runner = AgentRunner(model, bench.registry(), guidance=[Reminder()])

    runner.run("go")

    assert not any(isinstance(message, SystemMessage) for message in runner.history)


# Turn guards


class Expand:
    def on_prompt(self, prompt: str) -> str:
        return f"{prompt} (with project rules)"

    def on_stop(self, final_text: str) -> str | None:
        return None


class Insist:
    """A stop guard that always asks for more work."""

    def __init__(self) -> None:
        self.stops: list[str] = []

    def on_prompt(self, prompt: str) -> str:
        return prompt

    def on_stop(self, final_text: str) -> str | None:
        self.stops.append(final_text)
        return "Run the tests before you stop."


def test_turn_guard_rewrites_the_prompt(bench: Bench) -> None:
    model = scripted(text_reply("done"))
    runner = AgentRunner(model, bench.registry(), turn_guards=[Expand()])

    runner.run("fix it")

    assert runner.history[0] == user_message("fix it (with project rules)")
    assert model.requests[0].messages[0] == user_message("fix it (with project rules)")


def test_stop_guard_that_lets_go_ends_the_run(bench: Bench) -> None:
    model = scripted(text_reply("done"))

    assert AgentRunner(model, bench.registry(), turn_guards=[Expand()]).run("go").turns == 1


def test_stop_guard_forces_one_more_turn_with_its_message(bench: Bench) -> None:
    model = scripted(text_reply("first"), text_reply("second"))
    guard = Insist()
    runner = AgentRunner(model, bench.registry(), turn_guards=[guard])

    result = runner.run("go")

    assert (result.final_text, result.turns) == ("second", 2)
    assert guard.stops[0] == "first"
    assert runner.history[2] == user_message("Run the tests before you stop.")


def test_stop_guard_never_forces_twice_in_a_row(bench: Bench) -> None:
    # Only two replies are scripted: a third model call would raise UnexpectedModelCall.
    model = scripted(text_reply("first"), text_reply("second"))
    guards: list[TurnGuard] = [Insist()]

    AgentRunner(model, bench.registry(), turn_guards=guards).run("go")

    assert len(model.requests) == 2


def test_stop_guard_may_force_again_after_the_model_went_back_to_work(bench: Bench) -> None:
    model = scripted(
        text_reply("first"),
        tool_reply(echo("c1", "checking")),
        text_reply("second"),
        text_reply("third"),
    )
    guard = Insist()

    result = AgentRunner(model, bench.registry(), turn_guards=[guard]).run("go")

    assert result.final_text == "third"
    assert len(model.requests) == 4


# Interrupts


def interrupted_batch() -> ModelReply:
    return tool_reply(echo("c1", "a"), tool_call("c2", "hang", '{"text": "b"}'), echo("c3", "c"))


def test_interrupt_during_a_tool_keeps_history_paired(bench: Bench) -> None:
    runner = AgentRunner(scripted(interrupted_batch()), bench.registry())

    with pytest.raises(TurnInterrupted):
        runner.run("go")

    validate_tool_pairing(runner.history)
    assert tool_messages(runner.history) == [
        tool_message("echo: a", "c1"),
        tool_message("Error [interrupted]: the user interrupted this tool call", "c2"),
        tool_message("Error [interrupted]: the user interrupted this tool call", "c3"),
    ]


def test_calls_after_an_interrupted_one_never_run(bench: Bench) -> None:
    with pytest.raises(TurnInterrupted):
        AgentRunner(scripted(interrupted_batch()), bench.registry()).run("go")

    assert bench.ran == ["a", "b"]


def test_the_interrupted_call_finishes_as_an_interrupted_result(bench: Bench) -> None:
    log = EventLog()
    runner = AgentRunner(scripted(interrupted_batch()), bench.registry(), events=EventBus([log]))

    with pytest.raises(TurnInterrupted):
        runner.run("go")

    tool_events = [
        (type(event).__name__, event.call.id, getattr(event, "result", None))
        for event in log.events
        if isinstance(event, ToolStarted | ToolFinished)
    ]
    interrupted = tool_error("interrupted", "the user interrupted this tool call")
    assert tool_events == [  # c3 never started, so it never finishes either
        ("ToolStarted", "c1", None),
        ("ToolFinished", "c1", tool_success("echo: a")),
        ("ToolStarted", "c2", None),
        ("ToolFinished", "c2", interrupted),
    ]
    finished_at = next(
        index
        for index, event in enumerate(log.events)
        if isinstance(event, ToolFinished) and event.call.id == "c2"
    )
    appended = [event for event in log.events[finished_at:] if isinstance(event, MessageAppended)]
    assert len(appended) == 3  # the batch's results enter history after the finished event


def test_the_session_goes_on_after_an_interrupt(bench: Bench) -> None:
    model = scripted(interrupted_batch(), text_reply("ok"))
    runner = AgentRunner(model, bench.registry())
    with pytest.raises(TurnInterrupted):
        runner.run("go")

    assert runner.run("again").final_text == "ok"
    validate_tool_pairing(model.requests[1].messages)


# Events


def test_events_arrive_in_order(bench: Bench) -> None:
    call = echo("c1", "a")
    first = tool_reply(call, content="Looking.")
    last = text_reply("Done.", usage=Usage(3, 1, 4))
    log = EventLog()

    AgentRunner(scripted(first, last), bench.registry(), events=EventBus([log])).run("go")

    durations = [event.seconds for event in log.events if isinstance(event, ToolFinished)]
    assert len(durations) == 1
    assert durations[0] >= 0
    assert [
        dataclasses.replace(event, seconds=0.0) if isinstance(event, ToolFinished) else event
        for event in log.events
    ] == [
        MessageAppended(user_message("go")),
        TurnStarted(1),
        TextDelta("Looking."),
        ModelReplied(first.message, "tool_calls", None),
        MessageAppended(first.message),
        ToolStarted(call, "a"),
        ToolFinished(call, tool_success("echo: a"), 0.0),
        MessageAppended(tool_message("echo: a", "c1")),
        TurnStarted(2),
        TextDelta("Done."),
        ModelReplied(last.message, "stop", Usage(3, 1, 4)),
        MessageAppended(last.message),
    ]
