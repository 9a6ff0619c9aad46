"""Layer 1: a tool result too large for the context goes to a file before it enters
canonical history; the model sees a head and tail preview and the file's path.

Every result over the threshold is persisted, then the largest of the rest until the batch
fits its budget; all files of a batch are written, or none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.compaction.settings import CompactionSettings, share_of
from agent_tutorial.features.compaction.sizes import encode_utf8
from agent_tutorial.features.compaction.store import (
    ArtifactContent,
    ArtifactReference,
    ArtifactStore,
    tool_result_file_name,
)


@dataclass(frozen=True, slots=True)
class PersistedArtifact:
    """Layer 1 persisted the result at `result_index` of a batch to `reference`."""

    result_index: int
    reference: ArtifactReference


@dataclass(frozen=True, slots=True)
class PersistedBatch:
    """A batch after layer 1: same length and order, large results replaced by previews."""

    results: tuple[ToolResult, ...]
    artifacts: tuple[PersistedArtifact, ...]


class ResultPersister:
    """Layer 1 for one workspace's artifact store."""

    def __init__(self, store: ArtifactStore, settings: CompactionSettings) -> None:
        self._store = store
        self._settings = settings

    def persist(self, results: Sequence[ToolResult]) -> PersistedBatch:
        """The batch with every result chosen by `results_to_persist` written to a file
        and replaced by its preview."""
        encoded = [encode_utf8(result.content) for result in results]
        chosen = results_to_persist(
            [_whole_size(result, data) for result, data in zip(results, encoded, strict=True)],
            threshold=self._settings.persist_threshold_bytes,
            batch_budget=self._settings.batch_budget_bytes,
        )
        if not chosen:
            return PersistedBatch(tuple(results), ())
        names = [tool_result_file_name(self._store.new_id()) for _ in chosen]
        references = self._store.publish(
            [(name, _whole(results[i], encoded[i])) for name, i in zip(names, chosen, strict=True)]
        )
        compacted = list(results)
        for index, reference in zip(chosen, references, strict=True):
            compacted[index] = persisted_result(
                results[index],
                encoded[index],
                reference,
                head_bytes=self._settings.preview_head_bytes,
                tail_bytes=self._settings.preview_tail_bytes,
            )
        artifacts = tuple(
            PersistedArtifact(i, ref) for i, ref in zip(chosen, references, strict=True)
        )
        return PersistedBatch(tuple(compacted), artifacts)


def settings_for_budget(settings: CompactionSettings, budget: int) -> CompactionSettings:
    """Layer 1's numbers for a window's history budget: the persist threshold and the batch
    budget at most their shares of it, each preview at most its share of that threshold.
    Each stays at least a byte, so even a full window persists and previews something."""
    window_threshold = share_of(budget, settings.window_persist_share)
    threshold = max(1, min(settings.persist_threshold_bytes, window_threshold))
    batch = max(1, min(settings.batch_budget_bytes, share_of(budget, settings.window_batch_share)))
    preview = max(1, share_of(threshold, settings.window_preview_share))
    return replace(
        settings,
        persist_threshold_bytes=threshold,
        batch_budget_bytes=batch,
        preview_head_bytes=min(settings.preview_head_bytes, preview),
        preview_tail_bytes=min(settings.preview_tail_bytes, preview),
    )


def _whole_size(result: ToolResult, content: bytes) -> int:
    return len(content) if result.whole_output is None else result.whole_output.total_bytes


def _whole(result: ToolResult, content: bytes) -> ArtifactContent:
    """What the artifact holds: the whole output when the tool spooled one (its content
    shows only the head and tail), else the content. Both are already redacted."""
    return content if result.whole_output is None else result.whole_output


def results_to_persist(sizes: Sequence[int], *, threshold: int, batch_budget: int) -> list[int]:
    """Indexes (in result order) of the results layer 1 persists: every result larger than
    `threshold`, then the largest remaining (ties in order) until the rest fits the budget."""
    chosen = {index for index, size in enumerate(sizes) if size > threshold}
    inline_total = sum(size for index, size in enumerate(sizes) if index not in chosen)
    remaining = sorted(
        (index for index in range(len(sizes)) if index not in chosen),
        key=lambda index: (-sizes[index], index),
    )
    for index in remaining:
        if inline_total <= batch_budget:
            break
        chosen.add(index)
        inline_total -= sizes[index]
    return sorted(chosen)


def persisted_result(
    result: ToolResult,
    content_bytes: bytes,
    reference: ArtifactReference,
    *,
    head_bytes: int,
    tail_bytes: int,
) -> ToolResult:
    """The result the model sees instead of a persisted one; errors stay errors."""
    block = persisted_block(content_bytes, reference, head_bytes=head_bytes, tail_bytes=tail_bytes)
    if not result.is_error:
        return ToolResult(content=block)
    if result.error_code is not None:
        block = f"Error [{result.error_code}]: the output was too large to show inline\n{block}"
    return ToolResult(content=block, is_error=True, error_code=result.error_code)


PERSISTED_BLOCK_START = "<persisted-tool-result>\n"


def is_persisted(content: str) -> bool:
    """Whether a result's content is already a persisted result's preview (or an error
    that says so): persisting it again would only file the preview."""
    return content.startswith(PERSISTED_BLOCK_START) or (
        content.startswith("Error [") and f"\n{PERSISTED_BLOCK_START}" in content
    )


def persisted_block(
    content_bytes: bytes, reference: ArtifactReference, *, head_bytes: int, tail_bytes: int
) -> str:
    head_end = utf8_head_end(content_bytes, head_bytes)
    tail_start = utf8_tail_start(content_bytes, tail_bytes, not_before=head_end)
    return (
        PERSISTED_BLOCK_START + f"path: {reference.relative_path}\n"
        f"original_bytes: {reference.original_bytes}\n"
        "head_preview:\n"
        f"{content_bytes[:head_end].decode()}\n"
        "tail_preview:\n"
        f"{content_bytes[tail_start:].decode()}\n"
        "</persisted-tool-result>"
    )


def utf8_head_end(data: bytes, limit: int) -> int:
    """End of the longest prefix of at most `limit` bytes that ends on a character boundary."""
    if limit >= len(data):
        return len(data)
    end = limit
    while end > 0 and _is_continuation_byte(data[end]):
        end -= 1
    return end


def utf8_tail_start(data: bytes, limit: int, *, not_before: int) -> int:
    """Start of the longest suffix of at most `limit` bytes that starts on a character
    boundary and does not reach back before `not_before`."""
    start = max(len(data) - limit, not_before)
    while start < len(data) and _is_continuation_byte(data[start]):
        start += 1
    return start


def _is_continuation_byte(byte: int) -> bool:
    return byte & 0b1100_0000 == 0b1000_0000
