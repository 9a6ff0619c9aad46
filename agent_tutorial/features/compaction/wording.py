"""What compaction tells the user: one `CompactionApplied` event per thing a layer did, and
a warning `Notice` when an automatic summary fails. The manager decides; this says it."""

from __future__ import annotations

from typing import Any, Literal

from agent_tutorial.core.events import CompactionApplied, Notice
from agent_tutorial.core.messages import SystemMessage
from agent_tutorial.features.compaction.errors import CompactionError
from agent_tutorial.features.compaction.layers import LayeredRequest
from agent_tutorial.features.compaction.persist import PersistedBatch
from agent_tutorial.features.compaction.settings import CompactionStrategy
from agent_tutorial.features.compaction.sizes import encode_utf8
from agent_tutorial.features.compaction.store import ArtifactReference

SummaryTrigger = Literal["automatic", "manual", "overflow"]


def persisted(batch: PersistedBatch) -> CompactionApplied:
    """Layer 1 wrote `batch.artifacts` to files."""
    count = len(batch.artifacts)
    original = sum(artifact.reference.original_bytes for artifact in batch.artifacts)
    kept = sum(
        len(encode_utf8(batch.results[artifact.result_index].content))
        for artifact in batch.artifacts
    )
    paths = [artifact.reference.relative_path for artifact in batch.artifacts]
    where = paths[0] if count == 1 else f"{paths[0]} and {count - 1} more"
    text = f"persisted {count} {_plural(count, 'result')}, {original:,} B → {where}"
    return CompactionApplied("persist", text, count, max(0, original - kept), {"paths": paths})


def summarised(
    message: SystemMessage,
    covered_messages: int,
    transcript: ArtifactReference,
    trigger: SummaryTrigger,
    sizes: tuple[int, int],
) -> CompactionApplied:
    """Layer 4 replaced the first `covered_messages` with `message`; `sizes` is the request
    before and after. The details let a resumed session restore the summary."""
    before, after = sizes
    layer = "reactive" if trigger == "overflow" else "summary"
    reason = " prompt too long," if trigger == "overflow" else ""
    text = f"{layer}:{reason} {before:,} B → {after:,} B, transcript {transcript.relative_path}"
    details: dict[str, Any] = {
        "summary_content": message.content,
        "covered_messages": covered_messages,
        "transcript_path": transcript.relative_path,
        "trigger": trigger,
    }
    return CompactionApplied(layer, text, 1, max(0, before - after), details)


def threshold_source(
    strategy: CompactionStrategy, threshold: int, history_budget: int | None, configured: int
) -> str:
    """Which summary threshold applies and how to raise it: the seed keeps its fixed
    `configured` bytes (unless the window's room for history is smaller), cache-aware
    follows a known window."""
    if strategy == "cache-aware":
        if history_budget is None:
            return "cache-aware, [compaction] cache_summary_threshold_bytes (no window known)"
        return "cache-aware, a share of the window's room for history"
    if history_budget is not None and threshold < configured:
        return "seed, the window's room for history"
    return (
        f"seed, {configured:,} B; raise it with [compaction] proactive_threshold_bytes, "
        "or use --compaction cache-aware to follow the window"
    )


def summary_failed(error: CompactionError, consequence: str) -> Notice:
    return Notice("warning", f"automatic summary failed: {error}; {consequence}")


def breaker_opened(failures: int) -> Notice:
    return Notice(
        "warning",
        f"automatic summaries are off for this session after {failures} failures in a row; "
        "/compact still works",
    )


class CheapLayerReport:
    """Tells what snip and micro newly did: only when their count grew since the last
    request, so a long session does not repeat the same line on every request. Each event
    says what that step did, in its text and its count alike (`micro: 1 result cleared`,
    count 1), so the lines, the totals and stream-json add up to the same numbers."""

    def __init__(self) -> None:
        self._previous = LayeredRequest(messages=(), utf8_bytes=0)

    def already_reported(self, request: LayeredRequest) -> None:
        """`request` is where the counting starts: what it omits and clears was reported
        before (by the run that made a resumed conversation, say)."""
        self._previous = request

    def events(self, request: LayeredRequest) -> list[CompactionApplied]:
        previous, self._previous = self._previous, request
        events = []
        omitted = request.snip_omitted_groups - previous.snip_omitted_groups
        if omitted > 0:
            saved = max(0, request.snip_bytes_saved - previous.snip_bytes_saved)
            text = f"snip: {omitted:,} {_plural(omitted, 'group')} omitted"
            events.append(CompactionApplied("snip", text, omitted, saved))
        cleared = request.micro_cleared_results - previous.micro_cleared_results
        if cleared > 0:
            saved = max(0, request.micro_bytes_saved - previous.micro_bytes_saved)
            text = f"micro: {cleared:,} {_plural(cleared, 'result')} cleared"
            events.append(CompactionApplied("micro", text, cleared, saved))
        return events


def _plural(count: int, noun: str) -> str:
    return noun if count == 1 else noun + "s"
