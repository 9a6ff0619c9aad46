"""Chapter 3: the permission policy that decides, for every tool call, allow, ask or deny.

A decision comes from hard workspace boundaries (never lifted), then the user's rules, then
the permission mode's default for the tool's effect; "ask" goes to an `Approver` (a terminal
prompt), and without one it becomes a deny whose reason tells the model what the user can do.

"always" remembers an approval for the session: for a tool whose effect is "execute" (bash)
it covers that exact command only, since a prefix would also approve `git status; rm -rf ~`;
for any other tool it covers every call of that tool (still inside the hard boundaries).
It answers the mode's default question only: a rule that asks, asks every time.
The boundaries check file-tool paths; what bash may touch is the operating system's sandbox's
business (`core/sandbox.py`), where the session has one. A bash command confined to writing
in the workspace, with the network off, can do no more than an edit, so `accept-edits`
lets it run without asking; `ask` still asks (the sandbox bounds a command, it does not
make it what the user wanted), and without a sandbox bash asks in both.

An allow rule never covers more than it appears to: on bash it applies only to a plain
command (`core.plain_commands`: nothing chained, piped, redirected, substituted or expanded,
not run through another program such as `env`, no option that writes a file such as git's
`--output=F`), and on a path it must match the
real path, so `^docs/` allows neither `docs/../src/x` nor a symlink out of `docs/`.

A rule's regex is searched within `RULE_MATCH_TIMEOUT_S` of processor time, so a pattern
that backtracks badly (`^(a|a)*$`) cannot stall every call; one that runs out of time still
decides, the safe way: a deny or ask rule counts as matching, an allow rule as not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, TypeAlias, get_args

import regex
from pydantic import BaseModel, ConfigDict, field_validator

from agent_tutorial.core.paths import (
    Location,
    WorkspacePathError,
    WorkspacePaths,
    write_refusal,
)
from agent_tutorial.core.plain_commands import why_not_plain
from agent_tutorial.core.tools import (
    Effect,
    FileChange,
    ParsedCall,
    ToolDefinition,
    ToolResult,
    tool_error,
)

Decision: TypeAlias = Literal["allow", "ask", "deny"]
PermissionMode: TypeAlias = Literal["ask", "accept-edits", "auto"]


@dataclass(frozen=True, slots=True)
class DeclinedWithInstructions:
    """The answer `t`, "no, and do this instead": the words go to the model with the denial."""

    instead: str


ApprovalAnswer: TypeAlias = Literal["yes", "no", "always"] | DeclinedWithInstructions
DecisionSource: TypeAlias = Literal[
    "default", "rule", "boundary", "session", "hook", "user", "no-terminal"
]

_STRENGTH: dict[Decision, int] = {"allow": 0, "ask": 1, "deny": 2}

RULE_MATCH_TIMEOUT_S = 0.5
"""How long one rule's regex may search one call's subjects, in seconds of processor time
(the regex module's clock, so a busy machine stretches it on the wall as it does all
work): half a second, so that a check, overruns included, costs less than a second."""

_MODE_DEFAULTS: dict[PermissionMode, dict[Effect, Decision]] = {
    "ask": {"read": "allow", "write": "ask", "execute": "ask"},
    "accept-edits": {"read": "allow", "write": "allow", "execute": "ask"},
    "auto": {"read": "allow", "write": "allow", "execute": "allow"},
}


def merge_decisions(*decisions: Decision) -> Decision:
    """The strictest of the decisions: deny beats ask beats allow (none at all = allow)."""
    return max(decisions, key=_STRENGTH.__getitem__, default="allow")


class PermissionRule(BaseModel):
    """One user rule from `[[permissions.rules]]` in the project config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """The tool's name, or a glob of names: "*" for every tool, `mcp__time__*` for every
    tool of the MCP server `time` (tool names hold no glob characters)."""
    pattern: str | None = None
    """A regex searched in the call's subject (the bash command or the path); None = any."""
    behavior: Decision
    """What a matching call gets: allow, ask or deny."""

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                regex.compile(pattern)
            except regex.error as error:
                raise ValueError(f"pattern {pattern!r} is not a valid regex: {error}") from error
        return pattern

    def matches(
        self,
        tool_name: str,
        subjects: Sequence[str],
        *,
        timeout_s: float = RULE_MATCH_TIMEOUT_S,
    ) -> bool:
        """Whether the rule covers a call of `tool_name` on any of `subjects`. A search
        that runs out of `timeout_s` (shared by the subjects) counts as the safe answer for
        the rule's behavior: matching for deny and ask, not matching for allow."""
        if not fnmatchcase(tool_name, self.tool):
            return False
        if self.pattern is None:
            return True
        each_s = timeout_s / max(len(subjects), 1)
        try:
            return any(
                regex.search(self.pattern, subject, timeout=each_s) is not None
                for subject in subjects
            )
        except TimeoutError:
            return self.behavior != "allow"

    def describe(self) -> str:
        where = "" if self.pattern is None else f" pattern={self.pattern!r}"
        return f"rule tool={self.tool!r}{where} behavior={self.behavior!r}"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the user is asked to approve."""

    tool_name: str
    subject: str
    arguments: Mapping[str, Any]
    reason: str
    sandbox: str | None = None
    """How the call will be confined (`workspace-write, network off`); None: unconfined."""
    change: FileChange | None = None
    """The file change the call would make, shown as a diff."""


class Approver(Protocol):
    """Asks the user about one call (the terminal prompt; scripted in tests)."""

    def approve(self, request: ApprovalRequest) -> ApprovalAnswer: ...


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision about one call, with why and where it came from (for logs and the model)."""

    decision: Decision
    reason: str
    source: DecisionSource
    tool_name: str
    subject: str
    call_id: str


