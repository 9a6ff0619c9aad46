"""Builders and fakes shared by the compaction tests (this module holds no tests itself)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_tutorial.core.events import CompactionApplied, Notice
from agent_tutorial.core.messages import (
    ChatMessage,
    History,
    assistant_message,
    tool_call,
    tool_message,
    user_message,
)
from agent_tutorial.features.compaction import (
    CompactionError,
    CompactionManager,
    CompactionSettings,
    CompactionSummary,
)
from agent_tutorial.features.compaction.persist import ResultPersister
from agent_tutorial.features.compaction.store import ArtifactStore

TRANSCRIPT_1 = ".agent_tutorial/artifacts/transcript-id-1.jsonl"
"""Where the first summary's transcript is written (ids come from `counting_ids`)."""
BIG = "x" * 30_000
"""Two of these in a request exceed the 50,000-byte summary threshold."""

SUMMARY = CompactionSummary(
    current_goal="Tour the repository",
    key_findings=("the loop lives in core/loop.py",),
    files_read_or_changed=("core/loop.py",),
    remaining_work=("describe the tools",),
    user_constraints=("read only",),
)


def counting_ids(prefix: str = "id") -> Callable[[], str]:
    """A deterministic artifact id generator: `id-1`, `id-2`, ..."""
    numbers = itertools.count(1)
    return lambda: f"{prefix}-{next(numbers)}"


def tool_group(
    number: int, content: str = "result", *, calls: int = 1, name: str = "read_file"
) -> list[ChatMessage]:
    """An assistant message with `calls` calls and their results."""
    ids = [f"call-{number}-{index}" for index in range(calls)]
    assistant = assistant_message(
        None, [tool_call(call_id, name, f'{{"path": "file{number}.py"}}') for call_id in ids]
    )
    return [assistant, *(tool_message(content, call_id) for call_id in ids)]


def history_with(groups: int, content: str = "result", *, prompt: str = "go") -> list[ChatMessage]:
    """A user prompt followed by `groups` tool groups (so `groups + 1` groups in all)."""
    history: list[ChatMessage] = [user_message(prompt)]
    for number in range(groups):
        history.extend(tool_group(number, content))
    return history


class FakeSummarizer:
    """Answers with scripted summaries or raises scripted errors, recording each input.

    `before_each` runs first on every call (e.g. to look at the disk at that moment).
    """

    def __init__(
        self,
        outcomes: Sequence[CompactionSummary | CompactionError] = (),
        *,
        before_each: Callable[[History], None] | None = None,
    ) -> None:
        self._outcomes = list(outcomes)
        self.calls: list[tuple[ChatMessage, ...]] = []
        self._before_each = before_each

    def summarize(self, history: History) -> CompactionSummary:
        if self._before_each is not None:
            self._before_each(history)
        self.calls.append(tuple(history))
        outcome = (
            self._outcomes[min(len(self.calls), len(self._outcomes)) - 1]
            if self._outcomes
            else SUMMARY
        )
        if isinstance(outcome, CompactionError):
            raise outcome
        return outcome


class Recorder:
    """Collects what the manager emits."""

    def __init__(self) -> None:
        self.events: list[CompactionApplied | Notice] = []

    def __call__(self, event: CompactionApplied | Notice) -> None:
        self.events.append(event)

    def applied(self, layer: str | None = None) -> list[CompactionApplied]:
        return [
            event
            for event in self.events
            if isinstance(event, CompactionApplied) and layer in (None, event.layer)
        ]

    def notices(self) -> list[Notice]:
        return [event for event in self.events if isinstance(event, Notice)]


def make_manager(
    workspace: Path,
    summarizer: Any = None,
    *,
    recorder: Recorder | None = None,
    id_prefix: str = "id",
    **settings: Any,
) -> CompactionManager:
    return CompactionManager(
        workspace,
        summarizer if summarizer is not None else FakeSummarizer(),
        id_generator=counting_ids(id_prefix),
        on_event=recorder,
        settings=CompactionSettings(**settings),
    )


def make_persister(
    workspace: Path, *, id_generator: Callable[[], str] | None = None, **settings: Any
) -> ResultPersister:
    """Layer 1 as the manager builds it, with ids `id-1`, `id-2`, ... unless given."""
    store = ArtifactStore(workspace, id_generator or counting_ids())
    return ResultPersister(store, CompactionSettings(**settings))
