"""Stuck calls: a model that makes the same call again (same tool, same arguments) with
nothing changed in between gets the same answer, and small models do it over and over
(issue 16 saw `glob *.py` six times in a row). A repeat still runs, and its result says
that it already ran and how it came back; past `MAX_IDENTICAL_CALLS` the call is not run
and the turn ends.

"Nothing changed in between": no call that may change the workspace (a tool whose effect
is not `read`: bash, write_file, edit_file) ran between the two, and the model still sees
the earlier result as it came back (chapter 8 may have cleared or summarised it). A call
that may change the workspace forgets every other call seen so far; the same write or
command made again in a row still counts, since nothing else happened between its runs.
A new prompt starts afresh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeAlias

from agent_tutorial.core.messages import ChatMessage, ToolCall, ToolMessage
from agent_tutorial.core.tools import ToolResult, tool_error

MAX_IDENTICAL_CALLS = 3
"""Runs of one identical call with nothing changed in between; the next one ends the turn."""


History: TypeAlias = Sequence[ChatMessage]


@dataclass(frozen=True, slots=True)
class _Runs:
    """How often one call ran since the last change, its latest result and call id."""

    count: int
    result: str
    call_id: str


_NEVER = _Runs(0, "", "")


def _call_key(call: ToolCall) -> tuple[str, str]:
    """Same tool, same arguments: key order and spacing in the JSON do not matter."""
    try:
        arguments = json.dumps(json.loads(call.arguments), sort_keys=True)
    except (json.JSONDecodeError, RecursionError):
        arguments = call.arguments
    return call.name, arguments


class RepeatedCalls:
    """One runner's record of the calls made since the last change, and how they came back."""

    def __init__(self, limit: int = MAX_IDENTICAL_CALLS) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._runs: dict[tuple[str, str], _Runs] = {}
        self.stuck: ToolCall | None = None
        """The call refused for being made once too often; the turn ends after its batch."""

    def new_prompt(self) -> None:
        self._runs.clear()
        self.stuck = None

    def forget_unseen(self, canonical: History, request: History) -> None:
        """Forget calls whose latest result the model no longer sees as it came back (a
        chapter-8 request may clear or summarise it): running one again is not a repeat."""
        if request is canonical:
            return
        recorded = {m.tool_call_id: m.content for m in canonical if isinstance(m, ToolMessage)}
        seen = {
            message.tool_call_id
            for message in request
            if isinstance(message, ToolMessage)
            and recorded.get(message.tool_call_id) == message.content
        }
        self._runs = {key: runs for key, runs in self._runs.items() if runs.call_id in seen}

    def refusal(self, call: ToolCall) -> ToolResult | None:
        """The answer to a call already run `limit` times with nothing changed since."""
        runs = self._runs.get(_call_key(call), _NEVER).count
        if runs < self.limit:
            return None
        self.stuck = call
        return tool_error(
            "repeated_call",
            f"not run: this exact call already ran {runs} times with nothing changed in "
            "between; the turn ends here",
        )

    def record(self, call: ToolCall, result: ToolResult, *, may_change: bool) -> ToolResult:
        """Note a run; a repeat's result says so. A call that may change the workspace
        makes every other call seen so far stale."""
        key = _call_key(call)
        before = self._runs.get(key, _NEVER)
        if may_change:
            self._runs.clear()
        self._runs[key] = _Runs(before.count + 1, result.content, call.id)
        if before.count == 0:
            return result
        return _with_note(result, before.count, same=result.content == before.result)


def _with_note(result: ToolResult, runs: int, *, same: bool) -> ToolResult:
    times = "once" if runs == 1 else f"{runs} times"
    outcome = "the same" if same else "differently then"
    note = (
        f"[Note: this exact call already ran {times} in this turn with nothing changed in "
        f"between, and came back {outcome}. Running it again tells you nothing new: use "
        "this result, try something different, or answer.]"
    )
    return replace(result, content=f"{result.content}\n\n{note}")
