"""Properties over random paired histories with multi-call groups and earlier snip markers:
every layer keeps pairing, and a manager fed the history piece by piece prepares exactly
what the pure layers — and a fresh manager with the same summary state — give."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    system_message,
    validate_tool_pairing,
)
from agent_tutorial.features.compaction import (
    CompactionManager,
    CompactionSettings,
    CompactionSummary,
    micro_compact_history,
    snip_compact_history,
)
from agent_tutorial.features.compaction.index import snip_marker
from tests.conftest import costly_property
from tests.strategies import MessageGroup, paired_message_groups
from tests.test_compaction_support import Recorder, counting_ids, make_manager


@st.composite
def histories(draw: st.DrawFn) -> list[MessageGroup]:
    """Paired message groups, sometimes with markers left by an earlier snip."""
    groups = draw(paired_message_groups(min_tool_groups=draw(st.integers(0, 14)), max_groups=30))
    markers = draw(st.lists(st.tuples(st.integers(0, len(groups)), st.integers(1, 40)), max_size=2))
    for position, omitted in sorted(markers, reverse=True):
        groups.insert(position, (snip_marker(omitted),))
    return groups


@st.composite
def layer_settings(draw: st.DrawFn) -> dict[str, Any]:
    max_groups = draw(st.integers(3, 12))
    return {
        "snip_max_groups": max_groups,
        "snip_keep_head_groups": draw(st.integers(0, max_groups - 2)),
        "keep_recent_tool_groups": draw(st.integers(0, 4)),
        "reactive_tail_groups": draw(st.integers(0, 6)),
        "proactive_threshold_bytes": draw(st.sampled_from([400, 1_500, 4_000, 10**9])),
    }


def flatten(groups: list[MessageGroup]) -> list[ChatMessage]:
    return [message for group in groups for message in group]


@costly_property
@given(groups=histories(), layers=layer_settings())
def test_every_layer_keeps_the_history_paired(
    groups: list[MessageGroup], layers: dict[str, Any]
) -> None:
    history = flatten(groups)
    snipped = snip_compact_history(
        history,
        max_groups=layers["snip_max_groups"],
        keep_head_groups=layers["snip_keep_head_groups"],
    )
    validate_tool_pairing(snipped)
    validate_tool_pairing(
        micro_compact_history(snipped, keep_recent_tool_groups=layers["keep_recent_tool_groups"])
    )
    with tempfile.TemporaryDirectory() as directory:
        manager = make_manager(Path(directory), **layers)
        validate_tool_pairing(manager.prepare(history))
        if len(groups) > 1:
            validate_tool_pairing(manager.recover_from_overflow(history))
        else:  # one group or none, and no summary yet: nothing a retry could leave out
            # (prepare may already have summarised a large lone group; a retry may then
            # summarise again, so the rule is checked on a manager that has not prepared)
            untouched = make_manager(Path(directory), id_prefix="untouched", **layers)
            with pytest.raises(ContextOverflowError, match="nothing can be removed"):
                untouched.recover_from_overflow(history)
        validate_tool_pairing(manager.compact_proactively(history).history)


@costly_property
@given(
    groups=histories(),
    layers=layer_settings(),
    checkpoints=st.lists(st.booleans(), min_size=31, max_size=31),
)
def test_incremental_prepare_equals_a_fresh_managers(
    groups: list[MessageGroup], layers: dict[str, Any], checkpoints: list[bool]
) -> None:
    history = flatten(groups)
    with tempfile.TemporaryDirectory() as directory:
        recorder = Recorder()
        incremental = make_manager(Path(directory), recorder=recorder, **layers)
        grown: list[ChatMessage] = []
        for group, checkpoint in zip(groups, checkpoints, strict=False):
            grown.extend(group)
            if checkpoint:
                incremental.prepare(grown)
        request = incremental.prepare(history)

        summaries = recorder.applied("summary")
        event(f"summarised: {bool(summaries)}, snipped: {bool(recorder.applied('snip'))}")
        fresh = _fresh_manager(Path(directory), layers)
        if summaries:
            details = summaries[-1].details
            covered = int(str(details["covered_messages"]))
            fresh.restore_summary(str(details["summary_content"]), covered)
            base = [system_message(str(details["summary_content"])), *history[covered:]]
        else:
            base = history
        assert request == fresh.prepare(history)
        assert request == micro_compact_history(
            snip_compact_history(
                base,
                max_groups=layers["snip_max_groups"],
                keep_head_groups=layers["snip_keep_head_groups"],
            ),
            keep_recent_tool_groups=layers["keep_recent_tool_groups"],
        )


def _fresh_manager(workspace: Path, layers: dict[str, Any]) -> CompactionManager:
    """Same layers, no automatic summary of its own: it must only apply the restored one."""
    fresh_layers = {**layers, "proactive_threshold_bytes": 10**12}
    return CompactionManager(
        workspace,
        summarizer=_NoSummaries(),
        id_generator=counting_ids("fresh"),
        settings=CompactionSettings(**fresh_layers),
    )


class _NoSummaries:
    def summarize(self, history: History) -> CompactionSummary:
        raise AssertionError("a fresh manager with a restored summary must not summarise")
