"""`CompactionManager`: request histories, the summary state, caching, the circuit breaker,
and the proactive and reactive compactions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.core.events import Notice
from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    ToolPairingError,
    assistant_message,
    tool_call,
    user_message,
)
from agent_tutorial.features.compaction import (
    CompactionError,
    CompactionManager,
    CompactionSettings,
    CompactionSummary,
    history_utf8_bytes,
    micro_compact_history,
    sizes,
    snip_compact_history,
    summary_message,
    transcript_jsonl,
)
from agent_tutorial.features.compaction import index as canonical_index
from agent_tutorial.features.compaction.layers import CheapLayers, LayeredRequest
from tests.test_compaction_support import (
    BIG,
    SUMMARY,
    TRANSCRIPT_1,
    FakeSummarizer,
    Recorder,
    history_with,
    make_manager,
    tool_group,
)


def cheap_layers(history: History) -> tuple[ChatMessage, ...]:
    return micro_compact_history(snip_compact_history(history))


def failure(text: str = "the model wrote prose") -> CompactionError:
    return CompactionError(text)


@pytest.mark.parametrize(
    "settings",
    [
        {"persist_threshold_bytes": 0},
        {"batch_budget_bytes": -1},
        {"proactive_threshold_bytes": 0},
        {"preview_head_bytes": -1},
        {"preview_head_bytes": 0, "preview_tail_bytes": 0},
        {"keep_recent_tool_groups": -1},
        {"reactive_tail_groups": -1},
        {"snip_max_groups": 2, "snip_keep_head_groups": 0},
        {"snip_keep_head_groups": 49},
        {"snip_keep_head_groups": -1},
    ],
)
def test_invalid_settings_are_a_value_error(workspace: Path, settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_manager(workspace, **settings)


def test_an_unknown_strategy_is_refused(workspace: Path) -> None:
    with pytest.raises(ValueError, match="compaction strategy must be one of"):
        CompactionManager(workspace, FakeSummarizer(), strategy="fastest")  # type: ignore[arg-type]


def test_strategy_and_window_keywords_override_the_settings(workspace: Path) -> None:
    settings = CompactionSettings(snip_max_groups=20, context_window_tokens=8_192)

    manager = CompactionManager(workspace, FakeSummarizer(), settings, context_window_tokens=4_096)

    assert manager.settings == replace(settings, context_window_tokens=4_096)


def test_prepare_below_the_threshold_is_micro_of_snip(workspace: Path) -> None:
    history = history_with(60, "output")

    assert make_manager(workspace).prepare(history) == cheap_layers(history)


def test_prepare_leaves_canonical_history_untouched(workspace: Path) -> None:
    history = history_with(60, BIG)
    before = list(history)

    make_manager(workspace).prepare(history)

    assert history == before


def test_unpaired_history_fails_before_anything_is_written_or_summarised(
    workspace: Path,
) -> None:
    summarizer = FakeSummarizer()
    history: list[ChatMessage] = [
        user_message(BIG * 3),
        assistant_message(None, [tool_call("c1", "bash", "{}")]),
    ]

    with pytest.raises(ToolPairingError):
        make_manager(workspace, summarizer).prepare(history)

    assert summarizer.calls == []
    assert not (workspace / ".agent_tutorial").exists()


def test_request_of_exactly_the_threshold_is_not_summarised(workspace: Path) -> None:
    history = [user_message("a" * (50_000 - len('{"content":"","role":"user"}\n')))]
    summarizer = FakeSummarizer()

    request = make_manager(workspace, summarizer).prepare(history)

    assert history_utf8_bytes(request) == 50_000
    assert request == tuple(history)
    assert summarizer.calls == []


def test_request_one_byte_over_the_threshold_is_summarised(workspace: Path) -> None:
    history = [user_message("a" * (50_001 - len('{"content":"","role":"user"}\n')))]

    request = make_manager(workspace).prepare(history)

    assert request == (summary_message(SUMMARY, TRANSCRIPT_1),)


def test_summary_replaces_the_request_and_keeps_the_transcript_on_disk(workspace: Path) -> None:
    history = history_with(2, BIG)
    summarizer = FakeSummarizer()

    request = make_manager(workspace, summarizer).prepare(history)

    assert request == (summary_message(SUMMARY, TRANSCRIPT_1),)
    assert summarizer.calls == [cheap_layers(history)]
    assert (workspace / TRANSCRIPT_1).read_bytes() == transcript_jsonl(history)


def test_summarizer_sees_the_cheap_layer_history(workspace: Path) -> None:
    history = history_with(70, "y" * 2_000)
    summarizer = FakeSummarizer()

    make_manager(workspace, summarizer, proactive_threshold_bytes=5_000).prepare(history)

    assert summarizer.calls == [cheap_layers(history)]


def test_transcript_exists_when_the_summarizer_is_called(workspace: Path) -> None:
    history = history_with(2, BIG)
    seen: list[bytes] = []
    summarizer = FakeSummarizer(
        before_each=lambda _: seen.append((workspace / TRANSCRIPT_1).read_bytes())
    )

    make_manager(workspace, summarizer).prepare(history)

    assert seen == [transcript_jsonl(history)]


def test_failed_summary_keeps_the_transcript_and_sends_the_cheap_history(
    workspace: Path,
) -> None:
    history = history_with(2, BIG)
    recorder = Recorder()
    manager = make_manager(workspace, FakeSummarizer([failure()]), recorder=recorder)

    request = manager.prepare(history)

    assert request == cheap_layers(history)
    assert (workspace / TRANSCRIPT_1).read_bytes() == transcript_jsonl(history)
    (notice,) = recorder.notices()
    assert notice.level == "warning"
    assert "the model wrote prose" in notice.text


def test_unwritable_transcript_means_the_summarizer_is_never_called(workspace: Path) -> None:
    (workspace / ".agent_tutorial").write_text("a file, not a directory")
    summarizer = FakeSummarizer()
    recorder = Recorder()
    history = history_with(2, BIG)

    request = make_manager(workspace, summarizer, recorder=recorder).prepare(history)

    assert summarizer.calls == []
    assert request == cheap_layers(history)
    assert "real directory" in recorder.notices()[0].text


def test_after_a_summary_the_request_is_the_summary_plus_what_came_after(
    workspace: Path,
) -> None:
    history = history_with(2, BIG)
    manager = make_manager(workspace)
    manager.prepare(history)
    covered = len(history)
    history.extend([user_message("next"), *tool_group(7)])

    request = manager.prepare(history)

    assert request == cheap_layers([summary_message(SUMMARY, TRANSCRIPT_1), *history[covered:]])


def test_restored_summary_gives_the_request_it_gave_before_a_restart(workspace: Path) -> None:
    history = history_with(2, BIG)
    recorder = Recorder()
    before_restart = make_manager(workspace, recorder=recorder)
    before_restart.prepare(history)
    history.extend(tool_group(8, "more"))
    expected = before_restart.prepare(history)
    details = recorder.applied("summary")[0].details

    after_restart = make_manager(workspace, FakeSummarizer([failure("must not be asked")]))
    after_restart.restore_summary(
        str(details["summary_content"]), int(str(details["covered_messages"]))
    )

    assert after_restart.prepare(history) == expected


def test_restore_summary_refuses_what_is_not_a_summary(workspace: Path) -> None:
    manager = make_manager(workspace)

    with pytest.raises(ValueError, match="not a compaction summary"):
        manager.restore_summary('{"kind": "other"}', 3)
    with pytest.raises(ValueError, match="covered_messages"):
        manager.restore_summary(summary_message(SUMMARY, TRANSCRIPT_1).content, -1)


@pytest.mark.parametrize("covered", [999, 2])  # beyond the history; inside a tool group
def test_summary_that_does_not_fit_the_history_is_not_applied(
    workspace: Path, covered: int
) -> None:
    history = history_with(3)
    manager = make_manager(workspace)
    manager.restore_summary(summary_message(SUMMARY, TRANSCRIPT_1).content, covered)

    assert manager.prepare(history) == cheap_layers(history)


def test_identical_history_is_served_from_the_cache(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = history_with(2, BIG)
    summarizer = FakeSummarizer([failure()])
    manager = make_manager(workspace, summarizer)
    first = manager.prepare(history)
    measured = count_measurements(monkeypatch)

    second = manager.prepare(list(history))

    assert second is first
    assert measured == []
    assert len(summarizer.calls) == 1


def test_a_preview_is_remembered_until_the_history_grows(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = make_manager(workspace)
    history = history_with(60, "output")
    grown = [*history, user_message("and now?")]
    expected = [history_utf8_bytes(cheap_layers(history)), history_utf8_bytes(cheap_layers(grown))]
    builds = count_builds(monkeypatch)

    first = manager.next_request_bytes(history)
    again = manager.next_request_bytes(list(history))
    after_growing = manager.next_request_bytes(grown)

    assert [first, after_growing] == expected
    assert again == first
    assert len(builds) == 2  # the redraw of the same history built nothing


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Record every request the cheap layers build from now on."""
    builds: list[object] = []
    real = CheapLayers.build

    def counting(layers: CheapLayers, *args: Any, **kwargs: Any) -> LayeredRequest:
        builds.append(args)
        return real(layers, *args, **kwargs)

    monkeypatch.setattr(CheapLayers, "build", counting)
    return builds


