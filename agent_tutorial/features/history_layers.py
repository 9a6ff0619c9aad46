"""The model-free parts of chapter 8 compaction: a history's UTF-8 size, the snip and micro
layers, and the layer-4 summary message (its fields and its JSON content)."""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    History,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolPairingError,
    is_tool_group,
    iter_message_groups,
    system_message,
    to_wire,
    tool_message,
    validate_tool_pairing,
)

COMPACTED_TOOL_RESULT = "[Earlier tool result compacted. Re-run if needed.]"
SUMMARY_KIND = "compacted_history"
SUMMARY_FIELDS = (
    "current_goal",
    "key_findings",
    "files_read_or_changed",
    "remaining_work",
    "user_constraints",
)
_SNIP_MARKER = re.compile(r"\[Compacted: (\d+) message groups omitted\]")
_JSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE


# --- sizes ------------------------------------------------------------------------------


def encode_utf8(text: str) -> bytes:
    """The UTF-8 bytes of `text`; a lone surrogate (from an undecodable file name) becomes `?`."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="replace")


def serialize_message(message: ChatMessage) -> bytes:
    """One transcript line: the wire shape as compact sorted-keys JSON with non-ASCII kept,
    and a newline."""
    wire = to_wire(message)
    try:
        return orjson.dumps(wire, option=_JSON_OPTIONS)
    except orjson.JSONEncodeError:  # orjson refuses lone surrogates; the stdlib does not
        text = json.dumps(wire, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return encode_utf8(text) + b"\n"


def message_utf8_bytes(message: ChatMessage) -> int:
    return len(serialize_message(message))


def history_utf8_bytes(history: History) -> int:
    """The byte length of the history's transcript (`transcript_jsonl`)."""
    return sum(len(serialize_message(message)) for message in history)


def transcript_jsonl(history: History) -> bytes:
    return b"".join(serialize_message(message) for message in history)


# --- snip and micro ----------------------------------------------------------------------


def snip_marker(omitted_groups: int) -> SystemMessage:
    return system_message(f"[Compacted: {omitted_groups} message groups omitted]")


def canonical_group_count(group: Sequence[ChatMessage]) -> int:
    """How many canonical groups a group stands for: an earlier snip marker stands for the
    groups it replaced, any other group for itself."""
    first = group[0]
    if len(group) == 1 and isinstance(first, SystemMessage):
        match = _SNIP_MARKER.fullmatch(first.content)
        if match:
            return int(match.group(1))
    return 1


def check_snip_settings(max_groups: int, keep_head_groups: int) -> None:
    if max_groups < 3:
        raise ValueError(f"snip max_groups must be at least 3, got {max_groups}")
    if not 0 <= keep_head_groups <= max_groups - 2:
        raise ValueError(
            f"snip keep_head_groups must be between 0 and max_groups - 2 ({max_groups - 2}), "
            f"got {keep_head_groups}"
        )


def check_micro_settings(keep_recent_tool_groups: int) -> None:
    if keep_recent_tool_groups < 0:
        raise ValueError(f"keep_recent_tool_groups must be >= 0, got {keep_recent_tool_groups}")


def snip_compact_history(
    history: History, *, max_groups: int = 50, keep_head_groups: int = 3
) -> tuple[ChatMessage, ...]:
    """Layer 2: beyond `max_groups` groups, keep the first `keep_head_groups`, one marker
    counting the canonical groups omitted, and the most recent groups up to `max_groups`."""
    check_snip_settings(max_groups, keep_head_groups)
    validate_tool_pairing(history)
    groups = list(iter_message_groups(history))
    if len(groups) <= max_groups:
        return tuple(history)
    tail_start = len(groups) - (max_groups - keep_head_groups - 1)
    omitted = sum(canonical_group_count(group) for group in groups[keep_head_groups:tail_start])
    kept = [*groups[:keep_head_groups], (snip_marker(omitted),), *groups[tail_start:]]
    snipped = tuple(message for group in kept for message in group)
    validate_tool_pairing(snipped)
    return snipped


def micro_compact_history(
    history: History, *, keep_recent_tool_groups: int = 3
) -> tuple[ChatMessage, ...]:
    """Layer 3: clear the results of every tool group but the most recent ones; the calls
    and their ids stay, so pairing holds."""
    check_micro_settings(keep_recent_tool_groups)
    validate_tool_pairing(history)
    groups = list(iter_message_groups(history))
    tool_groups = [index for index, group in enumerate(groups) if is_tool_group(group)]
    cleared = set(tool_groups[: max(0, len(tool_groups) - keep_recent_tool_groups)])
    compacted = tuple(
        compacted_result(message) if index in cleared else message
        for index, group in enumerate(groups)
        for message in group
    )
    validate_tool_pairing(compacted)
    return compacted


