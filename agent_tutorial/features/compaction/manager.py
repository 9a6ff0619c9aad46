"""Chapter 8's four layers as the loop's `ContextPolicy`.

Layer 1 persists large tool results before they enter canonical history. Layers 2–4 build
each *request* history from canonical history, cheapest first: snip old groups, clear old
tool results, and only then replace the history with a structured summary whose full
transcript stays on disk. Canonical history is never modified.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from agent_tutorial.core.events import CompactionApplied, Notice
from agent_tutorial.core.loop import ContextOverflowError, FullContext
from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    SystemMessage,
    ToolMessage,
    UserMessage,
    system_message,
    tool_message,
    user_message,
)
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.core.window import ContextWindow
from agent_tutorial.features.compaction import wording
from agent_tutorial.features.compaction.breaker import SummaryBreaker
from agent_tutorial.features.compaction.budget import (
    HistoryBudget,
    TokenCalibration,
    WindowAccounting,
)
from agent_tutorial.features.compaction.errors import CompactionError
from agent_tutorial.features.compaction.extractive import ExtractiveSummarizer
from agent_tutorial.features.compaction.index import CanonicalIndex
from agent_tutorial.features.compaction.layers import (
    CheapLayers,
    LayeredRequest,
    Lead,
    strategy_for,
)
from agent_tutorial.features.compaction.persist import (
    ResultPersister,
    is_persisted,
    settings_for_budget,
)
from agent_tutorial.features.compaction.retry import (
    Refusal,
    retry_history_limit,
    retry_limit_bytes,
)
from agent_tutorial.features.compaction.settings import CompactionSettings, CompactionStrategy
from agent_tutorial.features.compaction.sizes import message_utf8_bytes, transcript_jsonl
from agent_tutorial.features.compaction.store import (
    ArtifactReference,
    ArtifactStore,
    transcript_file_name,
)
from agent_tutorial.features.compaction.summary import (
    FOCUS_PREFIX,
    CompactionSummary,
    HistorySummarizer,
    history_to_summarize,
    is_compacted_summary,
    parse_summary_content,
    summarize,
    summary_message,
)

CompactionEventSink = Callable[[CompactionApplied | Notice], None]


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """A summarised history (the summary message first) and where its transcript lives."""

    history: tuple[ChatMessage, ...]
    transcript: ArtifactReference
    summary: CompactionSummary


@dataclass(frozen=True, slots=True)
class _SummaryState:
    """The last summary: its message stands for canonical messages[:covered_messages]."""

    message: SystemMessage
    covered_messages: int
    utf8_bytes: int


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A request remembered (by `prepare`, or by a preview) with what it was built from, so
    the same history asked for again costs nothing."""

    request: LayeredRequest
    summary: _SummaryState | None
    index: CanonicalIndex
    messages: int
    """The canonical history it was built from: an index and how many messages it held."""

    def still_fits(self, index: CanonicalIndex, summary: _SummaryState | None) -> bool:
        return (
            self.index is index and self.messages == len(index.messages) and self.summary is summary
        )


