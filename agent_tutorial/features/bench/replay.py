"""Replays one conversation through one strategy and measures what its requests cost.

The canonical history grows as the trace says; before each model call the strategy builds
the request, which is measured (bytes, modelled tokens, prefix-cache reads, cost under each
price sheet) but never sent anywhere. A request over the window is counted; a strategy that
can recover from an overflow gets the chance, as the agent would after the provider's
refusal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from agent_tutorial.core.messages import ChatMessage, History, ToolMessage, tool_message
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.bench.cache_model import PrefixCache, tokens_for
from agent_tutorial.features.bench.prices import PriceSheet
from agent_tutorial.features.bench.trace import TraceStep
from agent_tutorial.features.compaction import CompactionSummary, ExtractiveSummarizer
from agent_tutorial.features.compaction.sizes import serialize_message
from agent_tutorial.features.compaction.summary import summary_request_bytes

FIXED_PREFIX_BYTES = 7_700
"""The system prompt and tool schemas at the front of every agent request: about the size
of chapter 8's (760 B of prompt, 6,900 B of schemas for nine tools)."""
_FIXED_PREFIX = b"\0" * FIXED_PREFIX_BYTES  # stands for the same bytes in every request
RECENT_RESULTS = 10
"""Retention is the share of this many latest tool results a request carries verbatim."""


_Input = TypeVar("_Input")
_Output = TypeVar("_Output")


class ReplayStrategy(Protocol):
    """What the agent's loop asks of chapter 8, as the bench drives it."""

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]: ...

    def prepare(self, history: History) -> Sequence[ChatMessage]: ...

    def recover_from_overflow(self, history: History) -> Sequence[ChatMessage] | None: ...


@dataclass(frozen=True, slots=True)
class BenchSetup:
    """What every strategy of one bench run shares."""

    workspace: Path
    """A scratch directory for the artifacts chapter 8 writes."""
    summarizer: RecordingSummarizer
    context_window_tokens: int | None
    output_cap_tokens: int
    """Tokens kept free for the reply: a request fits when it is at most window minus this."""


@dataclass(frozen=True, slots=True)
class Contender:
    name: str
    build: Callable[[BenchSetup], ReplayStrategy]


@dataclass(frozen=True, slots=True)
class StrategyResult:
    name: str
    requests: int
    bytes_sent: int
    prompt_tokens: int
    cached_tokens: int
    costs: dict[str, float]
    """Dollars of input per price sheet name."""
    largest_request_tokens: int
    over_window: int
    summary_calls: int
    verbatim_share: float
    """Mean over agent requests of the share of the latest tool results carried verbatim."""
    prepare_seconds: float

    @property
    def cache_hit_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


class RecordingSummarizer:
    """The bench's summarizer: deterministic and offline (the extractive one), recording
    the size of the request a model summary would have cost."""

    def __init__(self) -> None:
        self._summarizer = ExtractiveSummarizer()
        self.request_bytes: list[int] = []

    def summarize(self, history: History) -> CompactionSummary:
        self.request_bytes.append(summary_request_bytes(history))
        return self._summarizer.summarize(history)


@dataclass
class _Meter:
    sheets: Sequence[PriceSheet]
    usable_tokens: int | None
    cache: PrefixCache = field(default_factory=PrefixCache)
    encoded: dict[ChatMessage, bytes] = field(default_factory=dict)
    requests: int = 0
    bytes_sent: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    largest: int = 0
    over_window: int = 0
    costs: dict[str, float] = field(default_factory=dict)

    def parts(self, request: Sequence[ChatMessage]) -> list[bytes]:
        parts = [_FIXED_PREFIX]
        for message in request:
            data = self.encoded.get(message)
            if data is None:
                data = self.encoded[message] = serialize_message(message)
            parts.append(data)
        return parts

    def fits(self, parts: Sequence[bytes]) -> bool:
        size = tokens_for(sum(len(part) for part in parts))
        return self.usable_tokens is None or size <= self.usable_tokens

    def refused(self, parts: Sequence[bytes]) -> None:
        """A request the provider turns away: its bytes went out, nothing was billed."""
        self.over_window += 1
        self.bytes_sent += sum(len(part) for part in parts)

    def sent(self, parts: Sequence[bytes]) -> None:
        size = sum(len(part) for part in parts)
        self._bill(size, tokens_for(size), self.cache.read(parts))

    def summary_sent(self, size: int) -> None:
        self._bill(size, tokens_for(size), 0)

    def _bill(self, size: int, prompt: int, cached: int) -> None:
        self.requests += 1
        self.bytes_sent += size
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.largest = max(self.largest, prompt)
        for sheet in self.sheets:
            cost = sheet.input_cost(prompt, cached)
            self.costs[sheet.name] = self.costs.get(sheet.name, 0.0) + cost


