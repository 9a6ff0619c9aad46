"""Chapter 8 with a known context window (budgets in bytes from tokens) and the
cache-aware strategy (cuts that move in batches)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import (
    ChatMessage,
    ToolMessage,
    assistant_message,
    system_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.core.window import ContextWindow
from agent_tutorial.features.compaction import (
    COMPACTED_TOOL_RESULT,
    CompactionError,
    CompactionManager,
    CompactionSettings,
    CompactionStrategy,
    history_utf8_bytes,
    micro_compact_history,
)
from agent_tutorial.features.compaction.budget import WindowAccounting
from agent_tutorial.features.compaction.index import CanonicalIndex
from agent_tutorial.features.compaction.layers import CheapLayers, Lead, strategy_for
from agent_tutorial.features.compaction.persist import is_persisted
from agent_tutorial.features.compaction.sizes import message_utf8_bytes
from agent_tutorial.features.compaction.summary import is_compacted_summary, summary_request_bytes
from tests.test_compaction_support import (
    FakeSummarizer,
    counting_ids,
    history_with,
    tool_group,
)


def manager(
    workspace: Path,
    window: int | None = None,
    *,
    strategy: CompactionStrategy = "seed",
    reserved: int = 0,
    summarizer: FakeSummarizer | None = None,
    persist_share: float = CompactionSettings().window_persist_share,
) -> CompactionManager:
    """`persist_share` above the default lets a latest result larger than a quarter of the
    history budget stay whole (layer 1 would persist it now the window is known)."""
    return CompactionManager(
        workspace,
        summarizer or FakeSummarizer(),
        CompactionSettings(strategy=strategy, window_persist_share=persist_share),
        context_window_tokens=window,
        id_generator=counting_ids(),
        window_accounting=WindowAccounting(reserved_bytes=reserved),
    )


def requests_while_growing(
    compaction: CompactionManager, groups: int, content: str
) -> list[tuple[ChatMessage, ...]]:
    full = history_with(groups, content)
    return [compaction.prepare(full[: 1 + 2 * count]) for count in range(1, groups + 1)]


def cleared(request: tuple[ChatMessage, ...]) -> int:
    return sum(isinstance(m, ToolMessage) and m.content == COMPACTED_TOOL_RESULT for m in request)


# --- the seed with a window -------------------------------------------------------------------


def test_a_large_window_leaves_the_seed_exactly_as_it_is(tmp_path: Path) -> None:
    without = requests_while_growing(manager(tmp_path / "a"), 70, "r" * 3_000)
    with_window = requests_while_growing(manager(tmp_path / "b", 128_000), 70, "r" * 3_000)

    assert with_window == without


def test_a_small_window_lowers_the_summary_threshold_to_its_budget(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 8_000)  # 6,000 prompt tokens: 21,000 B at 3.5 B a token

    assert compaction.summary_threshold_bytes == 21_000
    assert manager(tmp_path, None).summary_threshold_bytes == 50_000


def test_a_manager_follows_the_sessions_window_as_it_is_learned(tmp_path: Path) -> None:
    window = ContextWindow(max_output_tokens=8_192)
    compaction = CompactionManager(tmp_path, FakeSummarizer(), window=window)
    assert compaction.summary_threshold_bytes == 50_000

    window.learn(8_000)  # as the adapter does from an overflow error

    assert compaction.summary_threshold_bytes == 21_000
    assert compaction.settings.context_window_tokens == 8_000


def test_a_larger_window_stated_later_leaves_the_managers_budget_as_it_was(
    tmp_path: Path,
) -> None:
    window = ContextWindow(8_000, max_output_tokens=8_192)
    compaction = CompactionManager(tmp_path, FakeSummarizer(), window=window)
    assert compaction.summary_threshold_bytes == 21_000

    window.learn(128_000)

    assert compaction.summary_threshold_bytes == 21_000


def retry_in_a_learned_window(
    tmp_path: Path, history: list[ChatMessage]
) -> tuple[ChatMessage, ...]:
    """The retry after `history` went out in the full form (10,000 B besides it) with no
    window known and was refused by a server stating 4 B a token and a 4,096-token window:
    3,072 tokens for the prompt, 12,288 B, of which the compact form takes 4,000 B; the
    budget, at 3.5 B a token before any reply, leaves 6,752 B of history."""
    window = ContextWindow(max_output_tokens=8_192)
    accounting = WindowAccounting(reserved_bytes=10_000, compact_reserved_bytes=4_000)
    compaction = CompactionManager(
        tmp_path, FakeSummarizer(), window=window, window_accounting=accounting
    )
    refused = history_utf8_bytes(compaction.prepare(history)) + 10_000
    window.learn(4_096)
    compaction.refused(refused, prompt_tokens=refused // 4)
    return compaction.recover_from_overflow(history)


def noted_call(number: int, note_bytes: int) -> ChatMessage:
    """A call with the model's note beside it: what no layer but the summary removes."""
    return assistant_message("n" * note_bytes, [tool_call(f"c{number}", "read_file", "{}")])


