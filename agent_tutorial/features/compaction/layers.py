"""Layers 2 and 3, built from the canonical index: snip omits old middle groups behind one
marker, micro clears the results of all but the most recent tool groups (their calls and
ids stay, so pairing holds). Where each layer cuts is the choice of a `Strategy`, one per
compaction strategy.

`snip_compact_history` and `micro_compact_history` are the same layers over a plain history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    SystemMessage,
    ToolMessage,
    tool_message,
)
from agent_tutorial.features.compaction.budget import Candidates
from agent_tutorial.features.compaction.cache_aware import CacheAwareStrategy
from agent_tutorial.features.compaction.index import CanonicalIndex, snip_marker
from agent_tutorial.features.compaction.seed import SeedStrategy
from agent_tutorial.features.compaction.settings import (
    CompactionSettings,
    check_micro_settings,
    check_snip_settings,
)
from agent_tutorial.features.compaction.sizes import message_utf8_bytes

COMPACTED_TOOL_RESULT = "[Earlier tool result compacted. Re-run if needed.]"
_SEED = CompactionSettings()
_SEED_STRATEGY = SeedStrategy.from_settings(_SEED)


class Strategy(Protocol):
    """One compaction strategy (`seed.py`, `cache_aware.py`): where snip and micro cut, how
    a request over the window is narrowed, and when layer 4 summarises. The layers and the
    manager ask it; neither knows which one it is."""

    def snip_span(self, group_count: int) -> tuple[int, int] | None:
        """The positions [start, stop) of a base of `group_count` groups that snip
        replaces with one marker, or None to keep them all."""
        ...

    def groups_to_clear(self, tool_groups: Sequence[int]) -> int:
        """How many of the oldest tool groups left after snip (their canonical group
        numbers, oldest first) micro clears."""
        ...

    def clear_more(self, request_bytes: int, budget: int | None, candidates: Candidates) -> int:
        """Given the request's size after `groups_to_clear` and the history budget (None:
        no window known), how many more tool groups micro clears now, oldest first, from
        `candidates` (the groups still verbatim with the bytes clearing each saves;
        computed only if asked for). A request over the budget must come out narrowed."""
        ...

    def snip_more(self, kept: Sequence[tuple[int, int]], excess_bytes: int) -> bool:
        """The request is still `excess_bytes` over the budget after micro: whether snip
        cuts more now (True if the strategy moved its cut). `kept` holds the base
        positions snip kept, oldest first, with the bytes each takes in the request."""
        ...

    def summary_threshold(self, budget: int | None) -> int:
        """The request size past which layer 4 summarises, for the budget as now known."""
        ...

    def reset(self) -> None:
        """The request's base changed (a new summary in front): forget any cut positions."""
        ...


def strategy_for(settings: CompactionSettings) -> Strategy:
    """The strategy the settings name, built from their numbers."""
    if settings.strategy == "cache-aware":
        return CacheAwareStrategy(settings)
    return SeedStrategy.from_settings(settings)


@dataclass(frozen=True, slots=True)
class LayeredRequest:
    """A request history after snip and micro, with what each layer did to it."""

    messages: tuple[ChatMessage, ...]
    utf8_bytes: int
    snip_omitted_groups: int = 0
    snip_bytes_saved: int = 0
    micro_cleared_results: int = 0
    micro_bytes_saved: int = 0


@dataclass(frozen=True, slots=True)
class Lead:
    """A summary message standing for the canonical groups before `first_group`."""

    message: SystemMessage
    utf8_bytes: int
    first_group: int


_LEAD = -1  # the summary message in front of the canonical groups
_MARKER = -2  # the snip marker


