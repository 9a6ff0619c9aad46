"""Chapter 8: four-level context compaction.

The modules follow the data one way:

    settings, sizes, errors   the numbers, how bytes are counted, what can go wrong
    store → persist           layer 1: large tool results to files, previews inline
    index                     canonical history indexed (sizes, groups, call ids)
    budget                    the window as a byte budget
    seed | cache_aware        the two strategies: where snip and micro cut, how a request
                              over the window narrows, when the summary comes
    layers                    layers 2–3: snip and micro, cut where the strategy says
    summary → extractive      layer 4: the five-field summary, by the model or extracted
    breaker, wording          the circuit breaker and what the events say
    manager                   `CompactionManager`, the loop's `ContextPolicy`
"""

from agent_tutorial.features.compaction.errors import (
    ArtifactConflictError,
    ArtifactPathError,
    CompactionError,
)
from agent_tutorial.features.compaction.extractive import ExtractiveSummarizer
from agent_tutorial.features.compaction.layers import (
    COMPACTED_TOOL_RESULT,
    micro_compact_history,
    snip_compact_history,
)
from agent_tutorial.features.compaction.manager import (
    CONTINUE_AFTER_SUMMARY,
    CompactionManager,
    CompactionOutcome,
    ContinueAfterSummary,
)
from agent_tutorial.features.compaction.settings import CompactionSettings, CompactionStrategy
from agent_tutorial.features.compaction.sizes import history_utf8_bytes, transcript_jsonl
from agent_tutorial.features.compaction.store import ArtifactReference
from agent_tutorial.features.compaction.summary import (
    SUMMARY_SYSTEM_PROMPT,
    CompactionSummary,
    HistorySummarizer,
    ModelHistorySummarizer,
    is_compacted_summary,
    summary_message,
)

__all__ = [
    "COMPACTED_TOOL_RESULT",
    "CONTINUE_AFTER_SUMMARY",
    "SUMMARY_SYSTEM_PROMPT",
    "ArtifactConflictError",
    "ArtifactPathError",
    "ArtifactReference",
    "CompactionError",
    "CompactionManager",
    "CompactionOutcome",
    "CompactionSettings",
    "CompactionStrategy",
    "CompactionSummary",
    "ContinueAfterSummary",
    "ExtractiveSummarizer",
    "HistorySummarizer",
    "ModelHistorySummarizer",
    "history_utf8_bytes",
    "is_compacted_summary",
    "micro_compact_history",
    "snip_compact_history",
    "summary_message",
    "transcript_jsonl",
]
