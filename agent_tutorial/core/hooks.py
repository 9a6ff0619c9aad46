"""Chapter 4: hooks, user code that runs at fixed points of a run and may steer it.

Hooks are callables in a `HookRegistry`, or shell commands from `[[hooks.<Event>]]` config
tables: the event as one JSON object on stdin; exit 0 = carry on, with optional JSON on
stdout; exit 2 = block, with stderr as the reason. The semantics follow Claude Code's:

- PreToolUse: deny (also "block", exit 2, or `continue: false`) blocks the call; "ask"
  forces the approval question; "allow" is advice only and never lifts the policy's ask or
  deny. `updated_input` is merged over the arguments, re-validated, then the policy decides.
- PostToolUse: `updated_output` replaces the result text; deny withholds the result;
  `continue: false` tells the model to stop using tools.
- UserPromptSubmit: deny or `continue: false` blocks the prompt (`PromptBlocked`).
- Stop: deny or "block" (or exit 2) sends the reason back as one more user turn (the loop
  never forces twice in a row); `continue: false` lets the run end regardless.
- `additional_context` is appended to the prompt (UserPromptSubmit) or the tool result.

A hook that fails (other exit codes, unusable JSON, a timeout, more than 1 MiB on stdout
or on stderr) never crashes the run: a tool call gets a `hook_execution_error` result
(PreToolUse: the tool does not run; PostToolUse: its output is withheld), a prompt is
blocked, and a Stop hook warns and lets the run end. `HookRegistry.fire` (PreCompact,
PostCompact) raises `HookError`.

Hooks run with the whole environment (they are the user's own commands), so what they
print may hold the API key. A registry given a `TextRedaction` masks every outcome's
text (reason, additional context, replaced output) and every failure message as the hook
returns, in one place for every event, before the model, the session or the user sees it.

This module is the protocol and the rules; `adapters/hook_runner.py` runs the commands.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias, get_args

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator

from agent_tutorial.core.errors import AgentTutorialError
from agent_tutorial.core.events import EventBus, Notice
from agent_tutorial.core.loop import PromptBlocked
from agent_tutorial.core.messages import ToolCall
from agent_tutorial.core.permissions import (
    Decision,
    DecisionRecord,
    PermissionPolicy,
    decision_for,
)
from agent_tutorial.core.redaction import TextRedaction
from agent_tutorial.core.tools import (
    ParsedCall,
    ToolResult,
    describe_validation_error,
    tool_error,
)

HookEvent: TypeAlias = Literal[
    "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact", "PostCompact"
]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
TOOL_EVENTS: tuple[HookEvent, ...] = ("PreToolUse", "PostToolUse")
MAX_REASON_CHARS = 4_000


class HookError(AgentTutorialError):
    """A hook could not run, failed, timed out, or answered something unusable."""


@dataclass(frozen=True, slots=True)
class HookInput:
    """What a hook is told; the fields that do not apply to its event are None."""

    event: HookEvent
    workspace: Path
    tool_name: str | None = None
    tool_input: Mapping[str, Any] | None = None
    tool_result: ToolResult | None = None
    prompt: str | None = None
    final_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The object a command hook reads on stdin."""
        payload: dict[str, Any] = {"event": self.event, "workspace": str(self.workspace)}
        if self.tool_name is not None:
            payload["tool_name"] = self.tool_name
            payload["tool_input"] = dict(self.tool_input or {})
        if self.tool_result is not None:
            payload["tool_result"] = {
                "content": self.tool_result.content,
                "is_error": self.tool_result.is_error,
                "error_code": self.tool_result.error_code,
            }
        if self.prompt is not None:
            payload["prompt"] = self.prompt
        if self.final_text is not None:
            payload["final_text"] = self.final_text
        return payload


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """What a hook answers; the default outcome changes nothing."""

    decision: Decision | None = None
    reason: str | None = None
    updated_input: Mapping[str, Any] | None = None
    additional_context: str | None = None
    updated_output: str | None = None
    continue_: bool = True
    redactions: int = 0
    """Secrets masked in this outcome's text by the registry's redaction."""

    @property
    def blocks(self) -> bool:
        return self.decision == "deny" or not self.continue_


HookCallback: TypeAlias = Callable[[HookInput], HookOutcome]


def _compile_matcher(matcher: str | None) -> re.Pattern[str] | None:
    """None, "" and "*" match every tool; anything else must match the whole tool name."""
    if matcher in (None, "", "*"):
        return None
    try:
        return re.compile(matcher)
    except re.error as error:
        raise ValueError(f"matcher {matcher!r} is not a valid regex: {error}") from error


