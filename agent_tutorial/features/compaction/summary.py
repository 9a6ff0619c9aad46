"""Layer 4's summary: the five fields it keeps, the one system message that carries them,
and the model-written summarizer that accepts nothing but exactly that JSON object."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    SystemMessage,
    iter_message_groups,
    system_message,
    user_message,
)
from agent_tutorial.core.model import ModelClient, ModelError, ModelReply, make_request
from agent_tutorial.features.compaction.budget import fewest_to_fit
from agent_tutorial.features.compaction.errors import CompactionError
from agent_tutorial.features.compaction.sizes import history_utf8_bytes

SUMMARY_KIND = "compacted_history"
SUMMARY_FIELDS = (
    "current_goal",
    "key_findings",
    "files_read_or_changed",
    "remaining_work",
    "user_constraints",
)

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

# Compaction adds these user messages to what a summarizer reads; they are not the user's.
FOCUS_PREFIX = "Focus the summary on: "
"""Starts the message that carries a `/compact` focus."""
SUMMARY_INSTRUCTION = "Summarise the conversation above now: reply with the JSON object only."
"""The last message of a model summary request."""


@dataclass(frozen=True, slots=True)
class CompactionSummary:
    """The five fields a layer-4 summary keeps. Lists arrive as tuples; invalid values are
    a `ValueError`, so an invalid summary cannot exist."""

    current_goal: str
    key_findings: tuple[str, ...] = field(default=())
    files_read_or_changed: tuple[str, ...] = field(default=())
    remaining_work: tuple[str, ...] = field(default=())
    user_constraints: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.current_goal, str) or not self.current_goal.strip():
            raise ValueError("current_goal must be a non-empty string")
        for name in SUMMARY_FIELDS[1:]:
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"{name} must be a list of strings")
            if not all(isinstance(item, str) and item.strip() for item in value):
                raise ValueError(f"{name} must contain only non-empty strings")
            object.__setattr__(self, name, tuple(value))

    def to_json_object(self) -> dict[str, Any]:
        return {name: _jsonable(getattr(self, name)) for name in SUMMARY_FIELDS}


def _jsonable(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


class HistorySummarizer(Protocol):
    """Writes the five-field summary of a history; raises `CompactionError` when it cannot."""

    def summarize(self, history: History) -> CompactionSummary: ...


def summarize(summarizer: HistorySummarizer, history: History) -> CompactionSummary:
    """`summarizer`'s summary; a model error on the way is a `CompactionError` too."""
    try:
        return summarizer.summarize(history)
    except ModelError as error:
        raise CompactionError(f"the summary request failed: {error}") from error


# --- the summary message -----------------------------------------------------------------


def summary_message(summary: CompactionSummary, transcript_path: str) -> SystemMessage:
    """The one system message that stands for the summarised history."""
    content = {"kind": SUMMARY_KIND, "transcript_path": transcript_path}
    content.update(summary.to_json_object())
    return system_message(orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode())


def parse_summary_content(content: str) -> tuple[CompactionSummary, str]:
    """The summary and transcript path inside a summary message; `ValueError` if it is not one."""
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError as error:
        raise ValueError(f"summary content is not JSON: {error}") from error
    if not isinstance(data, dict) or data.get("kind") != SUMMARY_KIND:
        raise ValueError(f"summary content is not a {SUMMARY_KIND!r} object")
    transcript_path = data.get("transcript_path")
    if not isinstance(transcript_path, str):
        raise ValueError("summary content has no transcript_path")
    missing = [name for name in SUMMARY_FIELDS if name not in data]
    if missing:
        raise ValueError(f"summary content lacks {missing!r}")
    return CompactionSummary(**{name: data[name] for name in SUMMARY_FIELDS}), transcript_path


def is_compacted_summary(message: ChatMessage) -> bool:
    if not isinstance(message, SystemMessage) or not message.content.startswith("{"):
        return False
    try:
        parse_summary_content(message.content)
    except ValueError:
        return False
    return True


# --- the model-written summary ----------------------------------------------------------


def summary_request(history: History) -> list[ChatMessage]:
    """The messages of a model summary request: the summary prompt, `history`, and a
    closing instruction that keeps a model from carrying on with the task instead."""
    return [system_message(SUMMARY_SYSTEM_PROMPT), *history, user_message(SUMMARY_INSTRUCTION)]


def summary_request_bytes(history: History) -> int:
    """The size of the summary request for `history`, counted as every budget is (its
    transcript bytes): what the manager fits to the window, and what the bench bills."""
    return history_utf8_bytes(summary_request(history))


def history_to_summarize(messages: History, budget: int | None) -> tuple[ChatMessage, ...]:
    """`messages` cut so that their summary request fits `budget` bytes: whole groups go,
    oldest first, but never the latest one."""
    if budget is None:
        return tuple(messages)
    groups = list(iter_message_groups(messages))
    sizes = [history_utf8_bytes(group) for group in groups]
    excess = summary_request_bytes(()) + sum(sizes) - budget
    dropped = fewest_to_fit(excess, sizes[:-1])
    return tuple(message for group in groups[dropped:] for message in group)


class ModelHistorySummarizer:
    """Asks the model for the five-field summary in one tool-free request and accepts
    nothing but exactly that JSON object."""

    def __init__(self, model: ModelClient) -> None:
        self.model = model

    def summarize(self, history: History) -> CompactionSummary:
        try:
            reply = self.model.complete(make_request(summary_request(history), tools=()))
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
        data = orjson.loads(_without_fence(content))
    except orjson.JSONDecodeError as error:
        raise CompactionError(f"the summary reply is not JSON: {error}") from error
    if not isinstance(data, dict):
        raise CompactionError(f"the summary reply is a JSON {type(data).__name__}, not an object")
    _check_summary_fields(data)
    return CompactionSummary(**data)


# One Markdown code fence around the whole reply, untagged or tagged json: small models add
# it despite the prompt. Anything else around or inside it stays an error.
_FENCED = re.compile(
    r"\s*```(?:json)?[ \t]*\n(?P<body>.*)\n[ \t]*```\s*", re.DOTALL | re.IGNORECASE
)


def _without_fence(content: str) -> str:
    match = _FENCED.fullmatch(content)
    if match is None or "```" in match.group("body"):
        return content
    return match.group("body")


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
