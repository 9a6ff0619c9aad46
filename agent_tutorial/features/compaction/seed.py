"""The seed strategy: chapter 8's pipeline exactly. Every request is cut afresh: snip once
the history passes a number of groups, micro on all but the most recent tool groups, a
summary past a size. It keeps no state between requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_tutorial.features.compaction.budget import Candidates, fewest_to_fit
from agent_tutorial.features.compaction.settings import CompactionSettings


@dataclass(frozen=True, slots=True)
class SeedStrategy:
    """Where the seed cuts; a `None` turns that layer off (the plain-history layers)."""

    snip_max_groups: int | None
    snip_keep_head_groups: int
    keep_recent_tool_groups: int | None
    summary_threshold_bytes: int

    @classmethod
    def from_settings(cls, settings: CompactionSettings) -> SeedStrategy:
        return cls(
            settings.snip_max_groups,
            settings.snip_keep_head_groups,
            settings.keep_recent_tool_groups,
            settings.proactive_threshold_bytes,
        )

    def snip_span(self, group_count: int) -> tuple[int, int] | None:
        """Past `snip_max_groups`: the first `snip_keep_head_groups` stay, then the marker
        (one group), then the newest groups up to `snip_max_groups` in all."""
        if self.snip_max_groups is None or group_count <= self.snip_max_groups:
            return None
        head = self.snip_keep_head_groups
        return head, group_count - (self.snip_max_groups - head - 1)

    def groups_to_clear(self, tool_groups: Sequence[int]) -> int:
        if self.keep_recent_tool_groups is None:
            return 0
        return max(0, len(tool_groups) - self.keep_recent_tool_groups)

    def clear_more(self, request_bytes: int, budget: int | None, candidates: Candidates) -> int:
        """Only a request over the window: the seed keeps fewer recent results verbatim,
        oldest first, until it fits (down to none). Nothing is remembered; the next request
        is cut afresh."""
        if budget is None or request_bytes <= budget:
            return 0
        return fewest_to_fit(request_bytes - budget, [saving for _, saving in candidates()])

    def snip_more(self, kept: Sequence[tuple[int, int]], excess_bytes: int) -> bool:
        """Never: the seed narrows by results alone, as the chapter teaches. A request still
        over the window is past the summary threshold (at most the budget), so layer 4
        replaces it next; should that fail, the provider's refusal brings the reactive
        recovery."""
        return False

    def summary_threshold(self, budget: int | None) -> int:
        """`proactive_threshold_bytes`, or the window's whole budget when that is smaller."""
        if budget is None:
            return self.summary_threshold_bytes
        return min(self.summary_threshold_bytes, budget)

    def reset(self) -> None:
        return None  # nothing kept between requests