class CheapLayers:
    """micro(snip(lead + groups)) for one canonical index, in time proportional to the
    request rather than to the canonical history. Cleared results are kept between calls."""

    def __init__(self, index: CanonicalIndex, strategy: Strategy) -> None:
        self._index = index
        self._strategy = strategy
        self._cleared: dict[int, tuple[ChatMessage, int]] = {}  # message -> (result, saved)
        self._lead: Lead | None = None
        strategy.reset()  # cuts a strategy kept belong to another index's positions

    def build(self, lead: Lead | None, budget: int | None = None) -> LayeredRequest:
        """The request from `lead` and the indexed groups; with a `budget` (bytes of
        history the window holds) the strategy narrows a request over it: first micro
        clears more (`clear_more`), then, if that is not enough, snip cuts more
        (`snip_more`)."""
        if lead != self._lead:  # a new summary in front: positions mean other groups now
            self._lead = lead
            self._strategy.reset()
        base = _Base(lead, self._index.group_count)
        snipped, cleared, request = self._cut(base, budget)
        # A cut may add a marker, or lengthen its count, and so come out a few bytes over:
        # then it moves again. Each move cuts at least one group more, so this ends.
        while budget is not None and request.utf8_bytes > budget:
            kept = self._kept_sizes(base, snipped, cleared)
            if not self._strategy.snip_more(kept, request.utf8_bytes - budget):
                break
            snipped, cleared, request = self._cut(base, budget)
        return request

    def _cut(self, base: _Base, budget: int | None) -> tuple[_Snipped, set[int], LayeredRequest]:
        """Snip, then micro, where the strategy says: what snip kept, the groups micro
        cleared, and the request they make."""
        lead = base.lead
        snipped = self._snip(base)
        index = self._index
        tool_units = [unit for unit in snipped.units if unit >= 0 and index.is_tool_group(unit)]
        cleared_count = self._strategy.groups_to_clear(tool_units)
        cleared = set(tool_units[:cleared_count])
        request = self._assemble(lead, snipped, cleared)
        uncleared = tool_units[cleared_count:]

        def candidates() -> list[tuple[int, int]]:
            return [(unit, self._clearing_saves(unit)) for unit in uncleared]

        more = self._strategy.clear_more(request.utf8_bytes, budget, candidates)
        if more:
            cleared = set(tool_units[: cleared_count + more])
            request = self._assemble(lead, snipped, cleared)
        return snipped, cleared, request

    def _kept_sizes(
        self, base: _Base, snipped: _Snipped, cleared: set[int]
    ) -> list[tuple[int, int]]:
        """The base positions snip kept, oldest first, with the bytes each takes in the
        request now (a cleared group without its results)."""
        kept: list[tuple[int, int]] = []
        for unit in snipped.units:
            if unit == _LEAD and base.lead is not None:
                kept.append((0, base.lead.utf8_bytes))
            elif unit >= 0:
                start, end = self._index.group_start(unit), self._index.group_start(unit + 1)
                size = self._index.message_bytes(start, end)
                if unit in cleared:
                    size -= self._clearing_saves(unit)
                kept.append((base.position(unit), size))
        return kept

    def _clearing_saves(self, unit: int) -> int:
        index = self._index
        start, end = index.group_start(unit), index.group_start(unit + 1)
        return sum(self._cleared_result(position)[1] for position in range(start + 1, end))

    def _assemble(self, lead: Lead | None, snipped: _Snipped, cleared: set[int]) -> LayeredRequest:
        index = self._index
        messages: list[ChatMessage] = []
        total = cleared_count = micro_saved = 0
        for unit in snipped.units:
            if unit == _LEAD and lead is not None:
                messages.append(lead.message)
                total += lead.utf8_bytes
            elif unit == _MARKER and snipped.marker is not None:
                messages.append(snipped.marker)
                total += snipped.marker_bytes
            else:
                start, end = index.group_start(unit), index.group_start(unit + 1)
                total += index.message_bytes(start, end)
                if unit not in cleared:
                    messages.extend(index.shown[start:end])
                    continue
                messages.append(index.shown[start])  # the assistant's calls stay
                for position in range(start + 1, end):
                    result, saved = self._cleared_result(position)
                    messages.append(result)
                    cleared_count += result is not index.shown[position]
                    micro_saved += saved
        return LayeredRequest(
            messages=tuple(messages),
            utf8_bytes=total - micro_saved,
            snip_omitted_groups=snipped.omitted_groups,
            snip_bytes_saved=snipped.bytes_saved,
            micro_cleared_results=cleared_count,
            micro_bytes_saved=micro_saved,
        )

    def _snip(self, base: _Base) -> _Snipped:
        length = len(base)
        span = self._strategy.snip_span(length)
        if span is None:
            return _Snipped([base.unit(position) for position in range(length)])
        start, stop = span
        omitted_groups, omitted_bytes = self._span_totals(base, start, stop)
        marker = snip_marker(omitted_groups)
        marker_bytes = message_utf8_bytes(marker)
        units = [base.unit(position) for position in range(start)]
        units.append(_MARKER)
        units.extend(base.unit(position) for position in range(stop, length))
        return _Snipped(units, marker, marker_bytes, omitted_groups, omitted_bytes - marker_bytes)

    def _span_totals(self, base: _Base, start: int, stop: int) -> tuple[int, int]:
        """Canonical groups and bytes of base positions [start, stop)."""
        groups = utf8_bytes = 0
        if base.lead is not None and start == 0:
            groups, utf8_bytes = 1, base.lead.utf8_bytes
            start = 1
        if start < stop:
            first, last = base.unit(start), base.unit(stop - 1) + 1
            groups += self._index.canonical_groups(first, last)
            utf8_bytes += self._index.group_bytes(first, last)
        return groups, utf8_bytes

    def _cleared_result(self, position: int) -> tuple[ChatMessage, int]:
        cached = self._cleared.get(position)
        if cached is None:
            original = self._index.shown[position]
            result = compacted_result(original)
            own_bytes = self._index.message_bytes(position, position + 1)
            saved = 0 if result is original else own_bytes - message_utf8_bytes(result)
            cached = self._cleared[position] = (result, saved)
        return cached