def test_a_retry_after_the_window_is_learned_reserves_the_compact_fixed_part(
    tmp_path: Path,
) -> None:
    """The retry carries the compact fixed part, so the model's 5,000 B note still fits
    beside it (issue 28: reserving the refused request's full form ended the run here)."""
    latest = [noted_call(1, 5_000), tool_message("ok", "c1")]
    history = [*history_with(1, "r" * 6_000), *latest]

    retry = retry_in_a_learned_window(tmp_path, history)

    assert retry[-2:] == tuple(latest)
    assert history_utf8_bytes(retry) <= 6_752


def test_a_summarised_retry_keeps_the_preview_of_a_result_persisted_for_it(
    tmp_path: Path,
) -> None:
    """The latest 20 KB result entered before the window was known; the retry persists it
    and, with the older note too large to keep, summarises: the tail it keeps shows the
    preview, as its size was counted, not the canonical result."""
    latest = [noted_call(1, 100), tool_message("r" * 20_000, "c1")]
    history = [user_message("go"), noted_call(0, 7_000), tool_message("ok", "c0"), *latest]

    retry = retry_in_a_learned_window(tmp_path, history)

    assert is_compacted_summary(retry[0])
    assert retry[-2] == latest[0]
    assert isinstance(retry[-1], ToolMessage) and is_persisted(retry[-1].content)
    assert history_utf8_bytes(retry) <= 6_752


def test_every_request_fits_a_small_window(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)  # 3,000 prompt tokens: 10,500 B
    budget = 10_500

    requests = requests_while_growing(compaction, 30, "r" * 2_500)

    assert all(history_utf8_bytes(request) <= budget for request in requests)


def test_micro_keeps_fewer_recent_results_when_three_do_not_fit(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000, persist_share=0.5)
    history = history_with(3, "r" * 4_000)  # three 4 KB results: 12 KB > 10,500 B

    request = compaction.prepare(history)

    assert cleared(request) == 1
    assert history_utf8_bytes(request) <= 10_500


def test_the_preview_of_a_narrowed_request_is_its_size(tmp_path: Path) -> None:
    history = history_with(3, "r" * 4_000)  # narrowed, as above

    preview = manager(tmp_path, 4_000, persist_share=0.5).next_request_bytes(history)

    prepared = manager(tmp_path, 4_000, persist_share=0.5).prepare(history)
    assert preview == history_utf8_bytes(prepared)
    assert preview < history_utf8_bytes(micro_compact_history(history))


def test_a_latest_message_larger_than_the_window_stops_the_run(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)

    with pytest.raises(ContextOverflowError, match="latest message alone"):
        compaction.prepare([user_message("r" * 20_000)])


def test_a_latest_result_larger_than_the_window_is_persisted_to_fit(tmp_path: Path) -> None:
    """It entered before the window was known (layer 1 would have persisted it): it is
    persisted now, in requests only, with a preview sized for the window."""
    compaction = manager(tmp_path, 4_000)
    history = history_with(1, "r" * 20_000)

    request = compaction.prepare(history)

    assert request[-1].content.startswith("<persisted-tool-result>")  # type: ignore[union-attr]
    assert history_utf8_bytes(request) <= 10_500
    assert history[-1].content == "r" * 20_000


def test_a_latest_result_within_the_windows_threshold_stays_whole(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)  # persists over a quarter of 10,500 B: 2,625 B
    history = history_with(1, "r" * 2_600)

    request = compaction.prepare(history)

    assert request[-1].content == "r" * 2_600


def test_the_overflow_message_says_what_the_system_prompt_and_tools_take(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)

    with pytest.raises(ContextOverflowError, match="tool schemas and reminders need about"):
        compaction.prepare([user_message("r" * 20_000)])


def test_layer_one_persists_what_a_small_window_cannot_hold(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)  # a quarter of 10,500 B

    (kept,) = compaction.process_tool_results([ToolResult("r" * 5_000)])

    assert kept.content.startswith("<persisted-tool-result>")
    assert len(kept.content.encode()) < 2_000


