"""Canonical history as the layers need it: per-message sizes, group boundaries, which groups
are tool groups, and the tool-call ids seen. It grows in time proportional to what was
appended, so building a request does not grow with the session."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    History,
    SystemMessage,
    ToolCall,
    ToolPairingError,
    is_tool_group,
    iter_message_groups,
    system_message,
    validate_tool_pairing,
)
from agent_tutorial.features.compaction.sizes import message_utf8_bytes

_SNIP_MARKER = re.compile(r"\[Compacted: (\d+) message groups omitted\]")


def snip_marker(omitted_groups: int) -> SystemMessage:
    """The message snip leaves where it omitted groups."""
    return system_message(f"[Compacted: {omitted_groups} message groups omitted]")


def canonical_group_count(group: Sequence[ChatMessage]) -> int:
    """How many canonical groups a group stands for: an earlier snip marker (in a history
    given to the public layer functions) stands for the groups it replaced, any other group
    for itself."""
    first = group[0]
    if len(group) == 1 and isinstance(first, SystemMessage):
        match = _SNIP_MARKER.fullmatch(first.content)
        if match:
            return int(match.group(1))
    return 1


class CanonicalIndex:
    """A paired history, indexed; `append` checks that what it adds keeps it paired."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self.shown: list[ChatMessage] = []
        """The messages as requests show them: canonical, but for results persisted after
        they were appended (`show_instead`); sizes and the layers follow this list."""
        self._size_prefix = [0]  # bytes of messages[:i]
        self._group_starts: list[int] = []
        self._tool_groups: list[bool] = []
        self._canonical_prefix = [0]  # canonical groups in groups[:g]
        self._call_ids: set[str] = set()

    @classmethod
    def of(cls, history: History) -> CanonicalIndex:
        """The index of a whole history; `ToolPairingError` if it is not paired."""
        index = cls()
        index.append(history, history)
        return index

    @property
    def utf8_bytes(self) -> int:
        return self._size_prefix[-1]

    @property
    def group_count(self) -> int:
        return len(self._group_starts)

    def appended_part(self, history: History) -> History | None:
        """What `history` adds to the indexed messages, or None if it does not extend them."""
        known = len(self.messages)
        if len(history) < known:
            return None
        whole = history if isinstance(history, list) else list(history)
        appended = whole[known:]
        # Compare whole lists rather than slicing the prefix: a slice would touch every
        # message's reference count, while list equality skips identical items in C.
        self.messages.extend(appended)
        try:
            extends = whole == self.messages
        finally:
            del self.messages[known:]
        return appended if extends else None

    def append(self, new: History, whole: History) -> None:
        """Index `new`, the end of the paired history `whole`; `ToolPairingError` if unpaired."""
        call_ids = _check_appended_pairing(new, whole, self._call_ids)
        offset = len(self.messages)
        for group in iter_message_groups(new):
            self._group_starts.append(offset)
            self._tool_groups.append(is_tool_group(group))
            self._canonical_prefix.append(self._canonical_prefix[-1] + canonical_group_count(group))
            for message in group:
                self._size_prefix.append(self._size_prefix[-1] + message_utf8_bytes(message))
            offset += len(group)
        self.messages.extend(new)
        self.shown.extend(new)
        self._call_ids.update(call_ids)

    def show_instead(self, position: int, message: ChatMessage) -> None:
        """Requests show `message` where canonical message `position` stands (a result
        persisted once the window became known); canonical history is unchanged."""
        sizes = self._size_prefix
        change = message_utf8_bytes(message) - (sizes[position + 1] - sizes[position])
        self.shown[position] = message
        for index in range(position + 1, len(sizes)):
            sizes[index] += change

    def group_at(self, message_index: int) -> int | None:
        """The group starting at `message_index` (the group count at the end), else None."""
        if message_index == len(self.messages):
            return len(self._group_starts)
        group = bisect_left(self._group_starts, message_index)
        starts = self._group_starts
        return group if group < len(starts) and starts[group] == message_index else None

    def group_start(self, group: int) -> int:
        """Message index where `group` starts (the message count past the last group)."""
        starts = self._group_starts
        return starts[group] if group < len(starts) else len(self.messages)

    def is_tool_group(self, group: int) -> bool:
        return self._tool_groups[group]

    def start_of_last_groups(self, count: int) -> int:
        """Message index where the last `count` groups begin."""
        group = len(self._group_starts) - count
        return len(self.messages) if count == 0 else self.group_start(max(0, group))

    def bytes_from(self, message_index: int) -> int:
        return self._size_prefix[-1] - self._size_prefix[message_index]

    def message_bytes(self, start: int, stop: int) -> int:
        """Bytes of messages[start:stop]."""
        return self._size_prefix[stop] - self._size_prefix[start]

    def group_bytes(self, first: int, stop: int) -> int:
        """Bytes of groups [first, stop)."""
        return self.message_bytes(self.group_start(first), self.group_start(stop))

    def canonical_groups(self, first: int, stop: int) -> int:
        """Canonical groups that groups [first, stop) stand for."""
        return self._canonical_prefix[stop] - self._canonical_prefix[first]


def _check_appended_pairing(new: History, whole: History, known_call_ids: set[str]) -> list[str]:
    """The call ids `new` adds. A paired prefix ends with no call pending, so `whole` is
    paired exactly when `new` is paired on its own and reuses no earlier call id."""
    try:
        validate_tool_pairing(new)
        call_ids = [call.id for message in new for call in _tool_calls(message)]
        reused = sorted(known_call_ids.intersection(call_ids))
        if reused:
            raise ToolPairingError(f"duplicate tool call ids {reused!r}")
    except ToolPairingError:
        validate_tool_pairing(whole)  # the same failure, located in the whole history
        raise
    return call_ids


def _tool_calls(message: ChatMessage) -> tuple[ToolCall, ...]:
    return message.tool_calls if isinstance(message, AssistantMessage) else ()
