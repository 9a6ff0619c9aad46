"""Answers chapter 8's summary requests with the extractive summarizer, so the demo can
compact its own history without an LLM."""

from __future__ import annotations

from collections.abc import Sequence

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    UserMessage,
    assistant_message,
)
from agent_tutorial.core.model import ModelRequest
from agent_tutorial.demo.text import to_json


def is_summary_request(request: ModelRequest) -> bool:
    if request.tools or not request.messages:
        return False
    first = request.messages[0]
    if not isinstance(first, SystemMessage):
        return False
    from agent_tutorial.features.compaction import SUMMARY_SYSTEM_PROMPT  # chapter 8 only

    return first.content == SUMMARY_SYSTEM_PROMPT


def summary_reply(messages: Sequence[ChatMessage]) -> AssistantMessage:
    """The summary, as JSON, of the history the request asks about."""
    from agent_tutorial.features.compaction import ExtractiveSummarizer

    summary = ExtractiveSummarizer().summarize(_summarized_history(messages))
    return assistant_message(to_json(summary.to_json_object()))


def _summarized_history(messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """The history a summary request is about: after the system prompt, and without the
    closing user instruction ("summarise now") that `ModelHistorySummarizer` appends."""
    history = messages[1:]
    return history[:-1] if history and isinstance(history[-1], UserMessage) else history
