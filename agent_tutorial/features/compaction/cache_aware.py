"""The cache-aware strategy: snip and micro move their cuts in batches, so that between two
compaction events every request extends the previous one byte for byte and the provider's
prefix cache keeps serving it.

- micro clears nothing until the request passes a high mark; then it clears tool groups
  oldest-first, in one step, down to a low mark (and at least `clear_at_least` bytes),
  never the most recent `keep_recent` tool groups;
- snip cuts nothing until the request holds `snip_max` groups; then, in one step, it keeps
  the first `keep_head` groups, the marker and the newest groups up to `snip_keep`;
- a request still over the window is narrowed by moving the same cuts further, just until
  it fits: micro's, oldest first and into the recent groups too, then, if clearing every
  result is not enough, snip's. The cuts stay where they are afterwards, so the requests
  that follow extend this one again (a fresh request cut the seed's way would rewrite the
  prefix now, and again on the first request that fits without it);
- the summary comes at a share of the window's budget (`cache_summary_share`).

The marks come from the window when it is known (`CacheMarks.for_budget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_tutorial.features.compaction.budget import Candidates, fewest_to_fit
from agent_tutorial.features.compaction.settings import CompactionSettings, share_of


@dataclass(frozen=True, slots=True)
class CacheMarks:
    """Where micro starts and stops clearing, in bytes of request history."""

    high: int
    low: int
    clear_at_least: int

    @classmethod
    def for_budget(cls, settings: CompactionSettings, budget: int | None) -> CacheMarks:
        """The configured marks, at most their shares of a known budget; the low mark stays
        below the high one, and one step need not free more than lies between them."""
        high, low = settings.cache_high_mark_bytes, settings.cache_low_mark_bytes
        if budget is not None:
            high = min(high, share_of(budget, settings.cache_high_mark_share))
            low = min(low, share_of(budget, settings.cache_low_mark_share))
        high, low = max(high, 1), max(min(low, high - 1), 0)
        return cls(high, low, min(settings.cache_clear_at_least_bytes, high - low))


def batch_to_clear(request_bytes: int, savings: Sequence[int], marks: CacheMarks) -> int:
    """How many of the clearable tool groups (`savings`: the bytes clearing each frees,
    oldest first) one micro step clears: none until the request passes the high mark, none
    while all of them together free less than `clear_at_least` (not worth the cache it
    breaks; wait for more), else oldest first until the request is down to the low mark
    with at least `clear_at_least` freed."""
    if request_bytes <= marks.high or sum(savings) < marks.clear_at_least:
        return 0
    freed = 0
    for count, saving in enumerate(savings, start=1):
        freed += saving
        if request_bytes - freed <= marks.low and freed >= marks.clear_at_least:
            return count
    return len(savings)


class CacheAwareStrategy:
    """The cuts stay where they are until a mark is passed. `reset` forgets them when the
    request's base changes (a new summary in front, another history)."""

    def __init__(self, settings: CompactionSettings) -> None:
        self._settings = settings
        self.keep_recent = settings.cache_keep_recent_tool_groups
        self.keep_head = settings.snip_keep_head_groups
        self.snip_max = settings.cache_snip_max_groups
        self.snip_keep = settings.cache_snip_keep_groups
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
        return sum(1 for group in tool_groups if group < self._clear_before)

    def clear_more(self, request_bytes: int, budget: int | None, candidates: Candidates) -> int:
        """Past the high mark, one batch step over the groups outside the most recent
        `keep_recent` (`batch_to_clear`); then, if the request is still over the window,
        the fewest further groups, oldest first, that make it fit. `candidates` are the
        tool groups still verbatim, oldest first, with the bytes clearing each frees. The
        cut moves past every group cleared and stays there."""
        marks = CacheMarks.for_budget(self._settings, budget)
        over_budget = budget is not None and request_bytes > budget
        if request_bytes <= marks.high and not over_budget:
            return 0
        uncleared = candidates()
        savings = [saving for _, saving in uncleared]
        clearable = savings[: max(0, len(savings) - self.keep_recent)]
        count = batch_to_clear(request_bytes, clearable, marks)
        if budget is not None:
            still_over = request_bytes - sum(savings[:count]) - budget
            count += fewest_to_fit(still_over, savings[count:])
        if count:
            self._clear_before = uncleared[count - 1][0] + 1
        return count

    def snip_more(self, kept: Sequence[tuple[int, int]], excess_bytes: int) -> bool:
        """Still over the window with every result it may clear cleared: snip moves its cut
        forward over the oldest groups after the head, just far enough (never past the
        latest group, which the model has not seen yet). The cut stays there like one of
        snip's own, so the requests after it extend this one."""
        tail = [(position, size) for position, size in kept if position >= self.keep_head]
        droppable = tail[:-1]
        count = fewest_to_fit(excess_bytes, [size for _, size in droppable])
        if count == 0:
            return False
        self._snip_stop = droppable[count - 1][0] + 1
        return True

    def summary_threshold(self, budget: int | None) -> int:
        """`cache_summary_threshold_bytes`, or `cache_summary_share` of a known budget."""
        if budget is None:
            return self._settings.cache_summary_threshold_bytes
        return share_of(budget, self._settings.cache_summary_share)