def test_the_reactive_retry_keeps_only_the_recent_groups_that_fit(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 8_000)  # 21,000 B
    history = history_with(6, "r" * 6_000)
    compaction.prepare(history)

    recovered = compaction.recover_from_overflow(history)

    assert history_utf8_bytes(recovered) <= 21_000
    assert recovered[-1] == history[-1]
    assert len(recovered) < 1 + 5 * 2  # fewer than the seed's five groups


def test_a_retry_no_smaller_than_the_refused_request_is_never_sent(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 128_000)
    history = history_with(1, "small")
    compaction.prepare(history)  # tiny: a summary can only make it larger

    with pytest.raises(ContextOverflowError, match="would not make the request smaller"):
        compaction.recover_from_overflow(history)


# --- cache-aware -----------------------------------------------------------------------------


def prefix_changes(requests: list[tuple[ChatMessage, ...]]) -> int:
    return sum(after[: len(before)] != before for before, after in itertools.pairwise(requests))


def test_cache_aware_requests_extend_each_other_between_events(tmp_path: Path) -> None:
    requests = requests_while_growing(manager(tmp_path, strategy="cache-aware"), 120, "r" * 4_000)

    assert prefix_changes(requests) <= 12  # the seed changes its prefix on nearly every one
    assert prefix_changes(requests_while_growing(manager(tmp_path / "s"), 120, "r" * 4_000)) > 100


def test_cache_aware_clears_nothing_below_the_high_mark(tmp_path: Path) -> None:
    requests = requests_while_growing(manager(tmp_path, strategy="cache-aware"), 20, "r" * 4_000)

    assert all(cleared(request) == 0 for request in requests)  # 20 × 4 KB < 100,000 B


def test_cache_aware_clears_in_one_step_down_to_the_low_mark(tmp_path: Path) -> None:
    requests = requests_while_growing(manager(tmp_path, strategy="cache-aware"), 40, "r" * 4_000)
    first = next(i for i, request in enumerate(requests) if cleared(request))

    assert history_utf8_bytes(requests[first - 1]) <= 100_000
    assert history_utf8_bytes(requests[first]) <= 30_000 + 4_000 * 5 + 2_000
    assert cleared(requests[first]) >= 10  # one step, not one group at a time


def test_cache_aware_never_clears_the_last_five_tool_groups(tmp_path: Path) -> None:
    requests = requests_while_growing(manager(tmp_path, strategy="cache-aware"), 80, "r" * 4_000)

    for request in requests:
        results = [m for m in request if isinstance(m, ToolMessage)]
        assert all(m.content != COMPACTED_TOOL_RESULT for m in results[-5:])


def test_cache_aware_snips_in_one_step(tmp_path: Path) -> None:
    compaction = manager(tmp_path, strategy="cache-aware")
    requests = requests_while_growing(compaction, 200, "r" * 300)
    markers = [
        next((m.content for m in request if "message groups omitted" in str(m.content)), None)
        for request in requests
    ]

    changes = [b for a, b in itertools.pairwise(markers) if a != b]
    assert 1 <= len(changes) <= 3  # 201 groups, cut at 120 down to 50
    assert all(len(request) <= 2 * 120 + 2 for request in requests)


def test_the_cache_aware_summary_threshold_comes_from_the_window(tmp_path: Path) -> None:
    assert manager(tmp_path, 32_000, strategy="cache-aware").summary_threshold_bytes == 63_000
    assert manager(tmp_path, strategy="cache-aware").summary_threshold_bytes == 160_000


def test_cache_aware_cuts_do_not_carry_over_to_another_history(tmp_path: Path) -> None:
    compaction = manager(tmp_path, strategy="cache-aware")
    requests_while_growing(compaction, 60, "r" * 4_000)  # micro has cleared by now

    other = compaction.prepare(history_with(12, "s" * 400, prompt="another task"))

    assert cleared(other) == 0


def test_a_preview_of_the_next_request_changes_nothing_prepare_sends(tmp_path: Path) -> None:
    """/context and the toolbar ask for the next request's size between turns; asking first
    must not make `prepare` return the previous request or move the cache-aware cuts."""
    full = history_with(120, "r" * 4_000)
    plain = manager(tmp_path / "a", strategy="cache-aware")
    previewed = manager(tmp_path / "b", strategy="cache-aware")
    for count in range(1, 121):
        history = full[: 1 + 2 * count]
        expected = plain.prepare(history)
        previewed.next_request_bytes(history)
        assert previewed.prepare(history) == expected, f"request {count} differs"


# --- what every request reserves, and the window in one place ----------------------------------


