"""What a run adds up to besides its answer: tokens, tool calls, compaction. A sink on the
event bus; the JSON result, the REPL's `/context` and the toolbar read it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from agent_tutorial.core.events import (
    CompactionApplied,
    Event,
    ModelReplied,
    NestedEvent,
    ToolFinished,
    TurnStarted,
    UsageReported,
)
from agent_tutorial.core.model import Usage


def _add_count(total: int | None, count: int | None) -> int | None:
    """A sum that stays unknown (None) until some call reports the count."""
    if count is None:
        return total
    return (total or 0) + count


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Token counts summed over every call that reported them. A count no call reported
    stays None (shown as null or "unknown"), so a server that sends no usage never looks
    like a run that cost nothing."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    cached_prompt_tokens: int | None = None
    """Prompt tokens read from the provider's prefix cache, where it reports them."""

    def plus(self, usage: Usage) -> UsageTotals:
        return UsageTotals(
            _add_count(self.prompt_tokens, usage.prompt_tokens),
            _add_count(self.completion_tokens, usage.completion_tokens),
            _add_count(self.total_tokens, usage.total_tokens),
            _add_count(self.cached_prompt_tokens, usage.cached_prompt_tokens),
        )


def format_count(count: int | None) -> str:
    """`12,345`, or `unknown` for a count no call reported."""
    return "unknown" if count is None else f"{count:,}"


@dataclass
class RunSummary:
    """Collects what `--output-format json` reports besides the answer.

    `usage` counts every model call (the agent's, its subagents' and summary requests);
    `last_usage` is the agent's latest reply, whose prompt tokens show how full the context
    is; `turns` counts the agent's own model calls.
    """

    usage: UsageTotals = UsageTotals()
    last_usage: Usage | None = None
    turns: int = 0
    compaction: dict[str, dict[str, int]] = field(default_factory=dict)
    tool_calls: int = 0
    tool_errors: int = 0
    context_window_tokens: int | None = None
    """The model's window when known (set by the front end), for the share of it used."""
    redactions: int = 0
    """Secrets masked in tool results (features/redaction.py)."""

    def reset(self) -> None:
        """Forget everything collected so far (the REPL started another session)."""
        fresh = RunSummary(context_window_tokens=self.context_window_tokens)
        for item in fields(self):
            setattr(self, item.name, getattr(fresh, item.name))

    def usage_record(self) -> dict[str, object]:
        """The `usage` object of the JSON result: the one place that builds it, so a new
        figure is added here once."""
        record: dict[str, object] = {
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "total_tokens": self.usage.total_tokens,
            "redactions": self.redactions,
        }
        if self.usage.cached_prompt_tokens is not None:
            record["cached_prompt_tokens"] = self.usage.cached_prompt_tokens
        window = self.context_window_tokens
        if window is not None:
            last = None if self.last_usage is None else self.last_usage.prompt_tokens
            record["context_window_tokens"] = window
            record["last_prompt_tokens"] = last
            record["last_prompt_window_share"] = None if last is None else round(last / window, 4)
        return record

    def emit(self, event: Event) -> None:
        if isinstance(event, NestedEvent):
            if isinstance(event.event, ModelReplied | UsageReported):
                self._count_usage(event.event.usage)
        elif isinstance(event, TurnStarted):
            self.turns += 1
        elif isinstance(event, ModelReplied):
            self._count_usage(event.usage)
            self.last_usage = event.usage or self.last_usage
        elif isinstance(event, UsageReported):
            self._count_usage(event.usage)
        elif isinstance(event, ToolFinished):
            self.tool_calls += 1
            self.tool_errors += int(event.result.is_error)
            self.redactions += event.result.redactions
        elif isinstance(event, CompactionApplied):
            layer = self.compaction.setdefault(
                event.layer, {"events": 0, "count": 0, "bytes_saved": 0}
            )
            layer["events"] += 1
            layer["count"] += event.count
            layer["bytes_saved"] += event.bytes_saved

    def _count_usage(self, usage: Usage | None) -> None:
        if usage is not None:
            self.usage = self.usage.plus(usage)