@dataclass(frozen=True, slots=True)
class _RedactingHook:
    """A hook whose outcome text and failure message come back with secrets masked."""

    callback: HookCallback
    redaction: TextRedaction

    def __call__(self, hook_input: HookInput) -> HookOutcome:
        try:
            outcome = self.callback(hook_input)
        except HookError as error:
            raise HookError(self.redaction.redact(str(error)).text) from None
        texts = (outcome.reason, outcome.additional_context, outcome.updated_output)
        redacted = [None if text is None else self.redaction.redact(text) for text in texts]
        count = sum(each.count for each in redacted if each is not None)
        if not count:
            return outcome
        reason, context, output = (None if each is None else each.text for each in redacted)
        return replace(
            outcome,
            reason=reason,
            additional_context=context,
            updated_output=output,
            redactions=outcome.redactions + count,
        )


class CommandHookConfig(BaseModel):
    """One `[[hooks.<Event>]]` table: a shell command run at that event."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    matcher: str | None = None
    """A regex the whole tool name must match (tool events only); omitted = every tool."""
    command: str = Field(min_length=1)
    """Run with `bash -c` in the workspace; gets the event as one JSON object on stdin."""
    timeout_s: float = Field(default=30, gt=0, le=86_400, allow_inf_nan=False)
    """Seconds before the command, and everything it started, is killed (at most a day)."""

    @field_validator("matcher")
    @classmethod
    def _matcher_compiles(cls, matcher: str | None) -> str | None:
        _compile_matcher(matcher)
        return matcher


class HooksConfig(RootModel[dict[HookEvent, tuple[CommandHookConfig, ...]]]):
    """The `[hooks]` table: event name → its command hooks, in the order they run."""

    model_config = ConfigDict(frozen=True)

    root: dict[HookEvent, tuple[CommandHookConfig, ...]] = Field(default_factory=dict)

    @field_validator("root")
    @classmethod
    def _matchers_only_on_tool_events(
        cls, root: dict[HookEvent, tuple[CommandHookConfig, ...]]
    ) -> dict[HookEvent, tuple[CommandHookConfig, ...]]:
        for event, hooks in root.items():
            if event not in TOOL_EVENTS and any(hook.matcher for hook in hooks):
                raise ValueError(f"{event} hooks have no tool name, so they take no matcher")
        return root


CommandHookFactory: TypeAlias = Callable[[CommandHookConfig, Path], HookCallback]


@dataclass(frozen=True, slots=True)
class _Registration:
    event: HookEvent
    callback: HookCallback
    matcher: re.Pattern[str] | None


class HookRegistry:
    """The hooks of one workspace, run in the order they were added."""

    def __init__(self, workspace: Path, *, redaction: TextRedaction | None = None) -> None:
        self.workspace = workspace
        self.redaction = redaction
        """Masks secrets in every outcome and failure; None leaves hook text as written."""
        self._registrations: list[_Registration] = []

    @classmethod
    def from_config(
        cls,
        config: HooksConfig,
        workspace: Path,
        command_hook: CommandHookFactory,
        *,
        redaction: TextRedaction | None = None,
    ) -> HookRegistry:
        """The configured command hooks, each made a callback by `command_hook` (the
        process runner, `adapters.hook_runner.command_hook`, lives outside core)."""
        registry = cls(workspace, redaction=redaction)
        for event, hooks in config.root.items():
            for hook in hooks:
                registry.add(event, command_hook(hook, workspace), hook.matcher)
        return registry

    def add(self, event: HookEvent, callback: HookCallback, matcher: str | None = None) -> None:
        if event not in HOOK_EVENTS:
            raise ValueError(f"unknown hook event {event!r}; expected one of {HOOK_EVENTS}")
        compiled = _compile_matcher(matcher)
        if compiled is not None and event not in TOOL_EVENTS:
            raise ValueError(f"{event} hooks have no tool name, so they take no matcher")
        self._registrations.append(_Registration(event, callback, compiled))

    def __len__(self) -> int:
        return len(self._registrations)

    def callbacks(self, event: HookEvent, tool_name: str | None = None) -> list[HookCallback]:
        """The hooks for `event` (and `tool_name`), their outcomes and failures redacted."""
        matching = [
            registration.callback
            for registration in self._registrations
            if registration.event == event
            and (registration.matcher is None or registration.matcher.fullmatch(tool_name or ""))
        ]
        if self.redaction is None:
            return matching
        return [_RedactingHook(callback, self.redaction) for callback in matching]

    def fire(self, event: HookEvent, hook_input: HookInput) -> list[HookOutcome]:
        """Run every hook for `event` and return their outcomes; raises `HookError`."""
        if hook_input.event != event:
            raise ValueError(f"fire({event!r}) got a HookInput for {hook_input.event!r}")
        return [callback(hook_input) for callback in self.callbacks(event, hook_input.tool_name)]


def command_outcome(name: str, status: int, stdout: bytes, stderr: bytes) -> HookOutcome:
    """What a command hook that exited with `status` answered (the protocol above);
    raises `HookError` for a failure. Running the command is `adapters.hook_runner`'s job."""
    if status == 2:
        reason = _decode(stderr).strip()
        return HookOutcome(decision="deny", reason=reason or f"{name} exited with 2")
    if status != 0:
        detail = _decode(stderr).strip()
        how = f"was killed by signal {-status}" if status < 0 else f"exited with {status}"
        raise HookError(f"{name} {how}" + (f": {detail}" if detail else ""))
    if not stdout.strip():
        return HookOutcome()
    try:
        reply = _CommandHookReply.model_validate_json(stdout)
    except ValidationError as error:
        problems = describe_validation_error(error, whole="value")
        raise HookError(f"{name} printed unusable JSON: {problems}") from None
    return reply.to_outcome()


