"""Other agents' context strategies, re-implemented from their published descriptions so
the bench can replay the same conversation through them. Each is a history processor
(`prepare`) over the same canonical history; summaries go to the bench's summarizer.

- learn-claude-code s06: every tool result but the last 3 becomes "[Previous: used X]"
  (when longer than 100 characters); past 50,000 estimated tokens (characters / 4) the
  whole conversation is replaced by a summary and an acknowledgement.
- SWE-agent `LastNObservations(n, polling)`: every observation but the first and the last
  `n` becomes "Old environment output: (N lines omitted)"; with `polling` the cut moves
  only every `polling` steps, so between moves the prompt only grows.
- OpenHands `LLMSummarizingCondenser(max_size=120, keep_first=4)`: once the view holds
  more than `max_size` events, the events after the first `keep_first` are summarised
  until half of `max_size` remains; the summary sits after the kept head.
- opencode prune + compaction: after each user turn, walking back past the last two
  turns, tool outputs beyond the most recent 40,000 tokens are cleared if that frees more
  than 20,000 tokens; when a request would not fit the window minus the output cap, the
  conversation is summarised and continued from the summary.

Messages are events and tool messages are observations; cuts snap to message groups so
tool-call pairing holds.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    History,
    ToolMessage,
    UserMessage,
    assistant_message,
    iter_message_groups,
    tool_message,
    user_message,
)
from agent_tutorial.core.tools import ToolResult
from agent_tutorial.features.compaction import HistorySummarizer, history_utf8_bytes

CHARS_PER_TOKEN = 4
"""The estimate learn-claude-code and opencode use: characters / 4."""


class _PassThroughResults:
    """Peers take tool results as they come (their own output caps are outside the bench)."""

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        return results

    def recover_from_overflow(self, history: History) -> Sequence[ChatMessage] | None:
        return None


class RawHistory(_PassThroughResults):
    """No compaction at all: every request carries the whole conversation."""

    def prepare(self, history: History) -> Sequence[ChatMessage]:
        return history


def _estimated_tokens(messages: History) -> int:
    return history_utf8_bytes(messages) // CHARS_PER_TOKEN


def _summary_text(summarizer: HistorySummarizer, messages: History) -> str:
    summary = summarizer.summarize(messages)
    return orjson.dumps(summary.to_json_object()).decode()


def _call_names(history: History) -> dict[str, str]:
    return {
        call.id: call.name
        for message in history
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }


class LearnClaudeCodeS06(_PassThroughResults):
    keep_recent = 3
    threshold_tokens = 50_000

    def __init__(self, summarizer: HistorySummarizer) -> None:
        self._summarizer = summarizer
        self._lead: tuple[ChatMessage, ...] = ()
        self._covered = 0

    def prepare(self, history: History) -> Sequence[ChatMessage]:
        messages = self._micro([*self._lead, *history[self._covered :]])
        if _estimated_tokens(messages) <= self.threshold_tokens:
            return messages
        text = _summary_text(self._summarizer, messages)
        self._lead = (
            user_message(f"[Conversation compressed.]\n\n{text}"),
            assistant_message("Understood. I have the context from the summary. Continuing."),
        )
        self._covered = len(history)
        return self._lead

    def _micro(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        names = _call_names(messages)
        results = [i for i, message in enumerate(messages) if isinstance(message, ToolMessage)]
        for index in results[: max(0, len(results) - self.keep_recent)]:
            message = messages[index]
            if isinstance(message, ToolMessage) and len(message.content) > 100:
                name = names.get(message.tool_call_id, "tool")
                messages[index] = tool_message(f"[Previous: used {name}]", message.tool_call_id)
        return messages


class SweAgentLastN(_PassThroughResults):
    def __init__(self, n: int = 5, polling: int = 1) -> None:
        self.n = n
        self.polling = polling

    def prepare(self, history: History) -> Sequence[ChatMessage]:
        observations = [i for i, m in enumerate(history) if isinstance(m, ToolMessage)]
        last_removed = max(0, (len(observations) // self.polling) * self.polling - self.n)
        omitted = set(observations[1:last_removed])
        return [
            _elided(message) if index in omitted and isinstance(message, ToolMessage) else message
            for index, message in enumerate(history)
        ]


def _elided(message: ToolMessage) -> ToolMessage:
    lines = len(message.content.splitlines())
    return tool_message(f"Old environment output: ({lines} lines omitted)", message.tool_call_id)


def _group_starts(history: History) -> list[int]:
    starts, offset = [], 0
    for group in iter_message_groups(history):
        starts.append(offset)
        offset += len(group)
    return starts


class OpenHandsSummarizing(_PassThroughResults):
    max_size = 120
    keep_first = 4

    def __init__(self, summarizer: HistorySummarizer) -> None:
        self._summarizer = summarizer
        self._summary: UserMessage | None = None
        self._forgotten_until = 0

    def prepare(self, history: History) -> Sequence[ChatMessage]:
        view = self._view(history)
        if len(view) <= self.max_size:
            return view
        return self._condense(history)

    def recover_from_overflow(self, history: History) -> Sequence[ChatMessage] | None:
        return self._condense(history)

    def _head_end(self, history: History) -> int:
        return max([s for s in _group_starts(history) if s <= self.keep_first], default=0)

    def _view(self, history: History) -> list[ChatMessage]:
        head = list(history[: self._head_end(history)])
        lead = [] if self._summary is None else [self._summary]
        return [*head, *lead, *history[max(self._forgotten_until, len(head)) :]]

    def _condense(self, history: History) -> list[ChatMessage]:
        head_end = self._head_end(history)
        from_tail = self.max_size // 2 - self.keep_first - 1
        wanted = max(head_end, len(history) - from_tail)
        tail_start = min([s for s in _group_starts(history) if s >= wanted], default=len(history))
        previous = [] if self._summary is None else [self._summary]
        start = max(self._forgotten_until, head_end)
        text = _summary_text(self._summarizer, [*previous, *history[start:tail_start]])
        self._summary = user_message(f"<summary>{text}</summary>")
        self._forgotten_until = tail_start
        return self._view(history)


class OpencodePrune(_PassThroughResults):
    protect_tokens = 40_000
    minimum_tokens = 20_000
    cleared = "[Old tool result content cleared]"

    def __init__(
        self, summarizer: HistorySummarizer, window_tokens: int | None, output_cap: int
    ) -> None:
        self._summarizer = summarizer
        self._usable = None if window_tokens is None else window_tokens - output_cap
        self._pruned: set[str] = set()
        self._users_seen = 0
        self._lead: tuple[ChatMessage, ...] = ()
        self._covered = 0

    def prepare(self, history: History) -> Sequence[ChatMessage]:
        users = sum(1 for message in history if isinstance(message, UserMessage))
        if users > self._users_seen:  # a user turn ended: opencode prunes then
            self._users_seen = users
            self._prune(history)
        request = self._request(history)
        if self._usable is not None and _estimated_tokens(request) > self._usable:
            return self.recover_from_overflow(history)
        return request

    def recover_from_overflow(self, history: History) -> Sequence[ChatMessage]:
        text = _summary_text(self._summarizer, self._request(history))
        self._lead = (
            assistant_message(f"Summary of the conversation so far:\n{text}"),
            user_message("Continue if you have next steps."),
        )
        self._covered = len(history)
        return self._lead

    def _request(self, history: History) -> list[ChatMessage]:
        return [
            tool_message(self.cleared, m.tool_call_id)
            if isinstance(m, ToolMessage) and m.tool_call_id in self._pruned
            else m
            for m in [*self._lead, *history[self._covered :]]
        ]

    def _prune(self, history: History) -> None:
        turns = total = pruned = 0
        chosen: list[str] = []
        for message in reversed(history[self._covered :]):
            if isinstance(message, UserMessage):
                turns += 1
            if turns < 2 or not isinstance(message, ToolMessage):
                continue
            if message.tool_call_id in self._pruned:
                break  # everything before was pruned by an earlier pass
            estimate = len(message.content) // CHARS_PER_TOKEN
            total += estimate
            if total > self.protect_tokens:
                pruned += estimate
                chosen.append(message.tool_call_id)
        if pruned > self.minimum_tokens:
            self._pruned.update(chosen)
