"""The agent loop every chapter shares.

One turn: build the request history from canonical history, ask the model, append its
reply, run the tool calls it asked for, append their results, repeat until the model
answers without tool calls. Features plug in through small protocols; the loop itself
has no UI, SDK or filesystem code.

Canonical history is append-only, with two documented rewrites of a message *before* it is
appended: a reply's duplicate call ids are renamed, and tool arguments over the registry's
cap are shortened (`_as_recorded`). Each tool result is redacted right after the tool
returns, before guards, events, the context policy and history see it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Protocol

from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.events import (
    EventBus,
    MessageAppended,
    ModelReplied,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)
from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    PairingTracker,
    ToolCall,
    ToolMessage,
    assistant_message,
    project_context_message,
    system_message,
    tool_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import (
    ZERO_USAGE,
    ModelClient,
    ModelReply,
    PromptTooLongError,
    Usage,
    make_request,
)
from agent_tutorial.core.repeats import RepeatedCalls
from agent_tutorial.core.tools import (
    ParsedCall,
    ToolRegistry,
    ToolResult,
    shorten_oversized_arguments,
    tool_error,
)


class ContextPolicy(Protocol):
    """What the model sees of the conversation, in three roles (chapter 8: compaction):
    build each request from canonical history, rewrite a finished batch of tool results
    before it enters canonical history, and shorten a history the provider refused."""

    def prepare(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        """The request history for the next model call; canonical history stays as it is."""
        ...

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        """The batch as it enters canonical history: same length and order.
        Raises `ProcessorError` when it cannot."""
        ...

    def recover_from_overflow(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        """A shorter request history after a too-long reply; called at most once a turn.
        Raises `ContextOverflowError` when it cannot."""
        ...


class FullContext:
    """Chapters 1-7: every request carries the whole canonical history, results enter it
    as they are, and a history the provider refuses cannot be shortened."""

    def prepare(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        return history

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        return results

    def recover_from_overflow(self, history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        raise ContextOverflowError("the conversation no longer fits")


class ResultRedaction(Protocol):
    """Masks secrets in a tool's result right after the tool returns, so that hooks,
    events, the session log, the context policy and the model see only the masked text."""

    def redact_result(self, result: ToolResult) -> ToolResult: ...


class NoRedaction:
    """Results as the tools returned them (tests and embedders that redact elsewhere)."""

    def redact_result(self, result: ToolResult) -> ToolResult:
        return result


class ProcessorError(AgentTutorialError):
    """A processor could not do its work; the loop turns this into paired tool errors."""


class CallGuard(Protocol):
    """Runs around each tool call (permissions, hooks). Returning a result vetoes the call."""

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult: ...

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult: ...


class RequestGuidance(Protocol):
    """Adds request-only system messages (reminders) after the request history."""

    def guidance(
        self, canonical: Sequence[ChatMessage], request: Sequence[ChatMessage]
    ) -> Sequence[ChatMessage]: ...


class TurnGuard(Protocol):
    """Sees the prompt before the run and the final answer before the run ends (hooks)."""

    def on_prompt(self, prompt: str) -> str: ...

    def on_stop(self, final_text: str) -> str | None:
        """Return a message to force one more turn, or None to let the run end."""
        ...


class AgentRunError(AgentTutorialError):
    """The run cannot go on; the CLI prints `str(error)` and exits 1."""


class MaxTurnsExceeded(AgentRunError):
    pass


class ReplyCutOff(AgentRunError):
    pass


class ContextOverflowError(AgentRunError):
    pass


class PromptBlocked(AgentRunError):
    pass


class RepeatedCallError(AgentRunError):
    """The model kept making the same call with nothing changed in between (`core.repeats`)."""


class TurnInterrupted(AgentRunError):
    """Ctrl-C during a turn; history stays paired and the session can go on."""


@dataclass(frozen=True, slots=True)
class RunResult:
    final_text: str
    turns: int
    usage: Usage


@dataclass(slots=True)
class _RunningCall:
    """A tool call between its start and finish events, and when its tool began."""

    call: ToolCall
    started: float | None = None
    """Set once the guards let the call through; a call they refused took no tool time."""

    def seconds(self) -> float:
        return 0.0 if self.started is None else time.monotonic() - self.started


INTERRUPTED_ANSWER = "[interrupted by the user]"
EMPTY_REPLY_FOLLOW_UP = (
    "Your last reply was empty. Answer my request now, using the tool results above "
    "(or call a tool if you still need one)."
)
"""Sent once when the model replies with nothing right after tool results."""
DEFAULT_MAX_TURNS = 100
"""Model calls one prompt may take; `Settings.max_turns` starts from it."""


class AgentRunner:
    def __init__(
        self,
        model: ModelClient,
        tools: ToolRegistry,
        *,
        system_prompt: str = "",
        project_context: str = "",
        max_turns: int = DEFAULT_MAX_TURNS,
        context: ContextPolicy | None = None,
        redaction: ResultRedaction | None = None,
        guards: Sequence[CallGuard] = (),
        guidance: Sequence[RequestGuidance] = (),
        turn_guards: Sequence[TurnGuard] = (),
        events: EventBus | None = None,
        history: Sequence[ChatMessage] = (),
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self._pairing = PairingTracker.of(history)  # kept as messages are appended
        self.model = model
        self.tools = tools
        self.system_prompt = system_prompt
        self.project_context = project_context
        self.max_turns = max_turns
        self.context: ContextPolicy = context or FullContext()
        self.redaction: ResultRedaction = redaction or NoRedaction()
        self.guards = list(guards)
        self.guidance = list(guidance)
        self.turn_guards = list(turn_guards)
        self.events = events or EventBus()
        self.history: list[ChatMessage] = list(history)  # canonical, append-only
        self._streamed: list[str] = []  # the text of the reply being received
        self._running: _RunningCall | None = None  # the call between its start and finish events
        self._repeats = RepeatedCalls()
        self._sent: Sequence[ChatMessage] = self.history  # the request history last sent

    def run(self, prompt: str) -> RunResult:
        for guard in self.turn_guards:
            prompt = guard.on_prompt(prompt)
        self._append(user_message(prompt))
        self._repeats.new_prompt()
        usage = ZERO_USAGE
        just_forced = False  # another turn may be forced, never twice in a row
        for turn in range(1, self.max_turns + 1):
            self.events.emit(TurnStarted(turn))
            reply = self._ask_model()
            usage = usage + (reply.usage or ZERO_USAGE)
            self._append(self._as_recorded(reply.message))
            if reply.message.tool_calls:
                self._run_tools(reply.message)
                self._stop_if_stuck()
                just_forced = False
                continue
            final_text = reply.message.content or ""
            follow_up = None if just_forced else self._follow_up(final_text)
            if follow_up is None:
                return RunResult(final_text=final_text, turns=turn, usage=usage)
            just_forced = True
            self._append(user_message(follow_up))
        turns = "1 turn" if self.max_turns == 1 else f"{self.max_turns} turns"
        raise MaxTurnsExceeded(f"stopped after {turns} without a final answer")

    def _ask_model(self) -> ModelReply:
        """The model's reply; Ctrl-C before it is complete still ends the turn with an
        assistant message (what had streamed, marked as interrupted), so the next prompt
        does not follow the last one with no reply between them."""
        self._streamed.clear()
        try:
            return self._ask_model_uninterrupted()
        except KeyboardInterrupt:
            self._append(assistant_message(_interrupted_answer("".join(self._streamed))))
            raise TurnInterrupted("interrupted while the model was answering") from None

    def _ask_model_uninterrupted(self) -> ModelReply:
        try:
            reply = self._complete(self._request_history())
        except PromptTooLongError as error:
            reply = self._complete_after_overflow(error)
        unique = _with_unique_call_ids(reply.message, self._pairing.call_ids)
        reply = replace(reply, message=unique)
        self.events.emit(ModelReplied(reply.message, reply.finish_reason, reply.usage))
        self._check_finish(reply)
        return reply

    def _request_history(self) -> Sequence[ChatMessage]:
        return self._paired(self.context.prepare(self.history))

    def _complete_after_overflow(self, error: PromptTooLongError) -> ModelReply:
        """One retry with the history the context policy shortens after the refusal."""
        try:
            recovered = self._paired(self.context.recover_from_overflow(self.history))
        except ContextOverflowError as cannot:
            raise ContextOverflowError(f"{cannot}: {error}") from error
        try:
            return self._complete(recovered)
        except PromptTooLongError as again:
            raise ContextOverflowError(
                f"still too long after compacting ({again}); try /compact or a fresh session"
            ) from again

    def _paired(self, request_history: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
        """The context policy's history, checked unless it is canonical history itself,
        which `_append` keeps paired."""
        if request_history is not self.history:
            validate_tool_pairing(request_history)
        return request_history

    def _as_recorded(self, message: AssistantMessage) -> AssistantMessage:
        """The reply as canonical history keeps it. The one exception to append-only
        history: tool arguments over the registry's cap are replaced by a note before the
        reply is appended. Their call is refused anyway (the registry answers it with an
        error), and a 10 MB argument would otherwise travel with every later request."""
        return shorten_oversized_arguments(message, self.tools.max_argument_bytes)

    def _complete(self, request_history: Sequence[ChatMessage]) -> ModelReply:
        guidance = [
            message
            for provider in self.guidance
            for message in provider.guidance(self.history, request_history)
        ]
        # One tuple, built once: in chapters 1-7 the request is the whole history.
        messages = (*self._framing(), *request_history, *guidance)
        self._sent = request_history
        request = make_request(messages, self.tools.specs(), on_text=self._emit_text)
        return self.model.complete(request)

    def _framing(self) -> tuple[ChatMessage, ...]:
        """What goes before the history: the system prompt, then the project's part (where
        it is, its instructions) as a user message of its own, as Codex CLI sends its
        environment context. Chat templates put the tools right after the system prompt;
        with nothing per-project in it, the system prompt and the tools are the same in
        every project and session, and a server's prompt cache keeps them."""
        system = (system_message(self.system_prompt),) if self.system_prompt else ()
        project = (project_context_message(self.project_context),) if self.project_context else ()
        return (*system, *project)

    def _emit_text(self, text: str) -> None:
        self._streamed.append(text)
        self.events.emit(TextDelta(text))

    def _check_finish(self, reply: ModelReply) -> None:
        if reply.finish_reason == "length":
            raise ReplyCutOff("the model's reply was cut off at its output-token limit")
        if reply.finish_reason == "content_filter":
            raise ReplyCutOff("the provider's content filter stopped the reply")

    def _run_tools(self, message: AssistantMessage) -> None:
        """Run the batch and append its results; Ctrl-C at any point still answers every
        call, so history stays paired and the session can go on."""
        self._repeats.forget_unseen(self.history, self._sent)
        first_result_at = len(self.history)
        results: list[ToolResult] = []
        try:
            for call in message.tool_calls:
                results.append(self._run_one_tool(call))
            self._record_results(message.tool_calls, results)
        except KeyboardInterrupt:
            self._finish_interrupted_call()
            self._answer_interrupted_batch(message.tool_calls, results, first_result_at)
            raise TurnInterrupted("interrupted while running tools") from None
        finally:
            _close_whole_outputs(results)

    def _finish_interrupted_call(self) -> None:
        """The call Ctrl-C cut short is a result like any other: it gets its finished event
        (the terminal's ✗ line, stream-json's `tool_finished`, a count in `tool_calls`)."""
        running, self._running = self._running, None
        if running is None:
            return
        # Ctrl-C again: answering the batch below matters more than this report.
        with suppress(KeyboardInterrupt):
            self.events.emit(ToolFinished(running.call, _interrupted_result(), running.seconds()))

    def _answer_interrupted_batch(
        self, calls: Sequence[ToolCall], results: list[ToolResult], first_result_at: int
    ) -> None:
        if len(results) < len(calls):  # a tool was interrupted: keep what finished before it
            padding = [_interrupted_result()] * (len(calls) - len(results))
            try:
                self._record_results(calls, [*results, *padding])
                return
            except KeyboardInterrupt:
                pass  # Ctrl-C again, during processing: answer what is left below
        # Processing or appending was cut short; results it did not append stay out, since
        # unprocessed they might be too large for canonical history.
        answered = {
            message.tool_call_id
            for message in self.history[first_result_at:]
            if isinstance(message, ToolMessage)
        }
        for call in calls:
            if call.id not in answered:
                self._append(tool_message(_interrupted_result().content, call.id))

    def _run_one_tool(self, call: ToolCall) -> ToolResult:
        parsed = self.tools.parse(call)
        self.events.emit(
            ToolStarted(call, "" if isinstance(parsed, ToolResult) else parsed.subject)
        )
        running = self._running = _RunningCall(call)
        result = self._repeats.refusal(call) or self._run_parsed(call, parsed, running)
        self._running = None
        self.events.emit(ToolFinished(call, result, running.seconds()))
        return result

    def _run_parsed(
        self, call: ToolCall, parsed: ParsedCall | ToolResult, running: _RunningCall
    ) -> ToolResult:
        """The call's result (the registry's error for one that did not parse), noted as a
        repeat when the same call already ran with nothing changed since."""
        if isinstance(parsed, ToolResult):
            return self._repeats.record(call, parsed, may_change=False)
        result = self._guarded_invoke(parsed, running)
        return self._repeats.record(call, result, may_change=parsed.tool.effect != "read")

    def _stop_if_stuck(self) -> None:
        """After a batch (history is paired), end the turn if a call was made once too often."""
        stuck = self._repeats.stuck
        if stuck is not None:
            raise RepeatedCallError(
                f"the model made the same call ({stuck.name} {stuck.arguments}) "
                f"{self._repeats.limit + 1} times with nothing changed in between; stopped"
            )

    def _guarded_invoke(self, parsed: ParsedCall, running: _RunningCall) -> ToolResult:
        for guard in self.guards:
            try:
                checked = guard.before_call(parsed)
            except OSError as error:  # a path the policy could not look at: tell the model
                return tool_error("io_error", f"{type(error).__name__}: {error}")
            if isinstance(checked, ToolResult):
                return self.redaction.redact_result(checked)
            parsed = checked
        # The tool's time starts here: the guards' before it (a person's wait at the
        # approval prompt among them) is not the tool's.
        running.started = time.monotonic()
        result = self.redaction.redact_result(self.tools.invoke(parsed))
        for guard in self.guards:
            result = guard.after_call(parsed, result)
        return result

    def _record_results(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> None:
        for call, result in zip(calls, self._process_results(results), strict=True):
            self._append(tool_message(result.content, call.id))

    def _process_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        try:
            processed = self.context.process_tool_results(results)
        except (ProcessorError, OSError) as error:
            return [_processing_error(str(error)) for _ in results]
        if len(processed) != len(results):
            reason = f"processor returned {len(processed)} results for {len(results)} calls"
            return [_processing_error(reason) for _ in results]
        return processed

    def _follow_up(self, final_text: str) -> str | None:
        """What forces one more turn: a Stop guard's message, or, for an empty reply right
        after tool results, a request to answer (small models stop there, saying nothing)."""
        for guard in self.turn_guards:
            follow_up = guard.on_stop(final_text)
            if follow_up is not None:
                return follow_up
        after_results = len(self.history) > 1 and isinstance(self.history[-2], ToolMessage)
        return EMPTY_REPLY_FOLLOW_UP if after_results and not final_text.strip() else None

    def _append(self, message: ChatMessage) -> None:
        self._pairing.append(message)  # a message that would unpair history never enters
        self.history.append(message)
        self.events.emit(MessageAppended(message))


def _interrupted_answer(streamed: str) -> str:
    if not streamed.strip():
        return INTERRUPTED_ANSWER
    return f"{streamed.rstrip()}\n\n{INTERRUPTED_ANSWER}"


def _close_whole_outputs(results: Sequence[ToolResult]) -> None:
    """Spooled outputs live until the batch is recorded (chapter 8 persists them)."""
    for result in results:
        if result.whole_output is not None:
            result.whole_output.close()


def _interrupted_result() -> ToolResult:
    return tool_error("interrupted", "the user interrupted this tool call")


def _processing_error(reason: str) -> ToolResult:
    return tool_error("tool_result_processing_error", reason)


def _with_unique_call_ids(message: AssistantMessage, used: set[str]) -> AssistantMessage:
    """Renames call ids already `used` in the history or earlier in the same message.

    Some servers number calls `call_0`, `call_1`… afresh every turn; pairing needs each id
    once per history, and a repeated id would leave canonical history unusable.
    """
    if not message.tool_calls:
        return message
    in_this_message: set[str] = set()
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        call_id, suffix = call.id, 1
        while call_id in used or call_id in in_this_message:
            suffix += 1
            call_id = f"{call.id}_{suffix}"
        in_this_message.add(call_id)
        calls.append(call if call_id == call.id else replace(call, id=call_id))
    return replace(message, tool_calls=tuple(calls))