class CompactionManager:
    """One per runner, the loop's `ContextPolicy`: persists large results (layer 1), builds
    each request (layers 2–4) and recovers from an overflow reply.

    The request history is a function of canonical history and the last summary. It is
    cached: an identical history costs nothing, and an append costs work proportional to
    what was appended. `strategy` and `context_window_tokens`, when given, override the
    fields of `settings` with those names; that field is the one way the window arrives,
    unless the session's `window` is given: its window then wins, and the manager follows
    it as it is learned.
    `window_accounting` says how it becomes a byte budget (by default: nothing reserved
    besides the reply, a calibration of its own). `workspace` is the folder whose
    `.agent_tutorial/artifacts` receives the files (the project root); `tools_workspace`,
    when given and below it, is the tools' boundary: artifacts are then named to the model
    by absolute path, the one the read tools reach them by.
    """

    def __init__(
        self,
        workspace: Path | str,
        summarizer: HistorySummarizer,
        settings: CompactionSettings = CompactionSettings(),  # noqa: B008 - frozen, shared
        *,
        strategy: CompactionStrategy | None = None,
        context_window_tokens: int | None = None,
        id_generator: Callable[[], str] | None = None,
        on_event: CompactionEventSink | None = None,
        window_accounting: WindowAccounting | None = None,
        tools_workspace: Path | None = None,
        window: ContextWindow | None = None,
    ) -> None:
        if strategy is not None:
            settings = replace(settings, strategy=strategy)
        self._window = window
        if window is not None and window.tokens is not None:
            context_window_tokens = window.tokens
        if context_window_tokens is not None:
            settings = replace(settings, context_window_tokens=context_window_tokens)
        self.settings = settings
        self._accounting = window_accounting or WindowAccounting(
            calibration=TokenCalibration(settings)
        )
        self._history_budget = self._accounting.budget(settings.context_window_tokens)
        self._strategy = strategy_for(settings)
        root = Path(workspace).resolve()
        below = tools_workspace is not None and tools_workspace.resolve() != root
        self._store = ArtifactStore(root, id_generator, shown_absolute=below)
        self._persister = ResultPersister(self._store, settings)
        self._summarizer = summarizer
        self._fallback = ExtractiveSummarizer(settings)
        self._breaker = SummaryBreaker(settings.summary_failure_limit)
        self._report = wording.CheapLayerReport()
        self._on_event = on_event
        self._index = CanonicalIndex()
        self._layers = CheapLayers(self._index, self._strategy)
        self._summary: _SummaryState | None = None
        self._prepared: _Prepared | None = None
        self._previewed: _Prepared | None = None
        self._refusal: Refusal | None = None
        self._threshold_told = False
        self.last_request_bytes = 0
        """Bytes of the last request history `prepare` returned."""
        self._last_reserved_bytes: int | None = None
        """What the budget of that request reserved besides its history (None: none built)."""

    def use_window(self, tokens: int) -> None:
        """Budget against a window of `tokens` from now on, as if it had been given as
        `context_window_tokens` (a provider stated it in an overflow error). A manager
        given the session's `window` follows it instead, calling this itself."""
        self.settings = replace(self.settings, context_window_tokens=tokens)
        self._history_budget = self._accounting.budget(tokens)
        self._prepared = self._previewed = None  # built for the old budget

    def _follow_window(self) -> None:
        """A window the session learned since (in the `ContextWindow` that the adapter and
        the meter read too) replaces the one budgeted for."""
        learned = None if self._window is None else self._window.tokens
        if learned is not None and learned != self.settings.context_window_tokens:
            self.use_window(learned)

    @property
    def _budget(self) -> HistoryBudget:
        self._follow_window()
        return self._history_budget

    def refused(self, request_bytes: int, prompt_tokens: int | None) -> None:
        """The last request (`request_bytes` of messages and tool schemas) was refused as
        too long, the provider counting `prompt_tokens` if it said: the one retry
        `recover_from_overflow` builds next is sized by this."""
        history = min(self.last_request_bytes, request_bytes)
        reserved = self._last_reserved_bytes
        self._refusal = Refusal(request_bytes, history, prompt_tokens, reserved_bytes=reserved)

    @property
    def summary_threshold_bytes(self) -> int:
        """The request size past which layer 4 summarises, for the window as now known."""
        return self._strategy.summary_threshold(self._budget.history_bytes())

    @property
    def summary_threshold_source(self) -> str:
        """Which threshold `summary_threshold_bytes` is, and how to raise it."""
        return wording.threshold_source(
            self.settings.strategy,
            self.summary_threshold_bytes,
            self._budget.history_bytes(),
            self.settings.proactive_threshold_bytes,
        )

    @property
    def fixed_part_bytes(self) -> int:
        """What every request carries besides its history (system prompt, tool schemas,
        the reminders' allowance), in the form it takes in the window as now known."""
        return self._budget.reserved_bytes

    # --- the loop's ContextPolicy ----------------------------------------------------------

    def process_tool_results(self, results: Sequence[ToolResult]) -> list[ToolResult]:
        """Layer 1: persist every result over the threshold, then the largest until the
        batch fits its budget; all files of the batch are written, or none. With a window
        known, the threshold, the batch budget and the previews shrink to fit it."""
        budget = self._budget.history_bytes()
        persister = self._persister
        if budget is not None:
            persister = ResultPersister(self._store, settings_for_budget(self.settings, budget))
        batch = persister.persist(results)
        if batch.artifacts:
            self._emit(wording.persisted(batch))
        return list(batch.results)

    def prepare(self, history: History) -> tuple[ChatMessage, ...]:
        # Decided by what the last request was built from, not by whether this call's sync
        # appended anything: a preview (`next_request_bytes`) may have synced it already.
        self._follow_window()  # before the cached request is reused: it may be for the old
        self._sync(history)
        prepared = self._prepared
        if prepared is not None and prepared.still_fits(self._index, self._summary):
            return prepared.request.messages
        budget = self._budget.history_bytes()
        if budget is not None:
            self._persist_latest_results(budget)
            self._check_latest_fits(budget)
        request = self._layers.build(self._lead(), budget)
        if request.utf8_bytes > self._strategy.summary_threshold(budget):
            request = self._summarize_automatically(history, request, budget)
        for event in self._report.events(request):
            self._emit(event)
        self._remember_sent(request.utf8_bytes)
        self._prepared = _Prepared(request, self._summary, self._index, len(self._index.messages))
        return request.messages

    def recover_from_overflow(self, history: History) -> tuple[ChatMessage, ...]:
        """Transcript, summary of the cheap-layer history, then the summary message followed
        by the last `reactive_tail_groups` complete groups. With the breaker open, or when
        the model's summary fails, the summary is an extractive one."""
        try:
            retry = self._compact_reactively(history)
        except CompactionError as error:
            raise ContextOverflowError(
                f"the conversation no longer fits and could not be compacted: {error}"
            ) from error
        return retry.history if isinstance(retry, CompactionOutcome) else retry.messages

    # --- for the front end ---------------------------------------------------------------

    def next_request_bytes(self, history: History) -> int:
        """Bytes of the request history `prepare` would build from `history` now, short of
        a new summary (after a resume: the restored summary plus what follows it). For
        `/context` and the toolbar: it reports nothing, writes nothing, and is remembered
        until the history grows or the summary changes, so a redraw costs nothing."""
        return self._preview(history).request.utf8_bytes

    def _preview(self, history: History) -> _Prepared:
        self._follow_window()
        self._sync(history)
        previewed = self._previewed
        if previewed is None or not previewed.still_fits(self._index, self._summary):
            request = self._layers.build(self._lead(), self._budget.history_bytes())
            previewed = _Prepared(request, self._summary, self._index, len(self._index.messages))
            self._previewed = previewed
        return previewed

    def continue_from(self, history: History) -> None:
        """`history` (a resumed or rewound conversation) was compacted and reported by the
        run that made it: snip and micro count from what it holds, so this run reports only
        what it newly omits or clears (`micro: 1 result cleared`, not the earlier run's
        twelve again). Call after `restore_summary`."""
        self._report.already_reported(self._preview(history).request)

    def for_subagent(self) -> FullContext:
        """A subagent's policy: its large results are persisted here too, so a child cannot
        flood its own context, while its history stays its own."""
        return _PersistOnly(self)

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
        summary = summarize(self._summarizer, base)
        self._breaker.succeeded()
        state = self._set_summary(summary, transcript, covered_messages=len(history))
        self._emit_summary(state, transcript, "manual", before)
        return CompactionOutcome((state.message,), transcript, summary)

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
        self._reset_index()  # the next history is the one this summary belongs to

    # --- steps -------------------------------------------------------------------------

    def _check_latest_fits(self, budget: int) -> None:
        """The run cannot go on when the latest message group alone is over the window:
        no layer may cut what the model has not seen yet."""
        latest = self._index.group_count - 1
        size = self._index.group_bytes(latest, latest + 1) if latest >= 0 else 0
        if size > budget:
            raise ContextOverflowError(_too_large(size, self._budget))

    def _reset_index(self) -> None:
        self._index = CanonicalIndex()
        self._layers = CheapLayers(self._index, self._strategy)

    def _sync(self, history: History) -> None:
        """Bring the index up to `history` (validating its pairing)."""
        appended = self._index.appended_part(history)
        if appended is None:
            # Not a continuation of what this manager saw: start over, and forget a summary
            # that was made of another history.
            self._reset_index()
            self._summary = None
            self._index.append(history, history)
            return
        if not appended:
            return
        first_history = not self._index.messages
        self._index.append(appended, history)
        if first_history:
            self._forget_summary_that_does_not_fit()

    def _forget_summary_that_does_not_fit(self) -> None:
        """A restored summary belongs to the first history it meets. If it does not end on a
        group boundary of that history it was made of another one; drop it now, or it would
        replace messages it never summarised once the history grows past its count."""
        state = self._summary
        if state is not None and self._index.group_at(state.covered_messages) is None:
            self._summary = None

    def _lead(self) -> Lead | None:
        """The summary that applies to the indexed history, in front of its first
        uncovered group."""
        state = self._summary
        if state is None:
            return None
        first_group = self._index.group_at(state.covered_messages)
        return None if first_group is None else Lead(state.message, state.utf8_bytes, first_group)

    def _covered_by_lead(self) -> int:
        """Canonical messages the summary in front of the request stands for (0 if none)."""
        state = self._summary
        return 0 if state is None or self._lead() is None else state.covered_messages

    def _base_bytes(self) -> int:
        lead = self._lead()
        if lead is None:
            return self._index.utf8_bytes
        return lead.utf8_bytes + self._index.bytes_from(self._covered_by_lead())

    def _base_messages(self, history: History) -> tuple[ChatMessage, ...]:
        lead = self._lead()
        if lead is None:
            return tuple(history)
        return (lead.message, *history[self._covered_by_lead() :])

    def _summarize_automatically(
        self, history: History, cheap: LayeredRequest, budget: int | None
    ) -> LayeredRequest:
        """One summary attempt; on failure the cheap-layer request goes out as it is."""
        if not self._breaker.closed:
            return cheap
        try:
            transcript = self._write_transcript(history)
            summary = summarize(self._summarizer, history_to_summarize(cheap.messages, budget))
        except CompactionError as error:
            self._summary_failed(error, "this request goes out without a summary")
            return cheap
        self._breaker.succeeded()
        state = self._set_summary(summary, transcript, covered_messages=len(history))
        self._emit_summary(state, transcript, "automatic", cheap.utf8_bytes, threshold=True)
        return self._layers.build(self._lead(), budget)

    def _summarize_for_recovery(self, request: History, limit: int | None) -> CompactionSummary:
        """The model's summary of `request` cut to fit `limit` (its request must fit the
        window), else an extractive one of all of it (which sends nothing)."""
        if self._breaker.closed:
            try:
                summary = summarize(self._summarizer, history_to_summarize(request, limit))
            except CompactionError as error:
                self._summary_failed(error, "using an extractive summary instead")
            else:
                self._breaker.succeeded()
                return summary
        return self._fallback.summarize(request)

    def _compact_reactively(self, history: History) -> CompactionOutcome | LayeredRequest:
        """The retry after a refusal, at most `_retry_limit` bytes: the cheap layers' request
        when it fits, else a summary of it (cut to fit) followed by as many of the last
        `reactive_tail_groups` groups as fit. A history that would not be smaller than the
        refused request, or that cannot fit at all, is never sent."""
        self._sync(history)
        limit = self._retry_limit()
        self._refusal = None  # one retry per refusal
        if limit is not None:
            self._persist_latest_results(limit)
            self._check_latest_fits(limit)
        cheap = self._layers.build(self._lead(), limit)
        if limit is not None and cheap.utf8_bytes <= min(limit, self.last_request_bytes - 1):
            for event in self._report.events(cheap):
                self._emit(event)
            self._remember_sent(cheap.utf8_bytes)
            return cheap
        if self._nothing_to_summarize():
            raise CompactionError(
                f"nothing can be removed: the request holds only the latest message "
                f"({cheap.utf8_bytes:,} B); start a fresh session or use a larger window"
            )
        return self._summarize_for_retry(history, cheap, limit)

    def _summarize_for_retry(
        self, history: History, cheap: LayeredRequest, limit: int | None
    ) -> CompactionOutcome:
        already_covered = self._covered_by_lead()
        transcript = self._write_transcript(history)
        summary = self._summarize_for_recovery(cheap.messages, limit)
        message = summary_message(summary, transcript.relative_path)
        covered = self._fitting_tail(message_utf8_bytes(message), already_covered, limit)
        size = message_utf8_bytes(message) + self._index.bytes_from(covered)
        if limit is not None and size > limit:
            raise CompactionError(_too_large(size, self._budget))
        refused = self.last_request_bytes
        # Judged with a window known: without one, a provider that calls a small request
        # too long is answered with the seed's recovery, as before.
        if limit is not None and refused and size >= refused:
            raise CompactionError(
                f"compacting would not make the request smaller ({refused:,} B → {size:,} B)"
            )
        state = self._set_summary(summary, transcript, covered_messages=covered)
        # The tail as the request shows it, the size above: a result persisted for this
        # retry (`_persist_latest_results`) goes as its preview, never whole again.
        recovered = (state.message, *self._index.shown[covered:])
        self._emit_summary(state, transcript, "overflow", cheap.utf8_bytes)
        self._remember_sent(size)
        return CompactionOutcome(recovered, transcript, summary)

    def _retry_limit(self) -> int | None:
        """Bytes of request history the retry may hold: within the window's budget and, after
        a refusal this manager was told of, under what the refusal allows (smaller always)."""
        budget = self._budget.history_bytes()
        refusal = self._refusal
        if refusal is None:
            return budget
        window = self._budget.window
        room = None if window is None else window.prompt_tokens
        request_limit = retry_limit_bytes(refusal, room, self.settings.unstated_retry_share)
        limit = retry_history_limit(refusal, request_limit, self._budget.reserved_bytes)
        return limit if budget is None else min(budget, limit)

    def _remember_sent(self, utf8_bytes: int) -> None:
        """The request history about to go out: its size, and what its budget reserved
        besides it (the fixed part in the form that request carries), for `refused`."""
        self.last_request_bytes = utf8_bytes
        self._last_reserved_bytes = self._budget.reserved_bytes

    def _nothing_to_summarize(self) -> bool:
        """Whether the request is the latest group alone, with no summary in front of it:
        a summary of it would only add to it."""
        return self._lead() is None and self._index.group_count <= 1

    def _persist_latest_results(self, budget: int) -> None:
        """Layer 1 for results that entered before the window was known: when the latest
        group does not fit, its results over the window's persist threshold go to files now,
        previews sized for the window shown in their place. Canonical history keeps them
        whole. A result no larger than a full preview as configured stays as it is: its
        preview would be no smaller."""
        latest = self._index.group_count - 1
        if latest < 0 or not self._index.is_tool_group(latest):
            return
        if self._index.group_bytes(latest, latest + 1) <= budget:
            return
        start, stop = self._index.group_start(latest), self._index.group_start(latest + 1)
        full_preview = self.settings.preview_head_bytes + self.settings.preview_tail_bytes
        shown = [
            (position, message)
            for position in range(start, stop)
            if isinstance(message := self._index.shown[position], ToolMessage)
            and not is_persisted(message.content)
            and self._index.message_bytes(position, position + 1) > full_preview
        ]
        results = [ToolResult(content=message.content) for _, message in shown]
        window_settings = settings_for_budget(self.settings, budget)
        batch = ResultPersister(self._store, window_settings).persist(results)
        if not batch.artifacts:
            return
        for artifact in batch.artifacts:
            position, message = shown[artifact.result_index]
            content = batch.results[artifact.result_index].content
            self._index.show_instead(position, tool_message(content, message.tool_call_id))
        self._layers = CheapLayers(self._index, self._strategy)
        self._prepared = self._previewed = None
        self._emit(wording.persisted(batch))

    def _fitting_tail(self, summary_bytes: int, already_covered: int, budget: int | None) -> int:
        """Where the kept tail starts: the last `reactive_tail_groups` groups, fewer while
        they do not fit the budget (at least the latest one). The tail is kept from the
        groups after the current summary: messages it already stands for must not come
        back in full, or the retry grows instead of shrinking."""
        for count in range(self.settings.reactive_tail_groups, 0, -1):
            covered = max(self._index.start_of_last_groups(count), already_covered)
            if budget is None or summary_bytes + self._index.bytes_from(covered) <= budget:
                return covered
        return max(self._index.start_of_last_groups(1), already_covered)

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
        self._emit(wording.summary_failed(error, consequence))
        if self._breaker.failed():
            self._emit(wording.breaker_opened(self._breaker.limit))

    def _emit_summary(
        self,
        state: _SummaryState,
        transcript: ArtifactReference,
        trigger: wording.SummaryTrigger,
        before: int,
        *,
        threshold: bool = False,
    ) -> None:
        """`threshold`: an automatic summary, whose first line of the session also says
        which threshold it passed and how to raise it."""
        after = state.utf8_bytes + self._index.bytes_from(state.covered_messages)
        event = wording.summarised(
            state.message, state.covered_messages, transcript, trigger, (before, after)
        )
        if threshold and not self._threshold_told:
            self._threshold_told = True
            source = self.summary_threshold_source
            event = replace(event, text=f"{event.text} (threshold: {source})")
        self._emit(event)

    def _emit(self, event: CompactionApplied | Notice) -> None:
        if self._on_event is not None:
            self._on_event(event)


def _too_large(size: int, budget: HistoryBudget) -> str:
    """Says what the prompt's room is spent on: with a small window the system prompt and
    tool schemas alone can fill it, and a 12-token message would otherwise look to blame."""
    window = budget.window
    tokens = budget.calibration.tokens_for(size)
    limit = "the window"
    if window is not None:
        fixed = budget.calibration.tokens_for(budget.reserved_bytes)
        limit = (
            f"{window.prompt_tokens:,} tokens for the prompt; the system prompt, tool schemas "
            f"and reminders need about {fixed:,}"
        )
    return (
        f"the latest message alone ({size:,} B, about {tokens:,} tokens) does not fit the "
        f"model's context window ({limit}); start a fresh session or use a larger window"
    )


class _PersistOnly(FullContext):
    """Whole history in every request, but results go through the manager's layer 1."""

    def __init__(self, manager: CompactionManager) -> None:
        self._manager = manager

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        return self._manager.process_tool_results(results)


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
