"""Byte sizes, the transcript format, and the snip and micro layers as pure functions."""

from __future__ import annotations

import orjson
import pytest

from agent_tutorial.core.messages import (
    ChatMessage,
    SystemMessage,
    ToolMessage,
    ToolPairingError,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.features.compaction import (
    COMPACTED_TOOL_RESULT,
    history_utf8_bytes,
    micro_compact_history,
    snip_compact_history,
    transcript_jsonl,
)
from agent_tutorial.features.compaction.cache_aware import CacheAwareStrategy
from agent_tutorial.features.compaction.index import CanonicalIndex
from agent_tutorial.features.compaction.layers import CheapLayers, Lead
from agent_tutorial.features.compaction.seed import SeedStrategy
from agent_tutorial.features.compaction.settings import CompactionSettings
from agent_tutorial.features.compaction.sizes import encode_utf8, message_utf8_bytes
from tests.test_compaction_support import history_with, tool_group


def groups_of(count: int) -> list[ChatMessage]:
    """`count` groups: alternating user prompts and one-call tool groups."""
    history: list[ChatMessage] = []
    for number in range(count):
        history.extend(tool_group(number) if number % 2 else [user_message(f"u{number}")])
    return history


def test_compacted_tool_result_text_is_the_chapters() -> None:
    assert COMPACTED_TOOL_RESULT == "[Earlier tool result compacted. Re-run if needed.]"


def test_transcript_lines_are_compact_sorted_key_json_with_unicode_kept() -> None:
    history: list[ChatMessage] = [
        user_message("héllo “world”"),
        assistant_message(None, [tool_call("c1", "read_file", '{"path": "a.py"}')]),
        tool_message("line 1\nline 2", "c1"),
    ]

    assert transcript_jsonl(history).decode() == (
        '{"content":"héllo “world”","role":"user"}\n'
        '{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":'
        '"{\\"path\\": \\"a.py\\"}","name":"read_file"},"id":"c1","type":"function"}]}\n'
        '{"content":"line 1\\nline 2","role":"tool","tool_call_id":"c1"}\n'
    )


def test_history_utf8_bytes_is_the_transcript_length_in_bytes() -> None:
    history: list[ChatMessage] = [user_message("€" * 10), system_message("s")]

    assert history_utf8_bytes(history) == len(transcript_jsonl(history))
    assert history_utf8_bytes(history) == len('{"content":"","role":"user"}\n') + 30 + len(
        '{"content":"s","role":"system"}\n'
    )


def test_history_utf8_bytes_survives_lone_surrogates() -> None:
    history: list[ChatMessage] = [tool_message("bad name \udcff", "c1")]

    assert history_utf8_bytes(history) == len(transcript_jsonl(history)) > 0


def test_a_name_byte_that_is_not_utf8_is_written_escaped_in_the_transcript() -> None:
    """`caf\\xe9.txt`, as the terminal, the tools and the session file show it; not `caf?`."""
    history: list[ChatMessage] = [tool_message("caf\udce9.txt", "c1")]

    line = transcript_jsonl(history)

    assert orjson.loads(line)["content"] == "caf\\xe9.txt"
    assert b"caf?" not in line
    assert encode_utf8("caf\udce9.txt") == b"caf\\xe9.txt"


def test_snip_leaves_fifty_groups_alone() -> None:
    history = groups_of(50)

    assert snip_compact_history(history) == tuple(history)


def test_snip_keeps_three_head_groups_a_marker_and_the_last_forty_six() -> None:
    history = groups_of(51)

    snipped = snip_compact_history(history)

    expected_head = history[:4]  # u0, (call, result), u2
    expected_tail = history[len(history) - 69 :]  # the last 46 groups: 23 tool + 23 user
    assert snipped == (
        *expected_head,
        system_message("[Compacted: 2 message groups omitted]"),
        *expected_tail,
    )


def test_snip_counts_the_groups_behind_an_earlier_marker() -> None:
    history: list[ChatMessage] = [
        user_message("goal"),
        user_message("head 2"),
        user_message("head 3"),
        system_message("[Compacted: 12 message groups omitted]"),
        *groups_of(50),
    ]

    snipped = snip_compact_history(history)

    # Omitted: the earlier marker (12 groups) and 4 of the 50 new groups.
    assert snipped[3] == system_message("[Compacted: 16 message groups omitted]")
    assert snipped[4:] == tuple(groups_of(50)[len(groups_of(4)) :])


def test_snip_keeps_an_earlier_marker_in_the_head_as_it_is() -> None:
    marker = system_message("[Compacted: 7 message groups omitted]")
    history = [user_message("goal"), marker, *groups_of(60)]

    snipped = snip_compact_history(history, max_groups=10, keep_head_groups=2)

    assert snipped[:3] == (
        user_message("goal"),
        marker,
        system_message("[Compacted: 53 message groups omitted]"),
    )


def test_snip_never_splits_a_multi_call_group() -> None:
    history: list[ChatMessage] = [user_message("goal")]
    for number in range(10):
        history.extend(tool_group(number, calls=3))

    snipped = snip_compact_history(history, max_groups=5, keep_head_groups=1)

    assert snipped == (
        user_message("goal"),
        system_message("[Compacted: 7 message groups omitted]"),
        *history[1 + 7 * 4 :],
    )


@pytest.mark.parametrize(("max_groups", "keep_head_groups"), [(2, 0), (10, 9), (10, -1), (3, 2)])
def test_snip_rejects_impossible_settings(max_groups: int, keep_head_groups: int) -> None:
    with pytest.raises(ValueError, match="snip"):
        snip_compact_history([], max_groups=max_groups, keep_head_groups=keep_head_groups)


def test_micro_clears_all_but_the_three_most_recent_tool_groups() -> None:
    history = history_with(5, "full output")

    compacted = micro_compact_history(history)

    results = [message for message in compacted if isinstance(message, ToolMessage)]
    assert [result.content for result in results] == [COMPACTED_TOOL_RESULT] * 2 + [
        "full output"
    ] * 3
    assert [result.tool_call_id for result in results] == [
        message.tool_call_id for message in history if isinstance(message, ToolMessage)
    ]


def test_micro_clears_every_result_of_a_multi_call_group_and_keeps_the_calls() -> None:
    history = [user_message("go"), *tool_group(0, "old", calls=3), *tool_group(1, "new", calls=2)]

    compacted = micro_compact_history(history, keep_recent_tool_groups=1)

    assert compacted == (
        user_message("go"),
        history[1],
        tool_message(COMPACTED_TOOL_RESULT, "call-0-0"),
        tool_message(COMPACTED_TOOL_RESULT, "call-0-1"),
        tool_message(COMPACTED_TOOL_RESULT, "call-0-2"),
        *history[5:],
    )


def test_micro_leaves_plain_messages_alone() -> None:
    history = [user_message("a"), *tool_group(0), assistant_message("thinking"), *tool_group(1)]

    compacted = micro_compact_history(history, keep_recent_tool_groups=0)

    assert compacted[0] == user_message("a")
    assert compacted[3] == assistant_message("thinking")
    assert compacted[2] == tool_message(COMPACTED_TOOL_RESULT, "call-0-0")


def test_micro_with_few_tool_groups_changes_nothing() -> None:
    history = history_with(3)

    assert micro_compact_history(history) == tuple(history)


def test_micro_rejects_a_negative_keep_count() -> None:
    with pytest.raises(ValueError, match="keep_recent_tool_groups"):
        micro_compact_history([], keep_recent_tool_groups=-1)


@pytest.mark.parametrize("layer", [snip_compact_history, micro_compact_history])
def test_layers_reject_unpaired_history(layer: object) -> None:
    unpaired = [user_message("go"), assistant_message(None, [tool_call("c1", "bash", "{}")])]

    with pytest.raises(ToolPairingError):
        layer(unpaired)  # type: ignore[operator]


def test_layers_do_not_modify_their_input() -> None:
    history = groups_of(80)
    before = list(history)

    micro_compact_history(snip_compact_history(history), keep_recent_tool_groups=0)

    assert history == before


# --- the layers over the canonical index ------------------------------------------------


def snip_only(max_groups: int, keep_head: int) -> SeedStrategy:
    return SeedStrategy(max_groups, keep_head, None, 10**9)


def summary_lead(first_group: int) -> Lead:
    message = system_message("summary of the groups before")
    return Lead(message, message_utf8_bytes(message), first_group)


def test_a_summary_kept_at_the_head_is_not_counted_as_omitted() -> None:
    # Ten groups, the first four summarised: the summary and six groups; snip to four
    # keeps the summary, the marker and the two newest groups.
    layers = CheapLayers(CanonicalIndex.of(groups_of(10)), snip_only(4, 1))

    request = layers.build(summary_lead(4))

    assert request.messages[1] == system_message("[Compacted: 4 message groups omitted]")
    assert request.snip_omitted_groups == 4


def test_a_summary_snipped_with_the_groups_after_it_counts_as_one_group() -> None:
    history = groups_of(10)
    index = CanonicalIndex.of(history)
    layers = CheapLayers(index, snip_only(4, 0))
    lead = summary_lead(4)

    request = layers.build(lead)

    # The summary and groups 4-6 make way for the marker; groups 7-9 stay.
    marker = system_message("[Compacted: 4 message groups omitted]")
    assert request.messages[0] == marker
    omitted = lead.utf8_bytes + index.group_bytes(4, 7)
    assert request.snip_bytes_saved == omitted - message_utf8_bytes(marker)


def test_micro_reports_what_clearing_saved_and_leaves_an_already_compacted_result() -> None:
    history: list[ChatMessage] = [
        *tool_group(1, content="x" * 500),
        *tool_group(2, content=COMPACTED_TOOL_RESULT),
        *tool_group(3, content="recent"),
    ]
    layers = CheapLayers(CanonicalIndex.of(history), SeedStrategy(None, 0, 1, 10**9))

    request = layers.build(None)

    cleared = tool_message(COMPACTED_TOOL_RESULT, history[1].tool_call_id)  # type: ignore[union-attr]
    assert request.micro_cleared_results == 1
    assert request.micro_bytes_saved == message_utf8_bytes(history[1]) - message_utf8_bytes(cleared)
    assert request.messages[3] is history[3]


def test_micro_compact_history_does_not_snip() -> None:
    history = groups_of(60)

    assert len(micro_compact_history(history)) == len(history)


def test_a_request_exactly_the_size_of_its_budget_is_not_narrowed() -> None:
    history: list[ChatMessage] = [user_message(f"{n}" * 100) for n in range(6)]
    index = CanonicalIndex.of(history)
    strategy = CacheAwareStrategy(CompactionSettings(snip_keep_head_groups=0))
    size = index.group_bytes(0, 6)

    assert CheapLayers(index, strategy).build(None, size).messages == tuple(history)
    narrowed = CheapLayers(index, strategy).build(None, size - 1)
    # One byte over: the oldest group (no head is kept here) gives way to the marker.
    assert narrowed.messages[1:] == tuple(history[1:])
    assert isinstance(narrowed.messages[0], SystemMessage)
    assert narrowed.snip_omitted_groups == 1
