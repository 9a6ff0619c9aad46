"""The retry after a context overflow (issue 28): always smaller than the refused request,
sized with the provider's own count where its error states one, and the calibration a
refusal leaves for the rest of the session. Pure rules, tested on both sides of each line."""

from __future__ import annotations

import pytest

from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.features.compaction.budget import TokenCalibration, WindowAccounting
from agent_tutorial.features.compaction.index import CanonicalIndex
from agent_tutorial.features.compaction.persist import is_persisted
from agent_tutorial.features.compaction.retry import (
    Refusal,
    retry_history_limit,
    retry_limit_bytes,
)
from agent_tutorial.features.compaction.settings import CompactionSettings
from agent_tutorial.features.compaction.sizes import message_utf8_bytes

HALF = CompactionSettings().unstated_retry_share


def test_with_a_count_and_a_window_the_retry_fits_the_window_at_the_stated_ratio() -> None:
    # 9,000 tokens for 36,000 B: 4 B a token, so 6,000 tokens of room hold 24,000 B.
    refusal = Refusal(request_bytes=36_000, history_bytes=30_000, prompt_tokens=9_000)

    assert retry_limit_bytes(refusal, prompt_room_tokens=6_000, unstated_share=HALF) == 24_000


def test_the_stated_ratio_is_used_for_the_retry_however_implausible() -> None:
    refusal = Refusal(request_bytes=30_000, history_bytes=20_000, prompt_tokens=1_000)  # 30 B

    assert retry_limit_bytes(refusal, prompt_room_tokens=500, unstated_share=HALF) == 15_000


def test_a_retry_is_smaller_than_the_refused_request_even_when_the_window_is_larger() -> None:
    """A server whose count says the request fit its window is still believed it did not."""
    refusal = Refusal(request_bytes=10_000, history_bytes=5_000, prompt_tokens=1_000)

    assert retry_limit_bytes(refusal, prompt_room_tokens=1_000, unstated_share=HALF) == 9_999
    assert retry_limit_bytes(refusal, prompt_room_tokens=999, unstated_share=HALF) == 9_990


@pytest.mark.parametrize(
    ("prompt_tokens", "room"), [(None, 6_000), (9_000, None), (None, None), (0, 6_000)]
)
def test_without_a_count_or_a_window_the_retry_is_at_most_half(
    prompt_tokens: int | None, room: int | None
) -> None:
    refusal = Refusal(request_bytes=30_001, history_bytes=20_000, prompt_tokens=prompt_tokens)

    assert retry_limit_bytes(refusal, prompt_room_tokens=room, unstated_share=HALF) == 15_000


def test_the_share_without_a_count_is_configurable_and_rounds_down() -> None:
    refusal = Refusal(request_bytes=1_000, history_bytes=500)

    assert retry_limit_bytes(refusal, prompt_room_tokens=None, unstated_share=0.25) == 250
    assert retry_limit_bytes(refusal, prompt_room_tokens=None, unstated_share=1.0) == 999
    assert HALF == 0.5


def test_a_window_with_no_room_for_the_prompt_leaves_no_room_for_a_retry() -> None:
    refusal = Refusal(request_bytes=10_000, history_bytes=5_000, prompt_tokens=1_000)

    assert retry_limit_bytes(refusal, prompt_room_tokens=0, unstated_share=HALF) == 0


def test_a_request_of_one_byte_leaves_no_room_for_a_retry() -> None:
    refusal = Refusal(request_bytes=1, history_bytes=1, prompt_tokens=None)

    assert retry_limit_bytes(refusal, prompt_room_tokens=None, unstated_share=HALF) == 0


def test_the_history_limit_takes_out_the_refused_requests_fixed_part_or_the_reserve() -> None:
    refusal = Refusal(request_bytes=30_000, history_bytes=20_000, prompt_tokens=None)

    assert retry_history_limit(refusal, 15_000, reserved_bytes=9_999) == 5_000  # its own 10,000
    assert retry_history_limit(refusal, 15_000, reserved_bytes=10_001) == 4_999
    assert retry_history_limit(refusal, 9_000, reserved_bytes=0) == 0  # never below nothing


@pytest.mark.parametrize(("history", "limit"), [(20_000, 11_000), (19_999, 10_999)])
def test_a_retry_in_a_smaller_form_takes_out_its_own_reserve_and_what_the_refused_carried_over(
    history: int, limit: int
) -> None:
    """Refused in the full form (10,000 B reserved), retried in the compact one (4,000 B):
    the compact reserve, and any byte the refused request carried beyond its own reserve."""
    refusal = Refusal(request_bytes=30_000, history_bytes=history, reserved_bytes=10_000)

    assert retry_history_limit(refusal, 15_000, reserved_bytes=4_000) == limit


@pytest.mark.parametrize("history", [-1, 30_001])
def test_a_refusal_whose_history_is_not_part_of_it_is_a_mistake(history: int) -> None:
    with pytest.raises(ValueError, match="history_bytes"):
        Refusal(request_bytes=30_000, history_bytes=history)


def test_a_refusal_of_all_history_or_none_is_one() -> None:
    assert Refusal(request_bytes=5, history_bytes=5).history_bytes == 5
    assert Refusal(request_bytes=5, history_bytes=0).history_bytes == 0


# --- what a refusal teaches the calibration ---------------------------------------------------