class _CommandHookReply(BaseModel):
    # Unknown keys are an error: a misspelt "decison": "deny" must not silently allow.
    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Literal["allow", "deny", "ask", "block"] | None = None
    reason: str | None = None
    updated_input: dict[str, Any] | None = None
    additional_context: str | None = None
    updated_output: str | None = None
    continue_: bool = Field(default=True, alias="continue")

    def to_outcome(self) -> HookOutcome:
        return HookOutcome(
            decision="deny" if self.decision == "block" else self.decision,
            reason=self.reason,
            updated_input=self.updated_input,
            additional_context=self.additional_context,
            updated_output=self.updated_output,
            continue_=self.continue_,
        )


class HookGuard:
    """Runs the hooks around a run: a `CallGuard` (PreToolUse, the permission policy,
    PostToolUse) and a `TurnGuard` (UserPromptSubmit, Stop).

    Give the policy to this guard instead of the runner, so a hook's advice and the policy
    make one decision and the user is asked at most once per call.
    """

    def __init__(
        self,
        registry: HookRegistry,
        policy: PermissionPolicy | None,
        *,
        events: EventBus | None = None,
    ) -> None:
        self.registry = registry
        self.policy = policy
        self.events = events
        self._pending_context: dict[ToolCall, list[HookOutcome]] = {}

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        try:
            parsed, advice, context = self._pre_tool_use(parsed)
        except HookError as error:
            message = f"a PreToolUse hook failed, so {parsed.tool.name} did not run: {error}"
            return tool_error("hook_execution_error", message)
        record = self._authorize(parsed, advice)
        if record.decision != "allow":
            code = "hook_blocked" if record.source == "hook" else "permission_denied"
            return _with_context(tool_error(code, record.reason), context)
        # Keyed by the call itself (not just its id): a subagent's calls may reuse ids.
        self._pending_context[parsed.call] = context
        return parsed

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        context = self._pending_context.pop(parsed.call, [])
        try:
            result = self._post_tool_use(parsed, result)
        except HookError as error:
            message = (
                f"{parsed.tool.name} ran, but a PostToolUse hook failed, "
                f"so its result is withheld: {error}"
            )
            return tool_error("hook_execution_error", message)
        return _with_context(result, context)

    def on_prompt(self, prompt: str) -> str:
        hook_input = HookInput("UserPromptSubmit", self.registry.workspace, prompt=prompt)
        context: list[str] = []
        for callback in self.registry.callbacks("UserPromptSubmit"):
            try:
                outcome = callback(hook_input)
            except HookError as error:
                raise PromptBlocked(f"a UserPromptSubmit hook failed: {error}") from None
            if outcome.blocks:
                reason = outcome.reason or "no reason given"
                raise PromptBlocked(f"a UserPromptSubmit hook blocked the prompt: {reason}")
            if outcome.additional_context:
                context.append(outcome.additional_context)
        return "\n\n".join([prompt, *context])

    def on_stop(self, final_text: str) -> str | None:
        hook_input = HookInput("Stop", self.registry.workspace, final_text=final_text)
        reasons: list[str] = []
        for callback in self.registry.callbacks("Stop"):
            try:
                outcome = callback(hook_input)
            except HookError as error:
                self._warn(f"a Stop hook failed, so the run ends here: {error}")
                return None
            if not outcome.continue_:
                return None
            if outcome.decision == "deny":
                reasons.append(outcome.reason or "keep working on the task")
        return "Stop hook feedback:\n" + "\n".join(reasons) if reasons else None

    def _pre_tool_use(
        self, parsed: ParsedCall
    ) -> tuple[ParsedCall, DecisionRecord | None, list[HookOutcome]]:
        advice: DecisionRecord | None = None
        context: list[HookOutcome] = []  # their additional context goes with the result
        for callback in self.registry.callbacks("PreToolUse", parsed.tool.name):
            outcome = callback(self._tool_input("PreToolUse", parsed))
            context.append(outcome)
            if outcome.blocks:
                reason = f"blocked by a PreToolUse hook: {outcome.reason or 'no reason given'}"
                return parsed, decision_for(parsed, "deny", reason, "hook"), context
            if outcome.updated_input is not None:
                parsed = _with_updated_input(parsed, outcome.updated_input)
            if outcome.decision == "ask":  # "allow" is not advice: it can never lift the policy
                reason = (
                    f"a PreToolUse hook asks for approval: {outcome.reason or 'no reason given'}"
                )
                advice = decision_for(parsed, "ask", reason, "hook")
        return parsed, advice, context

    def _authorize(self, parsed: ParsedCall, advice: DecisionRecord | None) -> DecisionRecord:
        if self.policy is not None:
            return self.policy.authorize(parsed, advice=advice)
        if advice is not None and advice.decision == "ask":
            reason = f"{advice.reason}; there is no permission policy to ask the user through"
            return decision_for(parsed, "deny", reason, "no-terminal")
        return decision_for(parsed, "allow", "no permission policy", "default")

    def _post_tool_use(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        for callback in self.registry.callbacks("PostToolUse", parsed.tool.name):
            outcome = callback(self._tool_input("PostToolUse", parsed, result))
            if outcome.decision == "deny":
                reason = outcome.reason or "no reason given"
                message = f"{parsed.tool.name} ran, but a PostToolUse hook withheld its result: "
                withheld = tool_error("hook_blocked", message + reason)
                return replace(withheld, redactions=outcome.redactions)
            if outcome.updated_output is not None:  # the spooled output is no longer it
                result = replace(result, content=outcome.updated_output, whole_output=None)
            result = _with_context(result, [outcome])
            if not outcome.continue_:
                stop = outcome.reason or "a PostToolUse hook asks you to stop"
                result = _with_notes(result, [f"{stop}. Use no more tools; answer the user."])
        return result

    def _tool_input(
        self, event: HookEvent, parsed: ParsedCall, result: ToolResult | None = None
    ) -> HookInput:
        return HookInput(
            event,
            self.registry.workspace,
            tool_name=parsed.tool.name,
            tool_input=parsed.arguments_dict(),
            tool_result=result,
        )

    def _warn(self, text: str) -> None:
        if self.events is not None:
            self.events.emit(Notice("warning", text))


def _with_updated_input(parsed: ParsedCall, updated: Mapping[str, Any]) -> ParsedCall:
    merged = {**parsed.arguments_dict(), **updated}
    try:
        arguments = parsed.tool.input_model.model_validate(merged)
    except ValidationError as error:
        problems = describe_validation_error(error, whole="value")
        raise HookError(
            f"its updated_input does not fit {parsed.tool.name}'s arguments: {problems}"
        ) from None
    return ParsedCall(call=parsed.call, tool=parsed.tool, arguments=arguments)


def _with_context(result: ToolResult, outcomes: Sequence[HookOutcome]) -> ToolResult:
    """`result` with the outcomes' additional context appended, and the secrets masked in
    their text counted in its `redactions`, as the tool's own are."""
    masked = sum(outcome.redactions for outcome in outcomes)
    if masked:
        result = replace(result, redactions=result.redactions + masked)
    context = [outcome.additional_context for outcome in outcomes if outcome.additional_context]
    return _with_notes(result, context)


def _with_notes(result: ToolResult, context: Sequence[str]) -> ToolResult:
    if not context:
        return result
    notes = "\n".join(f"[hook context] {text}" for text in context)
    return replace(result, content=f"{result.content}\n\n{notes}")


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS] + " …(cut)"
