"""The strategies the bench compares, each built fresh for one replay."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_tutorial.core.loop import ContextOverflowError
from agent_tutorial.core.messages import ChatMessage, History
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.bench.peers import (
    LearnClaudeCodeS06,
    OpencodePrune,
    OpenHandsSummarizing,
    RawHistory,
    SweAgentLastN,
)
from agent_tutorial.features.bench.replay import (
    FIXED_PREFIX_BYTES,
    BenchSetup,
    Contender,
    ReplayStrategy,
)
from agent_tutorial.features.compaction import (
    CompactionManager,
    CompactionStrategy,
    ContinueAfterSummary,
)
from agent_tutorial.features.compaction.budget import WindowAccounting


class ChapterEight:
    """Chapter 8's manager in the three roles the loop gives it, plus the request-only
    continue turn the runner adds after a summary."""

    def __init__(self, manager: CompactionManager) -> None:
        self._manager = manager
        self._guidance = ContinueAfterSummary()

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        return self._manager.process_tool_results(results)

    def prepare(self, history: History) -> Sequence[ChatMessage]:
        return self._with_guidance(history, self._manager.prepare(history))

    def recover_from_overflow(self, history: History) -> Sequence[ChatMessage] | None:
        try:
            recovered = self._manager.recover_from_overflow(history)
        except ContextOverflowError:
            return None
        return self._with_guidance(history, recovered)

    def _with_guidance(
        self, history: History, request: Sequence[ChatMessage]
    ) -> Sequence[ChatMessage]:
        extra = self._guidance.guidance(history, request)
        return (*request, *extra) if extra else request


def _chapter_eight(strategy: CompactionStrategy) -> Callable[[BenchSetup], ReplayStrategy]:
    def build(setup: BenchSetup) -> ReplayStrategy:
        manager = CompactionManager(
            setup.workspace,
            setup.summarizer,
            strategy=strategy,
            context_window_tokens=setup.context_window_tokens,
            window_accounting=WindowAccounting(FIXED_PREFIX_BYTES, setup.output_cap_tokens),
        )
        return ChapterEight(manager)

    return build


CONTENDERS: tuple[Contender, ...] = (
    Contender("seed", _chapter_eight("seed")),
    Contender("cache-aware", _chapter_eight("cache-aware")),
    Contender("raw", lambda setup: RawHistory()),
    Contender("learn-claude-code s06", lambda setup: LearnClaudeCodeS06(setup.summarizer)),
    Contender("SWE-agent n=5 poll 1", lambda setup: SweAgentLastN(5, 1)),
    Contender("SWE-agent n=5 poll 10", lambda setup: SweAgentLastN(5, 10)),
    Contender("OpenHands 120/4", lambda setup: OpenHandsSummarizing(setup.summarizer)),
    Contender(
        "opencode prune",
        lambda setup: OpencodePrune(
            setup.summarizer, setup.context_window_tokens, setup.output_cap_tokens
        ),
    ),
)