def test_what_every_request_reserves_lowers_the_summary_threshold(tmp_path: Path) -> None:
    assert manager(tmp_path, 8_000, reserved=1_000).summary_threshold_bytes == 20_000
    assert manager(tmp_path, 8_000, reserved=21_000).summary_threshold_bytes == 0


@pytest.mark.parametrize(
    ("reserved", "size", "persisted"),
    [(1_000, 5_000, False), (1_000, 5_001, True), (0, 5_250, False), (0, 5_251, True)],
)
def test_what_every_request_reserves_lowers_layer_ones_threshold(
    tmp_path: Path, reserved: int, size: int, persisted: bool
) -> None:
    compaction = manager(tmp_path, 8_000, reserved=reserved)  # a quarter of 21,000 B - reserved

    (kept,) = compaction.process_tool_results([ToolResult("r" * size)])

    assert kept.content.startswith("<persisted-tool-result>") == persisted


def test_the_window_reaches_the_manager_through_the_settings(tmp_path: Path) -> None:
    settings = CompactionSettings(context_window_tokens=8_000)

    assert CompactionManager(tmp_path, FakeSummarizer(), settings).summary_threshold_bytes == 21_000
    assert CompactionManager(tmp_path, FakeSummarizer()).summary_threshold_bytes == 50_000


# --- cache-aware over the window ---------------------------------------------------------------


def failing() -> FakeSummarizer:
    """A summarizer that always fails: the narrowed request is what goes out."""
    return FakeSummarizer([CompactionError("no summary today")])


def small_then_large(small: int, large: int) -> list[ChatMessage]:
    """`small` tool groups with 200 B results, then `large` with 4,500 B results."""
    history = history_with(small, "s" * 200)
    for number in range(small, small + large):
        history.extend(tool_group(number, "L" * 4_500))
    return history


def has_snip_marker(request: tuple[ChatMessage, ...]) -> bool:
    return any("message groups omitted" in str(message.content) for message in request)


def test_cache_aware_narrows_with_its_own_cuts_not_the_seeds_snip(tmp_path: Path) -> None:
    # 8,000 tokens: a 21,000 B budget. Its five protected groups alone hold 22,500 B.
    compaction = manager(tmp_path, 8_000, strategy="cache-aware", summarizer=failing())
    history = small_then_large(55, 5)

    request = compaction.prepare(history)

    assert history_utf8_bytes(request) <= 21_000
    assert not has_snip_marker(request)  # 61 groups: below its 120, though above the seed's 50
    results = [m for m in request if isinstance(m, ToolMessage)]
    assert 0 < sum(m.content == "L" * 4_500 for m in results) < 5  # some, not all, cleared


def test_after_narrowing_the_next_request_extends_this_one(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 8_000, strategy="cache-aware", summarizer=failing())
    history = small_then_large(55, 5)
    narrowed = compaction.prepare(history)
    history.extend(tool_group(999, "tiny"))

    after = compaction.prepare(history)

    assert after[: len(narrowed)] == narrowed


def test_cache_aware_snips_when_clearing_every_result_is_not_enough(tmp_path: Path) -> None:
    # 4,000 tokens: a 10,500 B budget; 100 groups of calls alone hold more than that.
    compaction = manager(tmp_path, 4_000, strategy="cache-aware", summarizer=failing())
    history = history_with(100, "r" * 100)

    request = compaction.prepare(history)

    assert history_utf8_bytes(request) <= 10_500
    assert has_snip_marker(request)
    assert request[0] == history[0]
    assert request[-2:] == (history[-2], tool_message(COMPACTED_TOOL_RESULT, "call-99-0"))


CACHE_AWARE = CompactionSettings(strategy="cache-aware")


def cache_aware_layers(
    history: list[ChatMessage] | CanonicalIndex, settings: CompactionSettings = CACHE_AWARE
) -> CheapLayers:
    index = history if isinstance(history, CanonicalIndex) else CanonicalIndex.of(history)
    return CheapLayers(index, strategy_for(settings))


@pytest.mark.parametrize("groups", [100, 130])  # no marker yet; snip's own marker already
def test_a_narrowing_snip_cuts_just_enough_and_counts_its_marker(groups: int) -> None:
    """For every budget in a stretch: the request fits, marker included, and one group
    fewer cut would not. Once its result is cleared a group weighs at most `heaviest`; the
    marker's count may gain a digit or two."""
    history = history_with(groups, "r" * 100)
    cleared = micro_compact_history(history, keep_recent_tool_groups=0)
    heaviest = max(history_utf8_bytes(cleared[i : i + 2]) for i in range(1, len(cleared), 2))
    index = CanonicalIndex.of(history)
    for budget in range(5_000, 5_000 + heaviest):  # every phase of one group
        request = cache_aware_layers(index).build(None, budget)

        assert request.utf8_bytes == history_utf8_bytes(request.messages) <= budget
        assert has_snip_marker(request.messages)
        assert budget - request.utf8_bytes < heaviest + 3, f"cut more than needed at {budget}"