def test_before_any_count_a_token_weighs_at_most_4_bytes() -> None:
    generous = TokenCalibration(CompactionSettings(initial_bytes_per_token=6.0))

    assert generous.tokens_for(4_000) == 1_000
    assert generous.bytes_for(1_000) == 4_000


def test_a_start_below_4_bytes_a_token_is_kept() -> None:
    calibration = TokenCalibration(CompactionSettings(initial_bytes_per_token=3.5))

    assert calibration.tokens_for(3_500) == 1_000


def test_once_counted_the_calibration_may_go_above_4_bytes_a_token() -> None:
    calibration = TokenCalibration(CompactionSettings(initial_bytes_per_token=6.0))
    calibration.observe(6_000, 1_000)

    assert calibration.tokens_for(6_000) == 1_000


def test_a_refusals_count_is_taken_whole_when_plausible() -> None:
    calibration = TokenCalibration()
    calibration.learn_from_refusal(25_000, 10_000)

    assert calibration.bytes_per_token == 2.5
    assert calibration.observations == 1


@pytest.mark.parametrize(("request_bytes", "taken"), [(1_000, True), (999, False)])
def test_a_refusals_count_below_the_plausible_range_is_not_kept(
    request_bytes: int, taken: bool
) -> None:
    calibration = TokenCalibration()  # plausible from 1 to 8 bytes a token
    calibration.learn_from_refusal(request_bytes, 1_000)

    assert (calibration.bytes_per_token == request_bytes / 1_000) is taken
    assert calibration.observations == int(taken)


@pytest.mark.parametrize(("request_bytes", "taken"), [(8_000, True), (8_001, False)])
def test_a_refusals_count_above_the_plausible_range_is_not_kept(
    request_bytes: int, taken: bool
) -> None:
    calibration = TokenCalibration()
    calibration.learn_from_refusal(request_bytes, 1_000)

    assert (calibration.bytes_per_token == request_bytes / 1_000) is taken


@pytest.mark.parametrize("tokens", [0, -5])
def test_a_refusal_counting_no_tokens_teaches_nothing(tokens: int) -> None:
    calibration = TokenCalibration()
    calibration.learn_from_refusal(5_000, tokens)

    assert calibration.observations == 0


# --- a result persisted once the window is known ------------------------------------------------


def test_a_result_shown_instead_changes_the_requests_sizes_not_canonical_history() -> None:
    history = [user_message("go"), *_read("a", "x" * 5_000), *_read("b", "y" * 300)]
    index = CanonicalIndex.of(history)
    before_last = index.message_bytes(3, 5)
    preview = tool_message("<persisted-tool-result>\nshort\n</persisted-tool-result>", "a")

    index.show_instead(2, preview)

    assert index.messages == history
    assert index.shown[2] is preview
    assert index.message_bytes(2, 3) == message_utf8_bytes(preview)
    assert index.message_bytes(3, 5) == before_last
    assert index.utf8_bytes == sum(message_utf8_bytes(message) for message in index.shown)


@pytest.mark.parametrize(
    ("content", "persisted"),
    [
        ("<persisted-tool-result>\npath: x\n", True),
        ("Error [io]: the output was too large to show inline\n<persisted-tool-result>\n", True),
        (" <persisted-tool-result>\n", False),
        ("Error [io]: <persisted-tool-result>\n", False),
        ("the word <persisted-tool-result>\n in a file", False),
    ],
)
def test_a_preview_is_known_so_it_is_never_persisted_again(content: str, persisted: bool) -> None:
    assert is_persisted(content) is persisted


def _read(call_id: str, content: str) -> list[ChatMessage]:
    call = tool_call(call_id, "read_file", '{"path": "f"}')
    return [assistant_message(None, (call,)), tool_message(content, call_id)]


def test_a_refusal_counting_one_token_is_a_count() -> None:
    calibration = TokenCalibration()
    calibration.learn_from_refusal(5, 1)

    assert calibration.bytes_per_token == 5


def test_each_refusal_taken_is_one_more_observation() -> None:
    calibration = TokenCalibration()
    calibration.learn_from_refusal(3_000, 1_000)
    calibration.learn_from_refusal(2_000, 1_000)

    assert calibration.observations == 2
    assert calibration.bytes_per_token == 2


# --- what every request carries, in the form a window takes ------------------------------------


@pytest.mark.parametrize(
    ("window", "reserved"), [(16_384, 4_000), (4_096, 4_000), (16_385, 10_000), (None, 10_000)]
)
def test_a_window_of_16k_or_less_reserves_the_compact_fixed_part(
    window: int | None, reserved: int
) -> None:
    accounting = WindowAccounting(reserved_bytes=10_000, compact_reserved_bytes=4_000)

    assert accounting.reserved_for(window) == reserved
    assert accounting.budget(window).reserved_bytes == reserved


def test_without_a_compact_form_every_window_reserves_the_full_one() -> None:
    assert WindowAccounting(reserved_bytes=10_000).budget(4_096).reserved_bytes == 10_000


def test_a_fixed_part_below_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^reserved_bytes must be >= 0, got -1$"):
        WindowAccounting(reserved_bytes=-1)
    with pytest.raises(ValueError, match=r"^compact_reserved_bytes must be >= 0, got -1$"):
        WindowAccounting(compact_reserved_bytes=-1)


def test_a_fixed_part_of_nothing_is_one() -> None:
    accounting = WindowAccounting(reserved_bytes=0, compact_reserved_bytes=0)

    assert accounting.reserved_for(4_096) == accounting.reserved_for(None) == 0