def replay(
    contender: Contender,
    trace: Sequence[TraceStep],
    setup: BenchSetup,
    sheets: Sequence[PriceSheet],
) -> StrategyResult:
    return _Replay(contender, setup, sheets, trace).run()


class _Replay:
    """One strategy through one trace: for each step, build and measure the request, then
    append the reply and the strategy's processed results to the canonical history."""

    def __init__(
        self,
        contender: Contender,
        setup: BenchSetup,
        sheets: Sequence[PriceSheet],
        trace: Sequence[TraceStep],
    ) -> None:
        self.name = contender.name
        self.trace = trace
        self.strategy = contender.build(setup)
        self.summarizer = setup.summarizer
        window = setup.context_window_tokens
        self.meter = _Meter(sheets, None if window is None else window - setup.output_cap_tokens)
        self.originals = {id_: r.content for step in trace for id_, r in _results_by_id(step)}
        self.history: list[ChatMessage] = []
        self.recent: list[str] = []  # tool-call ids, oldest first
        self.shares: list[float] = []
        self.seconds = 0.0

    def run(self) -> StrategyResult:
        summaries_before = len(self.summarizer.request_bytes)
        for step in self.trace:
            self.history.extend(step.before)
            request = self._request()
            if self.recent:
                recent = self.recent[-RECENT_RESULTS:]
                self.shares.append(_verbatim_share(request, recent, self.originals))
            self._record(step)
        summaries = self.summarizer.request_bytes[summaries_before:]
        for size in summaries:
            self.meter.summary_sent(size)
        return self._result(len(summaries))

    def _request(self) -> Sequence[ChatMessage]:
        """The request the model answers at this point, measured as it goes out."""
        request = self._timed(self.strategy.prepare, self.history)
        parts = self.meter.parts(request)
        if self.meter.fits(parts):
            self.meter.sent(parts)
            return request
        recovered = self._timed(self.strategy.recover_from_overflow, self.history)
        return _after_overflow(self.meter, request, parts, recovered)

    def _record(self, step: TraceStep) -> None:
        self.history.append(step.reply)
        processed = self._timed(self.strategy.process_tool_results, step.results)
        for call, result in zip(step.reply.tool_calls, processed, strict=True):
            self.history.append(tool_message(result.content, call.id))
            self.recent.append(call.id)

    def _timed(self, work: Callable[[_Input], _Output], argument: _Input) -> _Output:
        started = time.perf_counter()
        try:
            return work(argument)
        finally:
            self.seconds += time.perf_counter() - started

    def _result(self, summary_calls: int) -> StrategyResult:
        meter = self.meter
        return StrategyResult(
            name=self.name,
            requests=meter.requests,
            bytes_sent=meter.bytes_sent,
            prompt_tokens=meter.prompt_tokens,
            cached_tokens=meter.cached_tokens,
            costs=dict(meter.costs),
            largest_request_tokens=meter.largest,
            over_window=meter.over_window,
            summary_calls=summary_calls,
            verbatim_share=sum(self.shares) / len(self.shares) if self.shares else 1.0,
            prepare_seconds=self.seconds,
        )


def _after_overflow(
    meter: _Meter,
    request: Sequence[ChatMessage],
    parts: list[bytes],
    recovered: Sequence[ChatMessage] | None,
) -> Sequence[ChatMessage]:
    """The request the model answers after an over-window one. Without recovery it is
    counted over the window and priced as if accepted (a real run would have stopped);
    with recovery the refused request is counted and the recovered one sent, or refused
    in turn."""
    if recovered is None:
        meter.over_window += 1
        meter.sent(parts)
        return request
    meter.refused(parts)
    recovered_parts = meter.parts(recovered)
    if meter.fits(recovered_parts):
        meter.sent(recovered_parts)
    else:
        meter.refused(recovered_parts)
    return recovered


def _results_by_id(step: TraceStep) -> list[tuple[str, ToolResult]]:
    return [
        (call.id, result) for call, result in zip(step.reply.tool_calls, step.results, strict=True)
    ]


def _verbatim_share(
    request: Sequence[ChatMessage], call_ids: Sequence[str], originals: dict[str, str]
) -> float:
    carried = {
        message.tool_call_id: message.content
        for message in request
        if isinstance(message, ToolMessage)
    }
    whole = sum(1 for id_ in call_ids if carried.get(id_) == originals[id_])
    return whole / len(call_ids)
