"""Sandbox escalation: when the sandbox denied a command, the user (on a terminal, in `ask`
or `accept-edits`) is asked once, before the model hears anything, whether to run it
outside the sandbox this once, as Codex offers. Never in `auto`, never without a terminal:
there nobody chose to loosen the sandbox for this command."""

from __future__ import annotations

from agent_tutorial.core.permissions import ApprovalRequest, PermissionPolicy
from agent_tutorial.core.tools import ParsedCall, ToolResult

ESCALATION_REASON = (
    "the sandbox denied this command. Run it outside the sandbox, unconfined, this once? "
    "(n or Esc: the model hears of the denial)"
)


class SandboxEscalation:
    """A call guard around the permission policy: it reads the policy's mode and asks
    through its approver, so Shift-Tab and the terminal apply here too."""

    def __init__(self, policy: PermissionPolicy) -> None:
        self.policy = policy

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        return parsed

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        rerun = parsed.tool.unconfined
        denied = result.command is not None and result.command.sandbox_denied
        approver = self.policy.approver
        if not denied or rerun is None or approver is None or self.policy.mode == "auto":
            return result
        request = ApprovalRequest(
            tool_name=parsed.tool.name,
            subject=parsed.subject,
            arguments=parsed.arguments_dict(),
            reason=ESCALATION_REASON,
        )
        # "always" is as far as the question goes: this once (the sandbox stays as it is).
        if approver.approve(request) not in ("yes", "always"):
            return result
        if result.whole_output is not None:  # replaced: nothing else will close its spool
            result.whole_output.close()
        return rerun(parsed.arguments)
