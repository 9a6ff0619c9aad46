"""One conversation with the agent and its durable session log, shared by the one-shot
`run` command and the REPL: start fresh, resume a session, run a turn, compact on demand.

`/clear` and `/resume` swap the whole agent and log; the front end's sinks (renderer,
JSON summary) stay subscribed across the swap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from agent_tutorial.bootstrap import Agent, AgentDeps, build_agent
from agent_tutorial.config import Settings
from agent_tutorial.core.events import EventBus, EventSink, Notice
from agent_tutorial.core.loop import RunResult
from agent_tutorial.core.messages import ChatMessage
from agent_tutorial.features.compaction import CompactionOutcome
from agent_tutorial.features.session_files import REWIND_RECORD
from agent_tutorial.features.sessions import (
    LoadedSession,
    SessionError,
    SessionLog,
    SessionMeta,
    load_session,
)
from agent_tutorial.profiles import ChapterProfile
from agent_tutorial.project import Project

EMPTY_ANSWER_NOTICE = "the model finished with an empty answer"


@dataclass(frozen=True)
class ConversationSetup:
    """What stays the same across sessions of one process: the chapter, the parts every
    agent is built from (the model connection, the settings, the project, the sandbox,
    the one redactor and window), and the front end's sinks."""

    profile: ChapterProfile
    deps: AgentDeps
    """The session's parts; each agent gets its own events and history on top."""
    sinks: Sequence[EventSink]

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    @property
    def project(self) -> Project:
        """Where `.agent_tutorial/` (sessions, artifacts) is, and the tools' boundary."""
        return self.deps.project


class Conversation:
    """The current agent and session log; `start_new` and `resume` replace both."""

    def __init__(self, setup: ConversationSetup) -> None:
        self.setup = setup
        self.log: SessionLog | None = None
        self.session_id = ""
        self.saved_session_id: str | None = None
        """The id `--resume` can find: None while no session file is open, and after a new
        session that got no message was closed (its empty file is deleted)."""
        self._agent: Agent | None = None

    @property
    def agent(self) -> Agent:
        """Built on first use, so resuming builds one agent, not two (each build reports
        its start-up warnings, such as skipped skills)."""
        if self._agent is None:
            self._agent = self._build(())
        return self._agent

    @classmethod
    def open(cls, setup: ConversationSetup, resume: Path | None = None) -> Conversation:
        conversation = cls(setup)
        if resume is None:
            conversation.start_new()
        else:
            conversation.resume(resume)
        return conversation

    def start_new(self) -> None:
        """A fresh history and a new session file."""
        self.close()
        if self._agent is None or self._agent.runner.history:
            self._agent = self._build(())
        meta = SessionMeta.new(
            self.setup.profile.chapter,
            self.setup.settings.model or "",
            self.setup.settings.base_url,
        )
        self.session_id = meta.session_id
        self._attach_log(lambda: SessionLog.create(self.setup.project.root, meta))

    def resume(self, path: Path) -> LoadedSession:
        """Rebuild the conversation recorded in `path` and append to that file from now on."""
        if self.log is not None and self.log.path == path:
            self.close()  # the file is locked while open; this process holds the lock
        loaded = load_session(path)
        self.close()
        self._agent = self._build(loaded.history)
        self._restore_summary(loaded)
        self._counted_already(loaded.history)
        if self._agent.todos is not None:
            self._agent.todos.restore(loaded.history)
        self.session_id = loaded.meta.session_id
        self._attach_log(lambda: SessionLog.open_existing(path))
        for repair in loaded.repaired:
            self.agent.events.emit(Notice("warning", f"session repaired: {repair}"))
        self._warn_if_another_chapter(loaded)
        return loaded

    def _warn_if_another_chapter(self, loaded: LoadedSession) -> None:
        recorded, now = loaded.meta.chapter, self.setup.profile.chapter
        if recorded != now:
            text = (
                f"session {loaded.meta.session_id} was recorded with chapter {recorded} and "
                f"continues under chapter {now}: its tools, permissions or compaction differ"
            )
            self.agent.events.emit(Notice("warning", text))

    def run(self, prompt: str) -> RunResult:
        checkpoints = self.agent.checkpoints  # records the files a turn changes (undo)
        if checkpoints is not None:
            checkpoints.begin_turn(self.session_id, prompt, len(self.agent.runner.history))
        try:
            result = self.agent.runner.run(prompt)
            if not result.final_text.strip():  # else a script sees nothing and wonders why
                self.agent.events.emit(Notice("warning", EMPTY_ANSWER_NOTICE))
            return result
        finally:
            if checkpoints is not None:
                checkpoints.end_turn()
            self._end_turn()

    def rewind(self, keep: int) -> None:
        """Keep the conversation's first `keep` messages (`/undo`, `/rewind`). The log
        keeps every message and gains a rewind record, which loading honours; the agent
        is rebuilt on the shorter history, as resuming builds one."""
        history = self.agent.runner.history[:keep]
        if self.log is not None:
            self.log.record(REWIND_RECORD, {"messages": keep})
        self._agent = self._build(history)
        self._counted_already(history)
        if self._agent.todos is not None:
            self._agent.todos.restore(history)
        if self.log is not None:
            self._agent.events.subscribe(self.log)

    def compact(self, focus: str | None = None) -> CompactionOutcome:
        """`/compact`: summarise the whole conversation now (chapter 8)."""
        if self.agent.compaction is None:
            raise SessionError("compaction arrives in chapter 8; run with --chapter 8")
        try:
            return self.agent.compaction.compact_proactively(self.agent.runner.history, focus=focus)
        finally:
            self._end_turn()

    def close(self) -> None:
        """Close the session log; a new session nobody wrote a message in is deleted."""
        if self.log is not None:
            if self.log.close_discarding_if_empty():
                self.saved_session_id = None
            self.log = None

    def _restore_summary(self, loaded: LoadedSession) -> None:
        compaction = self.agent.compaction
        if loaded.summary is None or compaction is None:
            return
        try:
            compaction.restore_summary(
                loaded.summary.summary_content, loaded.summary.covered_messages
            )
        except ValueError as error:  # a hand-edited file: carry on with the whole history
            self.agent.events.emit(Notice("warning", f"summary not restored: {error}"))

    def _counted_already(self, history: Sequence[ChatMessage]) -> None:
        """What the earlier run's snip and micro did to `history` was counted then: this
        run's lines, totals and /context count from here."""
        if self.agent.compaction is not None and history:
            self.agent.compaction.continue_from(history)

    def _build(self, history: Sequence[ChatMessage]) -> Agent:
        """Another agent from the session's parts: the same connection, redactor, window
        and hook scripts, nothing read again."""
        deps = replace(
            self.setup.deps,
            events=EventBus(self.setup.sinks),
            history=history,
        )
        return build_agent(self.setup.profile, deps)

    def _attach_log(self, open_log: Callable[[], SessionLog]) -> None:
        self.saved_session_id = None
        try:
            self.log = open_log()
        except SessionError as error:
            self.agent.events.emit(Notice("warning", f"session not saved: {error}"))
            return
        self.saved_session_id = self.session_id
        self.agent.events.subscribe(self.log)

    def _end_turn(self) -> None:
        if self.log is None:
            return
        try:
            self.log.end_turn()
        except SessionError as error:
            self.agent.events.emit(Notice("warning", f"session log stopped: {error}"))
