"""Chapter 8 with a known context window (budgets in bytes from tokens) and the
cache-aware strategy (cuts that move in batches)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import ChatMessage, ToolMessage
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.compaction import (
    COMPACTED_TOOL_RESULT,
    CompactionManager,
    CompactionSettings,
    CompactionStrategy,
    history_utf8_bytes,
)
from agent_tutorial.features.compaction.budget import HistoryBudget, TokenCalibration, WindowSize
from tests.test_compaction_support import FakeSummarizer, counting_ids, history_with


def manager(
    workspace: Path,
    window: int | None = None,
    *,
    strategy: CompactionStrategy = "seed",
    reserved: int = 0,
) -> CompactionManager:
    budget = HistoryBudget(
        None if window is None else WindowSize.of(window), reserved, TokenCalibration()
    )
    settings = CompactionSettings(strategy=strategy)
    return CompactionManager(
        workspace, FakeSummarizer(), settings, id_generator=counting_ids(), budget=budget
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


def test_every_request_fits_a_small_window(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)  # 3,000 prompt tokens: 10,500 B
    budget = 10_500

    requests = requests_while_growing(compaction, 30, "r" * 2_500)

    assert all(history_utf8_bytes(request) <= budget for request in requests)


def test_micro_keeps_fewer_recent_results_when_three_do_not_fit(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)
    history = history_with(3, "r" * 4_000)  # three 4 KB results: 12 KB > 10,500 B

    request = compaction.prepare(history)

    assert cleared(request) == 1
    assert history_utf8_bytes(request) <= 10_500


def test_a_latest_message_larger_than_the_window_stops_the_run(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)

    with pytest.raises(ContextOverflowError, match="latest message alone"):
        compaction.prepare(history_with(1, "r" * 20_000))


def test_the_overflow_message_says_what_the_system_prompt_and_tools_take(tmp_path: Path) -> None:
    compaction = manager(tmp_path, 4_000)

    with pytest.raises(ContextOverflowError, match="tool schemas and reminders need about"):
        compaction.prepare(history_with(1, "r" * 20_000))


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
