"""Chapter 8: four-level context compaction.

Layer 1 persists large tool results to disk before they enter canonical history. Layers 2–4
build each *request* history from canonical history, cheapest first: snip old groups, clear
old tool results, and only then replace the history with a structured summary whose full
transcript stays on disk. Canonical history is never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agent_tutorial.core.events import CompactionApplied, Notice
from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    SystemMessage,
    UserMessage,
    system_message,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.core.model import ModelClient, ModelError, ModelReply, make_request
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.artifacts import (
    ArtifactConflictError,
    ArtifactPathError,
    ArtifactReference,
    ArtifactStore,
    CompactionError,
    persisted_result,
    results_to_persist,
    tool_result_file_name,
    transcript_file_name,
)
from agent_tutorial.features.extractive_summary import (
    FOCUS_PREFIX,
    SUMMARY_INSTRUCTION,
    ExtractiveSummarizer,
)
from agent_tutorial.features.history_layers import (
    COMPACTED_TOOL_RESULT,
    SUMMARY_FIELDS,
    CanonicalIndex,
    CompactionSummary,
    HistorySummarizer,
    LayeredRequest,
    LayerSettings,
    check_micro_settings,
    check_snip_settings,
    encode_utf8,
    history_utf8_bytes,
    is_compacted_summary,
    message_utf8_bytes,
    micro_compact_history,
    parse_summary_content,
    snip_compact_history,
    summary_message,
    transcript_jsonl,
)

__all__ = [
    "COMPACTED_TOOL_RESULT",
    "CONTINUE_AFTER_SUMMARY",
    "SUMMARY_SYSTEM_PROMPT",
    "ArtifactConflictError",
    "ArtifactPathError",
    "ArtifactReference",
    "CompactedBatch",
    "CompactionError",
    "CompactionManager",
    "CompactionOutcome",
    "CompactionSettings",
    "CompactionSummary",
    "ContinueAfterSummary",
    "ExtractiveSummarizer",
    "HistorySummarizer",
    "ModelHistorySummarizer",
    "PersistedArtifact",
    "PromptTooLongRetryError",
    "history_utf8_bytes",
    "is_compacted_summary",
    "micro_compact_history",
    "snip_compact_history",
]

MAX_CONSECUTIVE_SUMMARY_FAILURES = 3

SUMMARY_SYSTEM_PROMPT = """\
You are compacting the conversation of a coding agent so that it can carry on with a much \
shorter context. Read the conversation and reply with one JSON object and nothing else (no \
Markdown fences, no prose), with exactly these five keys:
- "current_goal": a non-empty string, what the user wants accomplished now;
- "key_findings": an array of non-empty strings, facts learned that the remaining work \
depends on;
- "files_read_or_changed": an array of non-empty strings, paths of files read or changed;
- "remaining_work": an array of non-empty strings, the steps still to do;
- "user_constraints": an array of non-empty strings, instructions and preferences the user \
stated.
Be specific and concise. Do not call tools."""

CompactionEventSink = Callable[[CompactionApplied | Notice], None]


class PromptTooLongRetryError(CompactionError):
    """The prompt was refused as too long again after a reactive compaction; never loop."""


@dataclass(frozen=True, slots=True)
class PersistedArtifact:
    """Layer 1 persisted the result at `result_index` of a batch to `reference`."""

    result_index: int
    reference: ArtifactReference


@dataclass(frozen=True, slots=True)
class CompactedBatch:
    """A batch after layer 1: same length and order, large results replaced by previews."""

    results: tuple[ToolResult, ...]
    artifacts: tuple[PersistedArtifact, ...]


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """A summarised history (the summary message first) and where its transcript lives."""

    history: tuple[ChatMessage, ...]
    transcript: ArtifactReference
    summary: CompactionSummary


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """The chapter's numbers; every budget is in UTF-8 bytes."""

    persist_threshold_bytes: int = 30_000
    batch_budget_bytes: int = 200_000
    preview_head_bytes: int = 2_000
    preview_tail_bytes: int = 2_000
    keep_recent_tool_groups: int = 3
    reactive_tail_groups: int = 5
    proactive_threshold_bytes: int = 50_000
    snip_max_groups: int = 50
    snip_keep_head_groups: int = 3

    def __post_init__(self) -> None:
        for name in ("persist_threshold_bytes", "batch_budget_bytes", "proactive_threshold_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("preview_head_bytes", "preview_tail_bytes", "reactive_tail_groups"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.preview_head_bytes == 0 and self.preview_tail_bytes == 0:
            raise ValueError("preview_head_bytes and preview_tail_bytes cannot both be 0")
        check_micro_settings(self.keep_recent_tool_groups)
        check_snip_settings(self.snip_max_groups, self.snip_keep_head_groups)

    def layers(self) -> LayerSettings:
        return LayerSettings(
            snip_max_groups=self.snip_max_groups,
            snip_keep_head_groups=self.snip_keep_head_groups,
            keep_recent_tool_groups=self.keep_recent_tool_groups,
        )


@dataclass(frozen=True, slots=True)
class _SummaryState:
    """The last summary: its message stands for canonical messages[:covered_messages]."""

    message: SystemMessage
    covered_messages: int
    utf8_bytes: int


@dataclass(frozen=True, slots=True)
class _Prepared:
    request: LayeredRequest
    summary: _SummaryState | None


class CompactionManager:
    """One per runner: the loop's tool-result processor (layer 1), history processor
    (layers 2–4) and overflow recovery.

    The request history is a function of canonical history and the last summary. It is
    cached: an identical history costs nothing, and an append costs work proportional to
    what was appended.
    """

    def __init__(
        self,
        workspace: Path | str,
        summarizer: HistorySummarizer,
        *,
        id_generator: Callable[[], str] | None = None,
        persist_threshold_bytes: int = 30_000,
        batch_budget_bytes: int = 200_000,
        preview_head_bytes: int = 2_000,
        preview_tail_bytes: int = 2_000,
        keep_recent_tool_groups: int = 3,
        reactive_tail_groups: int = 5,
        proactive_threshold_bytes: int = 50_000,
        snip_max_groups: int = 50,
        snip_keep_head_groups: int = 3,
        on_event: CompactionEventSink | None = None,
    ) -> None:
        self.settings = CompactionSettings(
            persist_threshold_bytes=persist_threshold_bytes,
            batch_budget_bytes=batch_budget_bytes,
            preview_head_bytes=preview_head_bytes,
            preview_tail_bytes=preview_tail_bytes,
            keep_recent_tool_groups=keep_recent_tool_groups,
            reactive_tail_groups=reactive_tail_groups,
            proactive_threshold_bytes=proactive_threshold_bytes,
            snip_max_groups=snip_max_groups,
            snip_keep_head_groups=snip_keep_head_groups,
        )
        self._layers = self.settings.layers()
        self._store = ArtifactStore(Path(workspace), id_generator)
        self._summarizer = summarizer
        self._fallback = ExtractiveSummarizer()
        self._on_event = on_event
        self._index = CanonicalIndex()
        self._summary: _SummaryState | None = None
        self._prepared: _Prepared | None = None
        self._reported = LayeredRequest(messages=(), utf8_bytes=0)
        self._consecutive_failures = 0
        self.last_request_bytes = 0
        """Bytes of the last request history `prepare` returned."""

    @property
    def canonical_bytes(self) -> int:
        """Bytes of the canonical history the last call saw."""
        return self._index.utf8_bytes

    @property
    def automatic_summaries_enabled(self) -> bool:
        """False once the circuit breaker has opened after repeated summary failures."""
        return self._consecutive_failures < MAX_CONSECUTIVE_SUMMARY_FAILURES

    # --- the loop's protocols ----------------------------------------------------------

    def process_tool_results(self, results: Sequence[ToolResult]) -> list[ToolResult]:
        batch = self.compact_tool_results(results)
        if batch.artifacts:
            self._emit(_persist_event(batch))
        return list(batch.results)

    def prepare(self, history: History) -> tuple[ChatMessage, ...]:
        changed = self._sync(history)
        if not changed and self._prepared is not None and self._prepared.summary is self._summary:
            return self._prepared.request.messages
        request = self._layered()
        if request.utf8_bytes > self.settings.proactive_threshold_bytes:
            request = self._summarize_automatically(history, request)
        self._report_cheap_layers(request)
        validate_tool_pairing(request.messages)
        self._prepared = _Prepared(request, self._summary)
        self.last_request_bytes = request.utf8_bytes
        return request.messages

    def recover_from_overflow(self, history: History) -> tuple[ChatMessage, ...]:
        try:
            outcome = self._compact_reactively(history, self._summarize_for_recovery)
        except CompactionError as error:
            raise ContextOverflowError(
                f"the conversation no longer fits and could not be compacted: {error}"
            ) from error
        return outcome.history

    # --- the library ---------------------------------------------------------------------

    def compact_tool_results(self, results: Sequence[ToolResult]) -> CompactedBatch:
        """Layer 1: persist every result over the threshold, then the largest until the
        batch fits its budget; all files of the batch are written, or none."""
        encoded = [encode_utf8(result.content) for result in results]
        chosen = results_to_persist(
            [len(data) for data in encoded],
            threshold=self.settings.persist_threshold_bytes,
            batch_budget=self.settings.batch_budget_bytes,
        )
        if not chosen:
            return CompactedBatch(tuple(results), ())
        names = [tool_result_file_name(self._store.new_id()) for _ in chosen]
        references = self._store.publish(
            [(name, encoded[i]) for name, i in zip(names, chosen, strict=True)]
        )
        compacted = list(results)
        for index, reference in zip(chosen, references, strict=True):
            compacted[index] = persisted_result(
                results[index],
                encoded[index],
                reference,
                head_bytes=self.settings.preview_head_bytes,
                tail_bytes=self.settings.preview_tail_bytes,
            )
        artifacts = tuple(
            PersistedArtifact(i, ref) for i, ref in zip(chosen, references, strict=True)
        )
        return CompactedBatch(tuple(compacted), artifacts)

    def compact_proactively(self, history: History, focus: str | None = None) -> CompactionOutcome:
        """Summarise now (`/compact`): transcript first, then a summary of the history as
        the model last knew it (the previous summary plus what came after, no snip or
        micro). The result becomes the summary state."""
        self._sync(history)
        base = self._base_messages(history)
        before = self._base_bytes()
        if focus and focus.strip():
            base = (*base, user_message(FOCUS_PREFIX + focus.strip()))
        transcript = self._write_transcript(history)
        summary = _summarize(self._summarizer, base)
        self._consecutive_failures = 0
        state = self._set_summary(summary, transcript, covered_messages=len(history))
        self._emit_summary("summary", before, state, transcript, trigger="manual")
        return CompactionOutcome((state.message,), transcript, summary)

    def compact_on_prompt_too_long(
        self, history: History, *, retry_count: int
    ) -> CompactionOutcome:
        """Transcript, summary of the cheap-layer history, then the summary message followed
        by the last `reactive_tail_groups` complete groups. Only ever once per request."""
        if retry_count > 0:
            raise PromptTooLongRetryError(
                f"the prompt was too long again after compacting (retry {retry_count}); "
                "compact with /compact or start a fresh session"
            )
        return self._compact_reactively(
            history, lambda request: _summarize(self._summarizer, request)
        )

    def restore_summary(self, summary_content: str, covered_messages: int) -> None:
        """Re-establish a summary recorded in an event's details (a resumed session)."""
        if covered_messages < 0:
            raise ValueError(f"covered_messages must be >= 0, got {covered_messages}")
        try:
            parse_summary_content(summary_content)
        except ValueError as error:
            raise ValueError(f"not a compaction summary: {error}") from error
        message = system_message(summary_content)
        self._summary = _SummaryState(message, covered_messages, message_utf8_bytes(message))
        self._index = CanonicalIndex()  # the next history is the one this summary belongs to

    # --- steps -------------------------------------------------------------------------

    def _sync(self, history: History) -> bool:
        """Bring the index up to `history` (validating its pairing); True if it changed."""
        appended = self._index.appended_part(history)
        if appended is None:
            # Not a continuation of what this manager saw: start over, and forget a summary
            # that was made of another history.
            self._index = CanonicalIndex()
            self._summary = None
            self._index.append(history, history)
            return True
        if not appended:
            return False
        first_history = not self._index.messages
        self._index.append(appended, history)
        if first_history:
            self._forget_summary_that_does_not_fit()
        return True

    def _forget_summary_that_does_not_fit(self) -> None:
        """A restored summary belongs to the first history it meets. If it does not end on a
        group boundary of that history it was made of another one; drop it now, or it would
        replace messages it never summarised once the history grows past its count."""
        state = self._summary
        if state is not None and self._index.group_at(state.covered_messages) is None:
            self._summary = None

    def _lead(self) -> tuple[_SummaryState | None, int]:
        """The summary that applies to the indexed history and its first uncovered group."""
        state = self._summary
        if state is None:
            return None, 0
        first_group = self._index.group_at(state.covered_messages)
        return (None, 0) if first_group is None else (state, first_group)

    def _covered_by_lead(self) -> int:
        """Canonical messages the summary in front of the request stands for (0 if none)."""
        state, _ = self._lead()
        return 0 if state is None else state.covered_messages

    def _layered(self) -> LayeredRequest:
        state, first_group = self._lead()
        if state is None:
            return self._index.layered(None, 0, 0, self._layers)
        return self._index.layered(state.message, state.utf8_bytes, first_group, self._layers)

    def _base_bytes(self) -> int:
        state, _ = self._lead()
        if state is None:
            return self._index.utf8_bytes
        return state.utf8_bytes + self._index.bytes_from(state.covered_messages)

    def _base_messages(self, history: History) -> tuple[ChatMessage, ...]:
        state, _ = self._lead()
        if state is None:
            return tuple(history)
        return (state.message, *history[state.covered_messages :])

    def _summarize_automatically(self, history: History, cheap: LayeredRequest) -> LayeredRequest:
        """One summary attempt; on failure the cheap-layer request goes out as it is."""
        if not self.automatic_summaries_enabled:
            return cheap
        try:
            transcript = self._write_transcript(history)
            summary = _summarize(self._summarizer, cheap.messages)
        except CompactionError as error:
            self._summary_failed(error, "this request goes out without a summary")
            return cheap
        self._consecutive_failures = 0
        state = self._set_summary(summary, transcript, covered_messages=len(history))
        self._emit_summary("summary", cheap.utf8_bytes, state, transcript, "automatic")
        return self._layered()

    def _summarize_for_recovery(self, request: History) -> CompactionSummary:
        if self.automatic_summaries_enabled:
            try:
                summary = _summarize(self._summarizer, request)
            except CompactionError as error:
                self._summary_failed(error, "using an extractive summary instead")
            else:
                self._consecutive_failures = 0
                return summary
        return self._fallback.summarize(request)

    def _compact_reactively(
        self, history: History, summarize: Callable[[History], CompactionSummary]
    ) -> CompactionOutcome:
        self._sync(history)
        cheap = self._layered()
        already_covered = self._covered_by_lead()
        transcript = self._write_transcript(history)
        summary = summarize(cheap.messages)
        # The tail is kept from the groups after the current summary: messages it already
        # stands for must not come back in full, or the retry grows instead of shrinking.
        tail_start = self._index.start_of_last_groups(self.settings.reactive_tail_groups)
        covered = max(tail_start, already_covered)
        state = self._set_summary(summary, transcript, covered_messages=covered)
        recovered = (state.message, *history[covered:])
        validate_tool_pairing(recovered)
        self._emit_summary("reactive", cheap.utf8_bytes, state, transcript, "overflow")
        return CompactionOutcome(recovered, transcript, summary)

    def _write_transcript(self, history: History) -> ArtifactReference:
        name = transcript_file_name(self._store.new_id())
        (reference,) = self._store.publish([(name, transcript_jsonl(history))])
        return reference

    def _set_summary(
        self, summary: CompactionSummary, transcript: ArtifactReference, *, covered_messages: int
    ) -> _SummaryState:
        message = summary_message(summary, transcript.relative_path)
        self._summary = _SummaryState(message, covered_messages, message_utf8_bytes(message))
        return self._summary

    def _summary_failed(self, error: CompactionError, consequence: str) -> None:
        self._consecutive_failures += 1
        self._emit(Notice("warning", f"automatic summary failed: {error}; {consequence}"))
        if self._consecutive_failures == MAX_CONSECUTIVE_SUMMARY_FAILURES:
            self._emit(
                Notice(
                    "warning",
                    f"automatic summaries are off for this session after "
                    f"{MAX_CONSECUTIVE_SUMMARY_FAILURES} failures in a row; /compact still works",
                )
            )

    # --- events --------------------------------------------------------------------------

    def _emit(self, event: CompactionApplied | Notice) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _emit_summary(
        self,
        layer: str,
        before: int,
        state: _SummaryState,
        transcript: ArtifactReference,
        trigger: str,
    ) -> None:
        after = state.utf8_bytes + self._index.bytes_from(state.covered_messages)
        reason = " prompt too long," if layer == "reactive" else ""
        sizes = f"{before:,} B → {after:,} B"
        text = f"{layer}:{reason} {sizes}, transcript {transcript.relative_path}"
        details: dict[str, Any] = {
            "summary_content": state.message.content,
            "covered_messages": state.covered_messages,
            "transcript_path": transcript.relative_path,
            "trigger": trigger,
        }
        self._emit(CompactionApplied(layer, text, 1, max(0, before - after), details))

    def _report_cheap_layers(self, request: LayeredRequest) -> None:
        """Tell what snip and micro newly did: only when their count grew since the last
        prepare, so a long session does not repeat the same line on every request."""
        previous, self._reported = self._reported, request
        omitted, was_omitted = request.snip_omitted_groups, previous.snip_omitted_groups
        if omitted > was_omitted:
            saved = max(0, request.snip_bytes_saved - previous.snip_bytes_saved)
            text = f"snip: {omitted:,} {_plural(omitted, 'group')} omitted"
            self._emit(CompactionApplied("snip", text, omitted - was_omitted, saved))
        cleared, was_cleared = request.micro_cleared_results, previous.micro_cleared_results
        if cleared > was_cleared:
            saved = max(0, request.micro_bytes_saved - previous.micro_bytes_saved)
            text = f"micro: {cleared:,} {_plural(cleared, 'result')} cleared"
            self._emit(CompactionApplied("micro", text, cleared - was_cleared, saved))


def _persist_event(batch: CompactedBatch) -> CompactionApplied:
    count = len(batch.artifacts)
    original = sum(artifact.reference.original_bytes for artifact in batch.artifacts)
    kept = sum(
        len(encode_utf8(batch.results[artifact.result_index].content))
        for artifact in batch.artifacts
    )
    paths = [artifact.reference.relative_path for artifact in batch.artifacts]
    where = paths[0] if count == 1 else f"{paths[0]} and {count - 1} more"
    text = f"persisted {count} {_plural(count, 'result')}, {original:,} B → {where}"
    return CompactionApplied("persist", text, count, max(0, original - kept), {"paths": paths})


def _plural(count: int, noun: str) -> str:
    return noun if count == 1 else noun + "s"


def _summarize(summarizer: HistorySummarizer, history: History) -> CompactionSummary:
    try:
        return summarizer.summarize(history)
    except ModelError as error:
        raise CompactionError(f"the summary request failed: {error}") from error


class ModelHistorySummarizer:
    """Asks the model for the five-field summary in one tool-free request and accepts
    nothing but exactly that JSON object."""

    def __init__(self, model: ModelClient) -> None:
        self.model = model

    def summarize(self, history: History) -> CompactionSummary:
        # The closing instruction keeps a model from carrying on with the task instead.
        instruction = user_message(SUMMARY_INSTRUCTION)
        messages = [system_message(SUMMARY_SYSTEM_PROMPT), *history, instruction]
        try:
            reply = self.model.complete(make_request(messages, tools=()))
        except ModelError as error:
            raise CompactionError(f"the summary request failed: {error}") from error
        return parse_summary_reply(reply)


def parse_summary_reply(reply: ModelReply) -> CompactionSummary:
    """The summary in a model reply; `CompactionError` saying which rule it breaks."""
    if reply.finish_reason != "stop":
        raise CompactionError(f"the summary reply ended with {reply.finish_reason!r}, not 'stop'")
    if reply.message.tool_calls:
        raise CompactionError("the summary reply called tools")
    content = reply.message.content
    if content is None or not content.strip():
        raise CompactionError("the summary reply is empty")
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError as error:
        raise CompactionError(f"the summary reply is not JSON: {error}") from error
    if not isinstance(data, dict):
        raise CompactionError(f"the summary reply is a JSON {type(data).__name__}, not an object")
    _check_summary_fields(data)
    return CompactionSummary(**data)


def _check_summary_fields(data: dict[str, Any]) -> None:
    missing = [name for name in SUMMARY_FIELDS if name not in data]
    unexpected = sorted(set(data) - set(SUMMARY_FIELDS))
    if missing or unexpected:
        problems = [
            f"{label} {names}"
            for label, names in (("missing", missing), ("unexpected", unexpected))
            if names
        ]
        raise CompactionError(
            f"the summary reply must have exactly the keys {list(SUMMARY_FIELDS)}; "
            + ", ".join(problems)
        )
    goal = data["current_goal"]
    if not isinstance(goal, str) or not goal.strip():
        raise CompactionError("current_goal must be a non-empty string")
    for name in SUMMARY_FIELDS[1:]:
        value = data[name]
        if not isinstance(value, list):
            raise CompactionError(f"{name} must be an array of strings")
        if not all(isinstance(item, str) and item.strip() for item in value):
            raise CompactionError(f"{name} must contain only non-empty strings")


CONTINUE_AFTER_SUMMARY = (
    "[The conversation so far was compacted into the summary above. Continue with the current "
    "goal; re-read files or re-run commands if you need their full output.]"
)


class ContinueAfterSummary:
    """Request guidance: after a summary the request can hold no user message at all, which
    some chat templates (Qwen's on vLLM and llama.cpp) and Anthropic-style gateways refuse.
    This adds one user turn, to that request only, telling the model to carry on."""

    def guidance(
        self, canonical: Sequence[ChatMessage], request: Sequence[ChatMessage]
    ) -> Sequence[ChatMessage]:
        if not request or not is_compacted_summary(request[0]):
            return ()
        if any(isinstance(message, UserMessage) for message in request):
            return ()
        return (user_message(CONTINUE_AFTER_SUMMARY),)