def decision_for(
    parsed: ParsedCall, decision: Decision, reason: str, source: DecisionSource
) -> DecisionRecord:
    return DecisionRecord(
        decision=decision,
        reason=reason,
        source=source,
        tool_name=parsed.tool.name,
        subject=parsed.subject,
        call_id=parsed.call.id,
    )


def denial_result(record: DecisionRecord) -> ToolResult:
    """The paired tool error the model reads when a call is not allowed."""
    return tool_error("permission_denied", record.reason)


class PermissionPolicy:
    """Decides every tool call; also a `CallGuard`, so it can sit in the runner's guards.

    With hooks (chapter 4) pass the policy to `HookGuard` instead of the runner's guards,
    so PreToolUse advice and the policy are merged into one decision and one question.
    """

    def __init__(
        self,
        workspace: WorkspacePaths,
        *,
        mode: PermissionMode = "ask",
        rules: Sequence[PermissionRule] = (),
        approver: Approver | None = None,
        on_decision: Callable[[DecisionRecord], None] | None = None,
    ) -> None:
        if mode not in get_args(PermissionMode):
            raise ValueError(
                f"permission mode must be one of {get_args(PermissionMode)}, got {mode!r}"
            )
        self.workspace = workspace
        self.mode: PermissionMode = mode
        self.rules = tuple(rules)
        self.approver = approver
        self.on_decision = on_decision
        self._approved: set[tuple[str, str | None]] = set()

    def decide(self, parsed: ParsedCall) -> DecisionRecord:
        """The policy's decision without asking anyone or reporting it."""
        location = self._locate(parsed)
        boundary = self._boundary_violation(parsed, location)
        if boundary is not None:
            return decision_for(parsed, "deny", boundary, "boundary")
        record = self._rule_decision(parsed, location) or self._default_decision(parsed)
        uncovered = self._uncovered_by_allow_rule(parsed) if record.source == "default" else None
        if uncovered is not None:
            record = replace(record, reason=f"{record.reason}; {uncovered}")
        approved = self._approval_key(parsed) in self._approved
        if record.decision == "ask" and record.source == "default" and approved:
            return decision_for(
                parsed, "allow", "the user approved this for the session", "session"
            )
        return record

    def authorize(
        self, parsed: ParsedCall, *, advice: DecisionRecord | None = None
    ) -> DecisionRecord:
        """The final decision: the policy merged with `advice` (a hook's), the user asked if
        needed, and the outcome reported to `on_decision`."""
        record = self.decide(parsed)
        if advice is not None and _STRENGTH[advice.decision] > _STRENGTH[record.decision]:
            record = advice
        if record.decision == "ask":
            record = self._ask(parsed, record)
        if self.on_decision is not None:
            self.on_decision(record)
        return record

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        record = self.authorize(parsed)
        return parsed if record.decision == "allow" else denial_result(record)

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        return result

    def _locate(self, parsed: ParsedCall) -> Location | WorkspacePathError | None:
        """Where the subject lies in the workspace (or why it lies nowhere there), looked
        up once for both the boundary check and the rules; None when neither needs it."""
        tool = parsed.tool
        writes_a_path = tool.effect == "write" and tool.subject_field is not None
        names_a_path = tool.effect != "execute" and bool(parsed.subject)
        if not (writes_a_path or names_a_path):
            return None
        try:
            return self.workspace.locate(parsed.subject)
        except WorkspacePathError as error:
            return error

    def _boundary_violation(
        self, parsed: ParsedCall, location: Location | WorkspacePathError | None
    ) -> str | None:
        if parsed.tool.effect != "write" or parsed.tool.subject_field is None:
            return None
        assert location is not None  # `_locate` looks for every write tool with a subject
        if isinstance(location, WorkspacePathError):
            return f"{parsed.tool.name} may only write inside the workspace: {location}"
        protected = write_refusal(location)
        if protected is not None:
            return (
                f"{parsed.tool.name} may not write into {protected} ({parsed.subject!r} "
                f"resolves to {location.relative}); no mode or rule can allow this"
            )
        return None

    def _rule_decision(
        self, parsed: ParsedCall, location: Location | WorkspacePathError | None
    ) -> DecisionRecord | None:
        subjects = self._rule_subjects(parsed, location)
        matching = [rule for rule in self.rules if _rule_applies(rule, parsed, subjects)]
        if not matching:
            return None
        decision = merge_decisions(*(rule.behavior for rule in matching))
        deciding = next(rule for rule in matching if rule.behavior == decision)
        return decision_for(parsed, decision, f"{decision} by {deciding.describe()}", "rule")

    def _uncovered_by_allow_rule(self, parsed: ParsedCall) -> str | None:
        """Why an allow rule whose pattern matches this command does not cover it (it is
        not plain), so the user and the model learn what to change; None otherwise. Called
        only for a default decision: a deny or ask rule that matched would have decided."""
        if not _runs_a_command(parsed.tool):
            return None
        why = why_not_plain(parsed.subject)
        if why is None:
            return None
        rule = next(
            (rule for rule in self.rules if rule.matches(parsed.tool.name, [parsed.subject])),
            None,
        )
        return None if rule is None else f"{rule.describe()} does not cover it: {why}"

    def _rule_subjects(
        self, parsed: ParsedCall, location: Location | WorkspacePathError | None
    ) -> tuple[str, ...]:
        """The raw subject, and for paths also the workspace-relative real path, so a deny
        rule on `^secrets/` also catches `./secrets/x` and `/abs/workspace/secrets/x`."""
        if not isinstance(location, Location):  # a command, no subject, or outside the workspace
            return (parsed.subject,)
        return (parsed.subject, location.relative.as_posix())

    def _default_decision(self, parsed: ParsedCall) -> DecisionRecord:
        effect = parsed.tool.effect
        if self.mode == "accept-edits" and _confined_like_an_edit(parsed.tool):
            reason = (
                f"sandboxed {effect} tools ({_sandbox_text(parsed.tool)}) are allowed in "
                f"permission mode {self.mode!r}: they can change no more than an edit can"
            )
            return decision_for(parsed, "allow", reason, "default")
        decision = _MODE_DEFAULTS[self.mode][effect]
        verdict = {"allow": "are allowed", "ask": "need approval", "deny": "are denied"}[decision]
        reason = f"{effect} tools {verdict} in permission mode {self.mode!r}"
        return decision_for(parsed, decision, reason, "default")

    def _ask(self, parsed: ParsedCall, record: DecisionRecord) -> DecisionRecord:
        if self.approver is None:
            return decision_for(parsed, "deny", _no_terminal_reason(parsed, record), "no-terminal")
        request = ApprovalRequest(
            tool_name=parsed.tool.name,
            subject=parsed.subject,
            arguments=parsed.arguments_dict(),
            reason=record.reason,
            sandbox=_sandbox_text(parsed.tool),
            change=parsed.tool.preview(parsed.arguments) if parsed.tool.preview else None,
        )
        answer = self.approver.approve(request)
        if answer == "always":
            self._approved.add(self._approval_key(parsed))
            return decision_for(parsed, "allow", "the user approved this for the session", "user")
        if answer == "yes":
            return decision_for(parsed, "allow", "the user approved this call", "user")
        if isinstance(answer, DeclinedWithInstructions):
            declined = f"the user declined this {parsed.tool.name} call and says instead"
            return decision_for(parsed, "deny", f"{declined}: {answer.instead}", "user")
        return decision_for(
            parsed, "deny", f"the user declined this {parsed.tool.name} call", "user"
        )

    def _approval_key(self, parsed: ParsedCall) -> tuple[str, str | None]:
        exact_subject = parsed.subject if parsed.tool.effect == "execute" else None
        return (parsed.tool.name, exact_subject)