def test_a_narrowing_snip_behind_a_summary_keeps_the_summary_and_the_latest_group() -> None:
    history = history_with(100, "r" * 100)
    summary = system_message('{"kind": "stand-in summary"}')
    lead = Lead(summary, message_utf8_bytes(summary), first_group=41)  # 41 groups summarised

    request = cache_aware_layers(history).build(lead, 6_000)

    assert request.utf8_bytes == history_utf8_bytes(request.messages) <= 6_000
    assert request.messages[0] == summary
    head_calls = (request.messages[1], request.messages[3])
    assert head_calls == (history[81], history[83])  # the head: groups 41 and 42 (cleared)
    assert has_snip_marker(request.messages[5:6])
    assert request.messages[-2] == history[-2]


@pytest.mark.parametrize("front", ["summary", "first prompt"])
def test_without_head_groups_a_narrowing_snip_cuts_the_oldest_group_first(front: str) -> None:
    """With no head kept, the oldest group (the summary in front, or else the first
    prompt) goes before any group after it."""
    history = history_with(30, "r" * 100)
    lead = None
    if front == "summary":
        summary = system_message("s" * 3_000)
        lead = Lead(summary, message_utf8_bytes(summary), first_group=1)
    else:
        history[0] = user_message("p" * 3_000)
    settings = replace(CACHE_AWARE, snip_keep_head_groups=0)
    whole = cache_aware_layers(history, settings).build(lead).utf8_bytes

    request = cache_aware_layers(history, settings).build(lead, whole - 2_000)

    assert request.messages[0] == system_message("[Compacted: 1 message groups omitted]")
    assert request.messages[1:] == micro_compact_history(history[1:], keep_recent_tool_groups=0)


def test_a_request_that_cannot_be_cut_to_fit_goes_out_as_small_as_it_gets() -> None:
    """The head and the latest group stay; the summary threshold, below the budget, sees
    the rest."""
    history = history_with(30, "r" * 100)

    request = cache_aware_layers(history).build(None, 100)

    assert request.utf8_bytes > 100
    assert request.messages[0] == history[0]
    assert request.messages[-2] == history[-2]
    assert has_snip_marker(request.messages)


def test_cache_aware_cuts_stay_behind_a_summary() -> None:
    """Behind the same summary the next request extends this one: snip waits, as it does
    without a summary."""
    history = history_with(12, "r" * 100)
    summary = system_message("a summary")
    lead = Lead(summary, message_utf8_bytes(summary), first_group=1)
    index = CanonicalIndex.of(history)
    settings = replace(CACHE_AWARE, cache_snip_max_groups=8, cache_snip_keep_groups=5)
    layers = cache_aware_layers(index, settings)
    first = layers.build(lead).messages
    appended = tool_group(99, "tiny")
    index.append(appended, [*history, *appended])

    assert has_snip_marker(first)
    assert layers.build(lead).messages == (*first, *appended)


def test_the_reactive_summary_request_itself_fits_the_window(tmp_path: Path) -> None:
    summarizer = FakeSummarizer()
    compaction = manager(tmp_path, 8_000, summarizer=summarizer, persist_share=0.5)  # 21,000 B
    history = history_with(6, "r" * 6_400)
    sent = compaction.prepare(history)
    assert summary_request_bytes(sent) > 21_000 >= history_utf8_bytes(sent)  # the premise

    compaction.recover_from_overflow(history)

    (summarised,) = summarizer.calls
    assert summary_request_bytes(summarised) <= 21_000
    assert summarised[-2:] == sent[-2:]  # the oldest groups went, the latest stayed


def test_a_latest_result_no_larger_than_a_full_preview_is_not_persisted(tmp_path: Path) -> None:
    """Its preview (2,000 B of head and 2,000 of tail, as configured) would be no smaller."""
    compaction = manager(tmp_path, 1_000)  # 2,625 B of history

    with pytest.raises(ContextOverflowError, match="latest message alone"):
        compaction.prepare(history_with(1, "r" * 3_000))
    request = manager(tmp_path, 1_000).prepare(history_with(1, "r" * 5_000))
    assert str(request[-1].content).startswith("<persisted-tool-result>")