def compacted_result(message: ChatMessage) -> ChatMessage:
    if isinstance(message, ToolMessage) and message.content != COMPACTED_TOOL_RESULT:
        return tool_message(COMPACTED_TOOL_RESULT, message.tool_call_id)
    return message


# --- the summary message -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionSummary:
    """The five fields a layer-4 summary keeps. Lists arrive as tuples; invalid values are
    a `ValueError`, so an invalid summary cannot exist."""

    current_goal: str
    key_findings: tuple[str, ...] = field(default=())
    files_read_or_changed: tuple[str, ...] = field(default=())
    remaining_work: tuple[str, ...] = field(default=())
    user_constraints: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.current_goal, str) or not self.current_goal.strip():
            raise ValueError("current_goal must be a non-empty string")
        for name in SUMMARY_FIELDS[1:]:
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"{name} must be a list of strings")
            if not all(isinstance(item, str) and item.strip() for item in value):
                raise ValueError(f"{name} must contain only non-empty strings")
            object.__setattr__(self, name, tuple(value))

    def to_json_object(self) -> dict[str, Any]:
        return {name: _jsonable(getattr(self, name)) for name in SUMMARY_FIELDS}


def _jsonable(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


class HistorySummarizer(Protocol):
    """Writes the five-field summary of a history; raises `CompactionError` when it cannot."""

    def summarize(self, history: History) -> CompactionSummary: ...


def summary_message(summary: CompactionSummary, transcript_path: str) -> SystemMessage:
    """The one system message that stands for the summarised history."""
    content = {"kind": SUMMARY_KIND, "transcript_path": transcript_path}
    content.update(summary.to_json_object())
    return system_message(orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode())


def parse_summary_content(content: str) -> tuple[CompactionSummary, str]:
    """The summary and transcript path inside a summary message; `ValueError` if it is not one."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"summary content is not JSON: {error}") from error
    if not isinstance(data, dict) or data.get("kind") != SUMMARY_KIND:
        raise ValueError(f"summary content is not a {SUMMARY_KIND!r} object")
    transcript_path = data.get("transcript_path")
    if not isinstance(transcript_path, str):
        raise ValueError("summary content has no transcript_path")
    missing = [name for name in SUMMARY_FIELDS if name not in data]
    if missing:
        raise ValueError(f"summary content lacks {missing!r}")
    return CompactionSummary(**{name: data[name] for name in SUMMARY_FIELDS}), transcript_path


def is_compacted_summary(message: ChatMessage) -> bool:
    if not isinstance(message, SystemMessage) or not message.content.startswith("{"):
        return False
    try:
        parse_summary_content(message.content)
    except ValueError:
        return False
    return True


# --- snip and micro, incrementally -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LayerSettings:
    snip_max_groups: int
    snip_keep_head_groups: int
    keep_recent_tool_groups: int


@dataclass(frozen=True, slots=True)
class LayeredRequest:
    """A request history after snip and micro, with what each layer did to it."""

    messages: tuple[ChatMessage, ...]
    utf8_bytes: int
    snip_omitted_groups: int = 0
    snip_bytes_saved: int = 0
    micro_cleared_results: int = 0
    micro_bytes_saved: int = 0


_LEAD = -1  # the summary message in front of the canonical groups
_MARKER = -2  # the snip marker


class CanonicalIndex:
    """Canonical history as the layers need it — per-message sizes, group boundaries and the
    tool-call ids seen — extended in time proportional to what was appended, so building a
    request does not grow with the session."""

    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self._size_prefix = [0]  # bytes of messages[:i]
        self._group_starts: list[int] = []
        self._tool_groups: list[bool] = []
        self._canonical_prefix = [0]  # canonical groups in groups[:g]
        self._call_ids: set[str] = set()
        self._compacted: dict[int, tuple[ChatMessage, int]] = {}  # message index -> (result, saved)

    @property
    def utf8_bytes(self) -> int:
        return self._size_prefix[-1]

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
        self._call_ids.update(call_ids)

    def group_at(self, message_index: int) -> int | None:
        """The group starting at `message_index` (the group count at the end), else None."""
        if message_index == len(self.messages):
            return len(self._group_starts)
        group = bisect_left(self._group_starts, message_index)
        starts = self._group_starts
        return group if group < len(starts) and starts[group] == message_index else None

    def start_of_last_groups(self, count: int) -> int:
        """Message index where the last `count` groups begin."""
        group = len(self._group_starts) - count
        return len(self.messages) if count == 0 else self._group_start(max(0, group))

    def bytes_from(self, message_index: int) -> int:
        return self._size_prefix[-1] - self._size_prefix[message_index]

    def layered(
        self, lead: SystemMessage | None, lead_bytes: int, first_group: int, settings: LayerSettings
    ) -> LayeredRequest:
        """micro(snip(lead + groups[first_group:])), built from the cached sizes in time
        proportional to the request, not to the canonical history."""
        base = _BaseGroups(lead, lead_bytes, first_group, len(self._group_starts))
        snipped = self._snip(base, settings)
        tool_units = [unit for unit in snipped.units if unit >= 0 and self._tool_groups[unit]]
        keep = settings.keep_recent_tool_groups
        cleared = set(tool_units[: max(0, len(tool_units) - keep)])
        messages: list[ChatMessage] = []
        total = cleared_count = micro_saved = 0
        for unit in snipped.units:
            if unit == _LEAD and lead is not None:
                messages.append(lead)
                total += lead_bytes
            elif unit == _MARKER and snipped.marker is not None:
                messages.append(snipped.marker)
                total += snipped.marker_bytes
            else:
                start, end = self._group_start(unit), self._group_start(unit + 1)
                total += self._size_prefix[end] - self._size_prefix[start]
                if unit not in cleared:
                    messages.extend(self.messages[start:end])
                    continue
                messages.append(self.messages[start])  # the assistant's calls stay
                for index in range(start + 1, end):
                    result, saved = self._compacted_result(index)
                    messages.append(result)
                    cleared_count += result is not self.messages[index]
                    micro_saved += saved
        return LayeredRequest(
            messages=tuple(messages),
            utf8_bytes=total - micro_saved,
            snip_omitted_groups=snipped.omitted_groups,
            snip_bytes_saved=snipped.bytes_saved,
            micro_cleared_results=cleared_count,
            micro_bytes_saved=micro_saved,
        )

    def _snip(self, base: _BaseGroups, settings: LayerSettings) -> _Snipped:
        length = len(base)
        if length <= settings.snip_max_groups:
            return _Snipped([base.unit(position) for position in range(length)])
        head = settings.snip_keep_head_groups
        tail_start = length - (settings.snip_max_groups - head - 1)
        omitted_groups, omitted_bytes = self._span_totals(base, head, tail_start)
        marker = snip_marker(omitted_groups)
        marker_bytes = message_utf8_bytes(marker)
        units = [base.unit(position) for position in range(head)]
        units.append(_MARKER)
        units.extend(base.unit(position) for position in range(tail_start, length))
        return _Snipped(units, marker, marker_bytes, omitted_groups, omitted_bytes - marker_bytes)

    def _span_totals(self, base: _BaseGroups, start: int, stop: int) -> tuple[int, int]:
        """Canonical groups and bytes of base positions [start, stop)."""
        groups = utf8_bytes = 0
        if base.lead is not None and start == 0:
            groups, utf8_bytes = 1, base.lead_bytes
            start = 1
        if start < stop:
            first, last = base.unit(start), base.unit(stop - 1) + 1
            groups += self._canonical_prefix[last] - self._canonical_prefix[first]
            size = self._size_prefix
            utf8_bytes += size[self._group_start(last)] - size[self._group_start(first)]
        return groups, utf8_bytes

    def _group_start(self, group: int) -> int:
        starts = self._group_starts
        return starts[group] if group < len(starts) else len(self.messages)

    def _compacted_result(self, index: int) -> tuple[ChatMessage, int]:
        cached = self._compacted.get(index)
        if cached is None:
            original = self.messages[index]
            result = compacted_result(original)
            own_bytes = self._size_prefix[index + 1] - self._size_prefix[index]
            saved = 0 if result is original else own_bytes - message_utf8_bytes(result)
            cached = self._compacted[index] = (result, saved)
        return cached


@dataclass(frozen=True, slots=True)
class _Snipped:
    """The units snip keeps, `_MARKER` standing where groups were cut."""

    units: list[int]
    marker: SystemMessage | None = None
    marker_bytes: int = 0
    omitted_groups: int = 0
    bytes_saved: int = 0


class _BaseGroups:
    """The groups the layers start from: an optional summary message, then the canonical
    groups from `first_group` on; positions map to canonical group numbers or `_LEAD`."""

    def __init__(
        self, lead: SystemMessage | None, lead_bytes: int, first_group: int, group_count: int
    ) -> None:
        self.lead = lead
        self.lead_bytes = lead_bytes
        self._offset = 0 if lead is None else 1
        self._first_group = first_group
        self._length = self._offset + group_count - first_group

    def __len__(self) -> int:
        return self._length

    def unit(self, position: int) -> int:
        if position < self._offset:
            return _LEAD
        return self._first_group + position - self._offset


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