def test_append_measures_only_the_appended_messages(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = history_with(80, "output")
    manager = make_manager(workspace)
    manager.prepare(history)
    measured = count_measurements(monkeypatch)
    appended = tool_group(500, "new", calls=2)
    history.extend(appended)

    request = manager.prepare(history)

    canonical_measured = [m for m in measured if any(m is old for old in history)]
    assert len(canonical_measured) == len(appended)
    assert all(any(m is new for new in appended) for m in canonical_measured)
    assert request == cheap_layers(history)


def count_measurements(monkeypatch: pytest.MonkeyPatch) -> list[ChatMessage]:
    """Record every message whose size is computed from now on."""
    measured: list[ChatMessage] = []
    real = sizes.message_utf8_bytes

    def counting(message: ChatMessage) -> int:
        measured.append(message)
        return real(message)

    monkeypatch.setattr(canonical_index, "message_utf8_bytes", counting)
    return measured


def test_incremental_prepares_match_a_fresh_manager(workspace: Path) -> None:
    history = history_with(1, "start")
    manager = make_manager(workspace)
    for number in range(70):
        history.extend(tool_group(100 + number, "z" * 300, calls=1 + number % 3))
        manager.prepare(history)

    assert manager.prepare(history) == make_manager(workspace, id_prefix="b").prepare(history)


def test_a_different_history_is_prepared_from_scratch(workspace: Path) -> None:
    manager = make_manager(workspace)
    manager.prepare(history_with(60, "one"))
    other = history_with(55, "two", prompt="another session")

    assert manager.prepare(other) == cheap_layers(other)
    assert manager.prepare([]) == ()


def test_a_different_history_does_not_inherit_the_summary(workspace: Path) -> None:
    manager = make_manager(workspace)
    manager.compact_proactively(history_with(4, "one"))
    other = history_with(6, "two", prompt="another session")

    assert manager.prepare(other) == cheap_layers(other)


def test_the_last_request_size_is_kept(workspace: Path) -> None:
    history = history_with(60, "output")
    manager = make_manager(workspace)

    request = manager.prepare(history)

    assert manager.last_request_bytes == history_utf8_bytes(request)
    assert manager.last_request_bytes < history_utf8_bytes(history)


# --- the circuit breaker ------------------------------------------------------------------


def prepare_growing(manager: CompactionManager, history: list[ChatMessage], times: int) -> None:
    """Each call appends a group big enough to keep the request over the threshold."""
    for _ in range(times):
        history.extend(tool_group(len(history), "w" * 60_000))
        manager.prepare(history)


def test_three_failures_in_a_row_switch_automatic_summaries_off(workspace: Path) -> None:
    summarizer = FakeSummarizer([failure()])
    recorder = Recorder()
    manager = make_manager(workspace, summarizer, recorder=recorder)
    history: list[ChatMessage] = [user_message("go")]

    prepare_growing(manager, history, 5)

    assert len(summarizer.calls) == 3  # prepares 4 and 5 made no attempt: the breaker is open
    notices = recorder.notices()
    assert len(notices) == 4
    assert notices[-1] == Notice(
        "warning",
        "automatic summaries are off for this session after 3 failures in a row; "
        "/compact still works",
    )


def test_the_breaker_opens_after_the_configured_number_of_failures(workspace: Path) -> None:
    summarizer = FakeSummarizer([failure()])
    recorder = Recorder()
    manager = make_manager(workspace, summarizer, recorder=recorder, summary_failure_limit=2)
    history: list[ChatMessage] = [user_message("go")]

    prepare_growing(manager, history, 4)

    assert len(summarizer.calls) == 2
    assert "after 2 failures in a row" in recorder.notices()[-1].text


def test_each_prepare_makes_at_most_one_summary_attempt(workspace: Path) -> None:
    summarizer = FakeSummarizer([failure()])
    manager = make_manager(workspace, summarizer)
    history: list[ChatMessage] = [user_message("go")]

    prepare_growing(manager, history, 1)
    assert len(summarizer.calls) == 1
    prepare_growing(manager, history, 1)
    assert len(summarizer.calls) == 2


def test_a_successful_summary_resets_the_failure_count(workspace: Path) -> None:
    outcomes: list[CompactionSummary | CompactionError] = [
        failure(),
        failure(),
        SUMMARY,
        failure(),
        failure(),
    ]
    summarizer = FakeSummarizer(outcomes)
    manager = make_manager(workspace, summarizer)
    history: list[ChatMessage] = [user_message("go")]

    prepare_growing(manager, history, 5)

    # Without the reset the third failure in all would open the breaker: 4 calls, not 5.
    assert len(summarizer.calls) == 5


def test_a_successful_recovery_summary_resets_the_failure_count(workspace: Path) -> None:
    outcomes: list[CompactionSummary | CompactionError] = [failure(), failure(), SUMMARY, failure()]
    summarizer = FakeSummarizer(outcomes)
    manager = make_manager(workspace, summarizer)
    history: list[ChatMessage] = [user_message("go")]
    prepare_growing(manager, history, 2)  # two automatic summaries fail

    recovered = manager.recover_from_overflow(history)  # the model's summary works
    prepare_growing(manager, history, 2)  # two more fail: two in a row, not four

    # Transcripts 1 and 2 were written for the failed attempts; the recovery wrote the third.
    assert recovered[0] == summary_message(SUMMARY, TRANSCRIPT_1.replace("id-1", "id-3"))
    assert len(summarizer.calls) == 5  # without the reset, the last prepare would not try


# --- events -------------------------------------------------------------------------------


def test_micro_is_reported_only_when_it_clears_more(workspace: Path) -> None:
    recorder = Recorder()
    manager = make_manager(workspace, recorder=recorder)
    history = history_with(5)

    manager.prepare(history)
    history.append(user_message("and now?"))
    manager.prepare(history)
    history.extend(tool_group(9))
    manager.prepare(history)

    assert [(event.text, event.count) for event in recorder.applied("micro")] == [
        ("micro: 2 results cleared", 2),
        ("micro: 1 result cleared", 1),  # what this step did, as its count says
    ]


def test_snip_is_reported_with_the_groups_it_omits(workspace: Path) -> None:
    recorder = Recorder()
    manager = make_manager(workspace, recorder=recorder)

    manager.prepare(history_with(60))  # 61 groups: 12 omitted

    (event,) = recorder.applied("snip")
    assert (event.text, event.count) == ("snip: 12 groups omitted", 12)
    assert event.bytes_saved > 0


def test_summary_event_records_what_a_resumed_session_needs(workspace: Path) -> None:
    history = history_with(2, BIG)
    recorder = Recorder()

    request = make_manager(workspace, recorder=recorder).prepare(history)

    (event,) = recorder.applied("summary")
    before, after = history_utf8_bytes(cheap_layers(history)), history_utf8_bytes(request)
    assert event.text == (
        f"summary: {before:,} B → {after:,} B, transcript {TRANSCRIPT_1} (threshold: seed, "
        "50,000 B; raise it with [compaction] proactive_threshold_bytes, or use --compaction "
        "cache-aware to follow the window)"
    )
    assert event.bytes_saved == before - after
    assert event.details["summary_content"] == request[0].content
    assert event.details["covered_messages"] == len(history)
    assert event.details["transcript_path"] == TRANSCRIPT_1


# --- proactive and reactive compaction -------------------------------------------------------


def test_compact_proactively_summarises_the_whole_history_without_cheap_layers(
    workspace: Path,
) -> None:
    history = history_with(60, "output")
    summarizer = FakeSummarizer()
    manager = make_manager(workspace, summarizer)

    outcome = manager.compact_proactively(history)

    assert summarizer.calls == [tuple(history)]
    assert outcome.history == (summary_message(SUMMARY, TRANSCRIPT_1),)
    assert outcome.transcript.path.read_bytes() == transcript_jsonl(history)
    assert manager.prepare(history) == outcome.history


def test_compact_proactively_passes_the_focus_to_the_summarizer(workspace: Path) -> None:
    history = history_with(2)
    summarizer = FakeSummarizer()

    make_manager(workspace, summarizer).compact_proactively(history, focus="the parser ")

    assert summarizer.calls == [(*history, user_message("Focus the summary on: the parser"))]


def test_compact_proactively_after_a_summary_starts_from_that_summary(workspace: Path) -> None:
    history = history_with(2)
    summarizer = FakeSummarizer()
    manager = make_manager(workspace, summarizer)
    first = manager.compact_proactively(history)
    history.extend(tool_group(5))

    manager.compact_proactively(history)

    assert summarizer.calls[1] == (*first.history, *tool_group(5))


def test_compact_proactively_reports_its_summary(workspace: Path) -> None:
    recorder = Recorder()
    history = history_with(2)

    outcome = make_manager(workspace, recorder=recorder).compact_proactively(history)

    (event,) = recorder.applied("summary")
    assert event.details["summary_content"] == outcome.history[0].content
    assert event.details["covered_messages"] == len(history)


def test_compact_proactively_raises_when_the_summary_fails(workspace: Path) -> None:
    manager = make_manager(workspace, FakeSummarizer([failure()]))

    with pytest.raises(CompactionError, match="prose"):
        manager.compact_proactively(history_with(2))

    assert (workspace / TRANSCRIPT_1).exists()


def test_prompt_too_long_keeps_the_last_five_groups_after_the_summary(workspace: Path) -> None:
    history = history_with(9, "out")  # 10 groups
    summarizer = FakeSummarizer()
    manager = make_manager(workspace, summarizer)

    recovered = manager.recover_from_overflow(history)

    assert recovered == (summary_message(SUMMARY, TRANSCRIPT_1), *history[-10:])
    assert summarizer.calls == [cheap_layers(history)]
    assert (workspace / TRANSCRIPT_1).read_bytes() == transcript_jsonl(history)
    assert manager.prepare(history) == cheap_layers(recovered)


def test_recover_from_overflow_falls_back_to_an_extractive_summary(workspace: Path) -> None:
    recorder = Recorder()
    manager = make_manager(workspace, FakeSummarizer([failure()]), recorder=recorder)
    history = history_with(9, "out", prompt="Fix the flaky test")

    recovered = manager.recover_from_overflow(history)

    assert '"current_goal":"Fix the flaky test"' in str(recovered[0].content)
    assert recovered[1:] == tuple(history[-10:])
    assert "using an extractive summary instead" in recorder.notices()[0].text
    (event,) = recorder.applied("reactive")
    assert event.details["summary_content"] == recovered[0].content
    assert event.details["covered_messages"] == len(history) - 10


def test_the_fallback_summary_keeps_to_the_managers_limits(workspace: Path) -> None:
    manager = make_manager(workspace, FakeSummarizer([failure()]), extractive_goal_chars=5)

    recovered = manager.recover_from_overflow(history_with(9, "out", prompt="Fix the test"))

    assert '"current_goal":"Fix …"' in str(recovered[0].content)


def test_without_window_accounting_the_manager_calibrates_by_its_settings(
    workspace: Path,
) -> None:
    settings = CompactionSettings(context_window_tokens=8_000, initial_bytes_per_token=4.0)

    manager = CompactionManager(workspace, FakeSummarizer(), settings)

    assert manager.summary_threshold_bytes == 24_000  # 6,000 prompt tokens at 4 B


def test_recover_from_overflow_uses_the_summarizer_while_it_works(workspace: Path) -> None:
    manager = make_manager(workspace)

    recovered = manager.recover_from_overflow(history_with(3))

    assert recovered[0] == summary_message(SUMMARY, TRANSCRIPT_1)


def test_recover_from_overflow_with_the_circuit_open_skips_the_model(workspace: Path) -> None:
    summarizer = FakeSummarizer([failure()])
    manager = make_manager(workspace, summarizer)
    history: list[ChatMessage] = [user_message("go")]
    prepare_growing(manager, history, 3)

    recovered = manager.recover_from_overflow(history)

    assert len(summarizer.calls) == 3
    assert '"current_goal":"go"' in str(recovered[0].content)


def test_recover_from_overflow_without_a_transcript_ends_the_run(workspace: Path) -> None:
    (workspace / ".agent_tutorial").symlink_to(workspace)
    summarizer = FakeSummarizer()

    with pytest.raises(ContextOverflowError, match="could not be compacted"):
        make_manager(workspace, summarizer).recover_from_overflow(history_with(3))

    assert summarizer.calls == []


def test_reactive_compaction_says_why_it_happened(workspace: Path) -> None:
    recorder = Recorder()
    manager = make_manager(workspace, recorder=recorder)
    history = history_with(9, "out")

    recovered = manager.recover_from_overflow(history)

    (event,) = recorder.applied("reactive")
    before = history_utf8_bytes(cheap_layers(history))
    after = history_utf8_bytes(recovered)
    assert event.text == (
        f"reactive: prompt too long, {before:,} B → {after:,} B, transcript {TRANSCRIPT_1}"
    )