def _confined_like_an_edit(tool: ToolDefinition) -> bool:
    """Whether the sandbox leaves the tool no more power than an edit: writes only in the
    workspace (or nowhere) and no network, so nothing can leave the machine either."""
    return tool.sandbox is not None and tool.sandbox.confined and not tool.sandbox.network


def _sandbox_text(tool: ToolDefinition) -> str | None:
    if tool.sandbox is None or not tool.sandbox.confined:
        return None
    return tool.sandbox.describe()


def _rule_applies(rule: PermissionRule, parsed: ParsedCall, subjects: Sequence[str]) -> bool:
    """Deny and ask rules apply when any form of the subject matches. An allow rule applies
    only to what the call really does: a lone bash command, the real path (the last form)."""
    if rule.behavior != "allow":
        return rule.matches(parsed.tool.name, subjects)
    if _runs_a_command(parsed.tool) and why_not_plain(parsed.subject) is not None:
        return False
    return rule.matches(parsed.tool.name, subjects[-1:])


def _runs_a_command(tool: ToolDefinition) -> bool:
    """An execute tool whose subject is a shell command (bash), which an allow rule covers
    only when plain; an execute tool without one (an MCP tool) is covered by its name."""
    return tool.effect == "execute" and tool.subject_field is not None


def _no_terminal_reason(parsed: ParsedCall, record: DecisionRecord) -> str:
    if record.source != "default":  # a rule or a hook asks; no mode lifts that
        remedy = "run it interactively to approve it, or change the rule or hook that asks"
    elif _confined_like_an_edit(parsed.tool):
        remedy = (
            "re-run with --permission-mode accept-edits (sandboxed commands run there without "
            "asking) or --permission-mode auto (or add an allow rule) to permit it"
        )
    elif parsed.tool.effect == "execute":
        remedy = "re-run with --permission-mode auto (or add an allow rule) to permit it"
    else:
        remedy = (
            "re-run with --permission-mode accept-edits or --permission-mode auto "
            "(or add an allow rule) to permit it"
        )
    return (
        f"{parsed.tool.name} needs the user's approval ({record.reason}), but there is no "
        f"terminal to ask on, so it was denied. The user must {remedy}."
    )