def compacted_result(message: ChatMessage) -> ChatMessage:
    if isinstance(message, ToolMessage) and message.content != COMPACTED_TOOL_RESULT:
        return tool_message(COMPACTED_TOOL_RESULT, message.tool_call_id)
    return message


@dataclass(frozen=True, slots=True)
class _Snipped:
    """The units snip keeps, `_MARKER` standing where groups were cut."""

    units: list[int]
    marker: SystemMessage | None = None
    marker_bytes: int = 0
    omitted_groups: int = 0
    bytes_saved: int = 0


class _Base:
    """The groups the layers start from: an optional summary message, then the canonical
    groups from the lead's first group on; positions map to group numbers or `_LEAD`."""

    def __init__(self, lead: Lead | None, group_count: int) -> None:
        self.lead = lead
        self._offset = 0 if lead is None else 1
        self._first_group = 0 if lead is None else lead.first_group
        self._length = self._offset + group_count - self._first_group

    def __len__(self) -> int:
        return self._length

    def unit(self, position: int) -> int:
        if position < self._offset:
            return _LEAD
        return self._first_group + position - self._offset

    def position(self, unit: int) -> int:
        """Where canonical group `unit` stands in the base."""
        return self._offset + unit - self._first_group


# --- the same layers over a plain history (chapter 8's guide teaches these) ------------------


def snip_compact_history(
    history: History,
    *,
    max_groups: int = _SEED.snip_max_groups,
    keep_head_groups: int = _SEED.snip_keep_head_groups,
) -> tuple[ChatMessage, ...]:
    """Layer 2: beyond `max_groups` groups, keep the first `keep_head_groups`, one marker
    counting the canonical groups omitted, and the most recent groups up to `max_groups`."""
    check_snip_settings(max_groups, keep_head_groups)
    snip_only = replace(
        _SEED_STRATEGY,
        snip_max_groups=max_groups,
        snip_keep_head_groups=keep_head_groups,
        keep_recent_tool_groups=None,
    )
    return CheapLayers(CanonicalIndex.of(history), snip_only).build(None).messages


def micro_compact_history(
    history: History, *, keep_recent_tool_groups: int = _SEED.keep_recent_tool_groups
) -> tuple[ChatMessage, ...]:
    """Layer 3: clear the results of every tool group but the most recent ones; the calls
    and their ids stay, so pairing holds."""
    check_micro_settings(keep_recent_tool_groups)
    micro_only = replace(
        _SEED_STRATEGY, snip_max_groups=None, keep_recent_tool_groups=keep_recent_tool_groups
    )
    return CheapLayers(CanonicalIndex.of(history), micro_only).build(None).messages
