"""The decisions compaction budgets with, as pure functions and strategy objects: what a
share means, the window's byte budget, the fewest savings that fit, where each strategy
cuts, narrows and summarises, and layer 1's numbers for a window. Each rule is tested on
both sides of its line."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

import pytest

from agent_tutorial.features.compaction import CompactionSettings
from agent_tutorial.features.compaction.budget import (
    HistoryBudget,
    TokenCalibration,
    WindowAccounting,
    WindowSize,
    fewest_to_fit,
)
from agent_tutorial.features.compaction.cache_aware import (
    CacheAwareStrategy,
    CacheMarks,
    batch_to_clear,
)
from agent_tutorial.features.compaction.layers import strategy_for
from agent_tutorial.features.compaction.persist import settings_for_budget
from agent_tutorial.features.compaction.seed import SeedStrategy
from agent_tutorial.features.compaction.settings import COUNT_FIELDS, SHARE_FIELDS, share_of


def with_setting(name: str, value: Any) -> CompactionSettings:
    changes: dict[str, Any] = {name: value}
    return CompactionSettings(**changes)


def never_asked() -> Sequence[tuple[int, int]]:
    raise AssertionError("the candidates were computed although no decision needed them")


# --- settings ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", SHARE_FIELDS)
@pytest.mark.parametrize("share", [0, -0.25, 1.0001, float("nan")])
def test_a_share_outside_zero_to_one_is_a_value_error(name: str, share: float) -> None:
    with pytest.raises(ValueError, match=name):
        with_setting(name, share)


@pytest.mark.parametrize("name", SHARE_FIELDS)
@pytest.mark.parametrize("share", [1, 0.001])
def test_a_share_of_all_or_of_a_sliver_is_accepted(name: str, share: float) -> None:
    assert getattr(with_setting(name, share), name) == share


def test_the_reminder_allowance_may_be_zero_but_not_negative() -> None:
    assert CompactionSettings(reminder_allowance_bytes=0).reminder_allowance_bytes == 0
    with pytest.raises(ValueError, match="reminder_allowance_bytes"):
        CompactionSettings(reminder_allowance_bytes=-1)


@pytest.mark.parametrize(
    ("budget", "share", "expected"),
    [(21_000, 0.75, 15_750), (10, 0.25, 2), (9, 0.2, 1), (10, 0.2, 2), (99_999, 0.5, 49_999)],
)
def test_a_share_of_a_budget_is_rounded_down(budget: int, share: float, expected: int) -> None:
    assert share_of(budget, share) == expected


def test_every_share_is_checked() -> None:
    assert set(SHARE_FIELDS) == {
        f.name for f in fields(CompactionSettings) if f.name.endswith("_share")
    }


def test_the_default_shares_are_the_chapters() -> None:
    settings = CompactionSettings()

    shares = [getattr(settings, name) for name in SHARE_FIELDS]
    assert shares == [0.25, 0.5, 0.25, 0.3, 0.5, 0.2, 0.75, 0.5]
    assert settings.reminder_allowance_bytes == 2_000


def test_every_count_is_checked() -> None:
    counts = {field.name for field in fields(CompactionSettings) if field.type == "Count"}

    assert set(COUNT_FIELDS) == counts


@pytest.mark.parametrize("name", COUNT_FIELDS)
def test_a_limit_of_one_is_the_least(name: str) -> None:
    assert getattr(with_setting(name, 1), name) == 1
    with pytest.raises(ValueError, match=name):
        with_setting(name, 0)


@pytest.mark.parametrize(
    ("low", "initial", "high"), [(1.0, 3.5, 8.0), (3.5, 3.5, 3.5), (0.001, 0.001, 100.0)]
)
def test_bytes_per_token_start_inside_their_plausible_range(
    low: float, initial: float, high: float
) -> None:
    settings = CompactionSettings(
        min_bytes_per_token=low, initial_bytes_per_token=initial, max_bytes_per_token=high
    )

    assert TokenCalibration(settings).bytes_per_token == initial


@pytest.mark.parametrize(
    ("low", "initial", "high"), [(0, 3.5, 8.0), (-1, 3.5, 8.0), (3.6, 3.5, 8.0), (1.0, 8.1, 8.0)]
)
def test_bytes_per_token_outside_their_order_are_a_value_error(
    low: float, initial: float, high: float
) -> None:
    with pytest.raises(ValueError, match="bytes_per_token"):
        CompactionSettings(
            min_bytes_per_token=low, initial_bytes_per_token=initial, max_bytes_per_token=high
        )


CALIBRATING = CompactionSettings(
    initial_bytes_per_token=4.0,
    calibration_share=0.5,
    min_bytes_per_token=2.0,
    max_bytes_per_token=6.0,
)


def test_one_measurement_makes_up_its_share_of_the_estimate() -> None:
    calibration = TokenCalibration(CALIBRATING)

    calibration.observe(request_bytes=6_000, prompt_tokens=1_000)  # 6 B a token

    assert calibration.bytes_per_token == 5.0
    assert calibration.observations == 1


@pytest.mark.parametrize(
    ("request_bytes", "counted"), [(2_000, True), (1_999, False), (6_000, True), (6_001, False)]
)
def test_a_measurement_outside_the_plausible_range_is_ignored(
    request_bytes: int, counted: bool
) -> None:
    calibration = TokenCalibration(CALIBRATING)

    calibration.observe(request_bytes=request_bytes, prompt_tokens=1_000)

    assert calibration.observations == int(counted)
    assert (calibration.bytes_per_token != 4.0) == (counted and request_bytes != 4_000)


RULES: list[tuple[dict[str, Any], str | None]] = [
    ({"persist_threshold_bytes": 1}, None),
    ({"persist_threshold_bytes": 0}, "persist_threshold_bytes must be positive"),
    ({"batch_budget_bytes": 1}, None),
    ({"batch_budget_bytes": 0}, "batch_budget_bytes must be positive"),
    ({"proactive_threshold_bytes": 1}, None),
    ({"proactive_threshold_bytes": 0}, "proactive_threshold_bytes must be positive"),
    ({"preview_head_bytes": 0}, None),
    ({"preview_head_bytes": -1}, "preview_head_bytes must be >= 0"),
    ({"preview_tail_bytes": -1}, "preview_tail_bytes must be >= 0"),
    ({"preview_head_bytes": 0, "preview_tail_bytes": 0}, "preview_head_bytes and preview_tail"),
    ({"reactive_tail_groups": 0}, None),
    ({"reactive_tail_groups": -1}, "reactive_tail_groups must be >= 0"),
    ({"keep_recent_tool_groups": 0}, None),
    ({"keep_recent_tool_groups": -1}, "keep_recent_tool_groups must be >= 0"),
    ({"snip_max_groups": 3, "snip_keep_head_groups": 1}, None),
    ({"snip_max_groups": 2, "snip_keep_head_groups": 0}, "snip max_groups must be at least 3"),
    ({"snip_max_groups": 10, "snip_keep_head_groups": 8}, None),
    (
        {"snip_max_groups": 10, "snip_keep_head_groups": 9},
        "snip keep_head_groups must be between 0 and max_groups - 2 (8)",
    ),
    ({"snip_keep_head_groups": 0}, None),
    ({"snip_keep_head_groups": -1}, "snip keep_head_groups must be between"),
    ({"cache_keep_recent_tool_groups": 0}, None),
    ({"cache_keep_recent_tool_groups": -1}, "cache_keep_recent_tool_groups must be >= 0"),
    ({"cache_low_mark_bytes": 1, "cache_high_mark_bytes": 2}, None),
    ({"cache_low_mark_bytes": 0}, "cache marks must satisfy 0 < low < high"),
    ({"cache_low_mark_bytes": 99_999}, None),
    ({"cache_low_mark_bytes": 100_000}, "cache marks must satisfy 0 < low < high"),
    ({"cache_clear_at_least_bytes": 0}, None),
    ({"cache_clear_at_least_bytes": -1}, "cache_clear_at_least_bytes must be >= 0"),
    ({"cache_snip_keep_groups": 5}, None),  # the 3 head groups, the marker and one more
    ({"cache_snip_keep_groups": 4}, "cache_snip_keep_groups must exceed snip_keep_head"),
    ({"cache_snip_keep_groups": 119}, None),
    ({"cache_snip_keep_groups": 120}, "cache_snip_keep_groups must be below cache_snip_max"),
    ({"cache_summary_threshold_bytes": 1}, None),
    ({"cache_summary_threshold_bytes": 0}, "cache_summary_threshold_bytes must be positive"),
    ({"context_window_tokens": 1}, None),
    ({"context_window_tokens": 0}, "context_window_tokens must be positive"),
    ({"min_bytes_per_token": 0}, "bytes per token must satisfy"),
]


@pytest.mark.parametrize(("changes", "error"), RULES)
def test_each_rule_of_the_settings_on_both_sides_of_its_line(
    changes: dict[str, Any], error: str | None
) -> None:
    if error is None:
        assert CompactionSettings(**changes)
    else:
        with pytest.raises(ValueError, match="^" + re.escape(error)):
            CompactionSettings(**changes)


# --- the window's byte budget ------------------------------------------------------------


def budget_of(reserved: int) -> HistoryBudget:
    """An 8,000-token window: 6,000 prompt tokens once 2,000 are kept for the reply,
    21,000 B at the initial 3.5 B a token, less `reserved`."""
    return WindowAccounting(reserved_bytes=reserved).budget(8_000)


@pytest.mark.parametrize(
    ("reserved", "history_bytes"),
    [(0, 21_000), (1, 20_999), (20_999, 1), (21_000, 0), (21_001, 0), (50_000, 0)],
)
def test_what_every_request_reserves_comes_off_the_history_budget(
    reserved: int, history_bytes: int
) -> None:
    assert budget_of(reserved).history_bytes() == history_bytes


def test_without_a_window_there_is_no_budget() -> None:
    assert WindowAccounting(reserved_bytes=5_000).budget(None).history_bytes() is None


def test_the_reply_reserve_is_the_configured_cap_at_most_a_quarter_of_the_window() -> None:
    assert WindowAccounting(max_output_tokens=1_000).budget(8_000).window == WindowSize(
        8_000, 1_000
    )
    assert WindowAccounting(max_output_tokens=3_000).budget(8_000).window == WindowSize(
        8_000, 2_000
    )


def test_the_budget_follows_the_shared_calibration() -> None:
    calibration = TokenCalibration()
    budget = WindowAccounting(calibration=calibration).budget(8_000)
    calibration.bytes_per_token = 4.0

    assert budget.history_bytes() == 24_000


@pytest.mark.parametrize(
    "accounting", [{"reserved_bytes": -1}, {"max_output_tokens": 0}, {"max_output_tokens": -5}]
)
def test_impossible_window_accounting_is_a_value_error(accounting: dict[str, Any]) -> None:
    (name, value), *_ = accounting.items()
    relation = ">= 0" if name == "reserved_bytes" else "positive"
    with pytest.raises(ValueError, match=f"^{name} must be {relation}, got {value}$"):
        WindowAccounting(**accounting)


def test_the_least_window_accounting_is_accepted() -> None:
    accounting = WindowAccounting(reserved_bytes=0, max_output_tokens=1)

    assert accounting.budget(8_000).history_bytes() == int((8_000 - 1) * 3.5)


@pytest.mark.parametrize(
    ("excess", "savings", "count"),
    [
        (0, [5, 5], 0),  # nothing to free
        (-3, [5], 0),
        (1, [1, 9], 1),
        (5, [2, 3, 4], 2),  # exactly enough
        (6, [2, 3, 4], 3),  # one byte more needs the next
        (10, [2, 3, 4], 3),  # not enough at all: every one
        (4, [], 0),
    ],
)
def test_the_fewest_savings_that_fit(excess: int, savings: list[int], count: int) -> None:
    assert fewest_to_fit(excess, savings) == count


# --- the seed ------------------------------------------------------------------------------

SEED = SeedStrategy.from_settings(CompactionSettings())


def test_the_seed_snips_past_fifty_groups_keeping_three_then_the_newest() -> None:
    assert SEED.snip_span(50) is None
    assert SEED.snip_span(51) == (3, 5)  # 3 head groups, the marker and 46 = 50 in all
    assert SEED.snip_span(60) == (3, 14)
    assert replace(SEED, snip_max_groups=None).snip_span(500) is None


def test_the_seed_clears_all_but_the_three_newest_tool_groups() -> None:
    assert SEED.groups_to_clear([4, 6, 8]) == 0
    assert SEED.groups_to_clear([2, 4, 6, 8]) == 1
    assert SEED.groups_to_clear([]) == 0
    assert replace(SEED, keep_recent_tool_groups=None).groups_to_clear([1, 2, 3, 4, 5]) == 0


def test_the_seed_clears_no_more_within_the_window() -> None:
    assert SEED.clear_more(10**9, None, never_asked) == 0
    assert SEED.clear_more(21_000, 21_000, never_asked) == 0


def test_the_seed_over_the_window_keeps_fewer_recent_results_just_until_it_fits() -> None:
    candidates = [(7, 4_000), (8, 4_000), (9, 4_000)]

    assert SEED.clear_more(21_001, 21_000, lambda: candidates) == 1
    assert SEED.clear_more(25_000, 21_000, lambda: candidates) == 1
    assert SEED.clear_more(25_001, 21_000, lambda: candidates) == 2
    assert SEED.clear_more(99_000, 21_000, lambda: candidates) == 3


def test_the_seed_never_narrows_by_snipping() -> None:
    assert SEED.snip_more([(0, 100), (1, 5_000), (2, 5_000), (3, 100)], 4_000) is False


def test_the_seed_summarises_at_fifty_thousand_bytes_or_the_smaller_budget() -> None:
    assert SEED.summary_threshold(None) == 50_000
    assert SEED.summary_threshold(50_001) == 50_000
    assert SEED.summary_threshold(49_999) == 49_999


# --- cache-aware: the marks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "marks"),
    [
        (None, CacheMarks(100_000, 30_000, 40_000)),
        (1_000_000, CacheMarks(100_000, 30_000, 40_000)),  # the configured marks are smaller
        (200_000, CacheMarks(100_000, 30_000, 40_000)),  # half is exactly the high mark
        (199_998, CacheMarks(99_999, 30_000, 40_000)),
        (150_000, CacheMarks(75_000, 30_000, 40_000)),  # a fifth is exactly the low mark
        (149_995, CacheMarks(74_997, 29_999, 40_000)),
        (100_000, CacheMarks(50_000, 20_000, 30_000)),  # clear_at_least: at most high - low
        (99_999, CacheMarks(49_999, 19_999, 30_000)),
        (1, CacheMarks(1, 0, 1)),  # a high mark of at least a byte, the low one below it
        (0, CacheMarks(1, 0, 1)),
    ],
)
def test_the_cache_marks_for_a_budget(budget: int | None, marks: CacheMarks) -> None:
    assert CacheMarks.for_budget(CompactionSettings(), budget) == marks


def test_clear_at_least_is_the_configured_amount_while_the_marks_leave_room() -> None:
    settings = CompactionSettings(cache_clear_at_least_bytes=69_999)
    assert CacheMarks.for_budget(settings, None).clear_at_least == 69_999
    settings = CompactionSettings(cache_clear_at_least_bytes=70_001)
    assert CacheMarks.for_budget(settings, None).clear_at_least == 70_000


def test_a_low_mark_above_a_budgets_high_mark_is_kept_below_it() -> None:
    settings = CompactionSettings(cache_high_mark_share=0.1, cache_low_mark_share=0.5)

    assert CacheMarks.for_budget(settings, 100_000) == CacheMarks(10_000, 9_999, 1)


# --- cache-aware: one micro step -------------------------------------------------------------

MARKS = CacheMarks(high=100, low=50, clear_at_least=30)


def test_no_step_at_or_below_the_high_mark() -> None:
    assert batch_to_clear(100, [60, 60], MARKS) == 0
    assert batch_to_clear(101, [60, 60], MARKS) == 1


def test_no_step_while_everything_clearable_frees_less_than_clear_at_least() -> None:
    assert batch_to_clear(200, [10, 19], MARKS) == 0
    assert batch_to_clear(200, [10, 20], MARKS) == 2  # exactly clear_at_least: worth it


def test_a_step_stops_at_the_low_mark() -> None:
    assert batch_to_clear(101, [51, 10], MARKS) == 1  # 50 left: the low mark exactly
    assert batch_to_clear(101, [50, 10], MARKS) == 2  # 51 left: one more


def test_a_step_frees_at_least_clear_at_least_even_below_the_low_mark() -> None:
    marks = CacheMarks(high=100, low=90, clear_at_least=30)

    assert batch_to_clear(101, [15, 15, 15], marks) == 2  # 30 freed: enough
    assert batch_to_clear(101, [15, 15, 15], replace(marks, clear_at_least=31)) == 3


def test_a_step_that_cannot_reach_the_low_mark_clears_everything_clearable() -> None:
    assert batch_to_clear(1_000, [40, 40], MARKS) == 2


# --- cache-aware: the strategy object ----------------------------------------------------------

SMALL = CompactionSettings(
    strategy="cache-aware",
    cache_high_mark_bytes=100,
    cache_low_mark_bytes=50,
    cache_clear_at_least_bytes=0,
    cache_keep_recent_tool_groups=2,
)
GROUPS = [(10, 30), (11, 30), (12, 30), (13, 30)]


def test_cache_aware_asks_for_nothing_below_its_high_mark_and_within_the_window() -> None:
    strategy = CacheAwareStrategy(SMALL)

    assert strategy.clear_more(100, None, never_asked) == 0
    assert strategy.clear_more(40, 80, never_asked) == 0  # high: half of 80
    assert strategy.clear_more(1, 1, never_asked) == 0  # a budget at the (least) high mark


def test_cache_aware_clears_in_one_step_and_keeps_the_recent_groups() -> None:
    strategy = CacheAwareStrategy(SMALL)

    assert strategy.clear_more(150, None, lambda: GROUPS) == 2  # 13 and 12 stay
    assert strategy.groups_to_clear([10, 11, 12, 13, 14]) == 2  # the cut stays


def test_cache_aware_over_the_window_clears_into_the_recent_groups_just_until_it_fits() -> None:
    strategy = CacheAwareStrategy(SMALL)

    # Budget 80: the step clears 10 and 11 (150 → 90), still 10 over: 12 goes too.
    assert strategy.clear_more(150, 80, lambda: GROUPS) == 3
    assert strategy.groups_to_clear([10, 11, 12, 13, 14]) == 3


def test_cache_aware_narrowing_needs_only_what_the_step_left_over() -> None:
    strategy = CacheAwareStrategy(SMALL)

    assert strategy.clear_more(140, 80, lambda: GROUPS) == 2  # the step alone fits: 80


def test_cache_aware_forgets_its_cuts_on_reset() -> None:
    strategy = CacheAwareStrategy(SMALL)
    strategy.clear_more(150, 80, lambda: GROUPS)

    strategy.reset()

    assert strategy.groups_to_clear([10, 11, 12, 13]) == 0


def test_a_fresh_or_reset_cache_aware_strategy_clears_no_group_not_even_the_first() -> None:
    strategy = CacheAwareStrategy(SMALL)
    assert strategy.groups_to_clear([0, 1, 2]) == 0

    strategy.clear_more(150, None, lambda: [(0, 30), (1, 30), (2, 30), (3, 30)])
    strategy.reset()

    assert strategy.groups_to_clear([0, 1, 2]) == 0


def test_cache_aware_marks_follow_a_known_budget() -> None:
    # Budget 100: the high mark is 50, not the configured 100, so 60 B is past it.
    assert CacheAwareStrategy(SMALL).clear_more(60, 100, lambda: GROUPS) == 2


def test_cache_aware_never_clears_the_recent_groups_in_a_step() -> None:
    assert CacheAwareStrategy(SMALL).clear_more(150, None, lambda: GROUPS[:2]) == 0


def test_a_request_over_its_budget_is_narrowed_even_below_the_high_mark() -> None:
    # A budget of 0 B: the high mark stays at its least, 1 B, which the request does not
    # pass, yet it is over the budget.
    assert CacheAwareStrategy(SMALL).clear_more(1, 0, lambda: GROUPS) == 1


SNIPPING = CompactionSettings(cache_snip_max_groups=8, cache_snip_keep_groups=5)


def test_cache_aware_snips_past_its_maximum_in_one_step_and_then_waits() -> None:
    strategy = CacheAwareStrategy(SNIPPING)

    assert strategy.snip_span(8) is None
    assert strategy.snip_span(9) == (3, 8)  # 3 head groups, the marker, the newest 1
    assert strategy.snip_span(12) == (3, 8)  # 8 groups kept: not past the maximum
    assert strategy.snip_span(13) == (3, 12)  # 9 kept: cut again


KEPT = [(0, 10), (1, 10), (2, 10), (3, 100), (4, 100), (5, 100), (6, 50)]


def test_cache_aware_snips_more_over_the_oldest_groups_after_the_head() -> None:
    strategy = CacheAwareStrategy(SNIPPING)

    assert strategy.snip_more(KEPT, 101) is True
    assert strategy.snip_span(7) == (3, 5)  # positions 3 and 4 go: 200 B


def test_cache_aware_snips_exactly_enough() -> None:
    strategy = CacheAwareStrategy(SNIPPING)

    assert strategy.snip_more(KEPT, 100) is True
    assert strategy.snip_span(7) == (3, 4)


def test_cache_aware_never_snips_the_latest_group() -> None:
    strategy = CacheAwareStrategy(SNIPPING)

    assert strategy.snip_more(KEPT, 10_000) is True
    assert strategy.snip_span(7) == (3, 6)


def test_cache_aware_snips_nothing_when_nothing_is_over_or_nothing_can_go() -> None:
    strategy = CacheAwareStrategy(SNIPPING)

    assert strategy.snip_more(KEPT, 0) is False
    assert strategy.snip_more(KEPT[:4], 500) is False  # the head and the latest only
    assert strategy.snip_span(7) is None


def test_cache_aware_summarises_at_its_threshold_or_its_share_of_the_budget() -> None:
    strategy = CacheAwareStrategy(CompactionSettings())

    assert strategy.summary_threshold(None) == 160_000
    assert strategy.summary_threshold(21_000) == 15_750
    assert strategy.summary_threshold(300_000) == 225_000  # a share, even above 160,000


def test_the_strategy_is_the_one_the_settings_name() -> None:
    seed = strategy_for(CompactionSettings(strategy="seed"))
    cache_aware = strategy_for(CompactionSettings(strategy="cache-aware"))

    assert seed.summary_threshold(None) == 50_000
    assert cache_aware.summary_threshold(None) == 160_000


# --- layer 1 for a window ------------------------------------------------------------------------


def layer_one(budget: int, **settings: Any) -> tuple[int, int, int, int]:
    chosen = settings_for_budget(CompactionSettings(**settings), budget)
    return (
        chosen.persist_threshold_bytes,
        chosen.batch_budget_bytes,
        chosen.preview_head_bytes,
        chosen.preview_tail_bytes,
    )


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (1_000_000, (30_000, 200_000, 2_000, 2_000)),  # the configured numbers are smaller
        (120_000, (30_000, 60_000, 2_000, 2_000)),  # a quarter is exactly the threshold
        (40_003, (10_000, 20_001, 2_000, 2_000)),  # rounded down
        (20_000, (5_000, 10_000, 1_250, 1_250)),  # a preview: a quarter of the threshold
        (0, (1, 1, 1, 1)),  # never nothing
    ],
)
def test_layer_one_for_a_budget(budget: int, expected: tuple[int, int, int, int]) -> None:
    assert layer_one(budget) == expected


def test_layer_one_for_a_budget_keeps_a_preview_that_is_off_off() -> None:
    assert layer_one(20_000, preview_head_bytes=0) == (5_000, 10_000, 0, 1_250)
