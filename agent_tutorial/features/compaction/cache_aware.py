"""The cache-aware strategy's layer policy: snip and micro move their cuts in batches, so
that between two compaction events every request extends the previous one byte for byte
and the provider's prefix cache keeps serving it.

- micro clears nothing until the request passes a high mark; then it clears tool groups
  oldest-first, in one step, down to a low mark (and at least `clear_at_least` bytes),
  never the most recent `keep_recent` tool groups;
- snip cuts nothing until the request holds `snip_max` groups; then, in one step, it keeps
  the first `keep_head` groups, the marker and the newest groups up to `snip_keep`.

The marks come from the window when it is known (`CacheMarks.for_budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent_tutorial.features.compaction.settings import CompactionSettings


@dataclass(frozen=True, slots=True)
class CacheMarks:
    """Where micro starts and stops clearing, in bytes of request history."""

    high: int
    low: int
    clear_at_least: int

    @classmethod
    def for_budget(cls, settings: CompactionSettings, budget: int | None) -> CacheMarks:
        """The configured marks, at most half (high) and a fifth (low) of a known budget."""
        high, low = settings.cache_high_mark_bytes, settings.cache_low_mark_bytes
        if budget is not None:
            high, low = min(high, budget // 2), min(low, budget // 5)
        high, low = max(high, 1), max(min(low, high - 1), 0)
        return cls(high, low, min(settings.cache_clear_at_least_bytes, high - low))


class CacheAwareLayers:
    """A `LayerPolicy` with state: the cuts stay where they are until a mark is passed.
    `reset` forgets them when the request's base changes (a new summary in front)."""

    def __init__(self, settings: CompactionSettings) -> None:
        self.keep_recent = settings.cache_keep_recent_tool_groups
        self.keep_head = settings.snip_keep_head_groups
        self.snip_max = settings.cache_snip_max_groups
        self.snip_keep = settings.cache_snip_keep_groups
        self.marks = CacheMarks.for_budget(settings, None)
        self._snip_stop: int | None = None  # base position where the kept tail starts
        self._clear_before = 0  # canonical group: tool groups before it are cleared

    def reset(self) -> None:
        self._snip_stop = None
        self._clear_before = 0

    def snip_span(self, group_count: int) -> tuple[int, int] | None:
        stop = self._snip_stop
        kept = group_count if stop is None else group_count - (stop - self.keep_head) + 1
        if kept > self.snip_max:
            stop = self._snip_stop = group_count - (self.snip_keep - self.keep_head - 1)
        return None if stop is None else (self.keep_head, stop)

    def groups_to_clear(self, tool_groups: Sequence[int]) -> int:
        clearable = tool_groups[: max(0, len(tool_groups) - self.keep_recent)]
        return sum(1 for group in clearable if group < self._clear_before)

    def clear_more(
        self, request_bytes: int, candidates: Callable[[], Sequence[tuple[int, int]]]
    ) -> bool:
        """Past the high mark, move the micro cut forward over `candidates` (the tool groups
        micro may still clear, oldest first, with the bytes clearing each saves) until the
        request is down to the low mark and at least `clear_at_least` is cleared. True if
        the cut moved."""
        if request_bytes <= self.marks.high:
            return False
        uncleared = candidates()
        clearable = uncleared[: max(0, len(uncleared) - self.keep_recent)]
        if sum(saving for _, saving in clearable) < self.marks.clear_at_least:
            return False  # not worth the cache it would break; wait for more to clear
        saved = 0
        for group, saving in clearable:
            self._clear_before = group + 1
            saved += saving
            if request_bytes - saved <= self.marks.low and saved >= self.marks.clear_at_least:
                break
        return True
