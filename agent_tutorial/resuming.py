"""Which session `--continue` or `--resume ID` resumes, and under which chapter.

`--continue` takes the newest session with a prompt that reads whole; every newer one it
passes over is named with the reason (and the line, for a damaged file), never skipped
silently. A session resumes under the chapter it was recorded with unless `--chapter`
says otherwise (`Conversation.resume` then warns that the tools differ).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from agent_tutorial.features.sessions import (
    LoadedSession,
    SessionLookupError,
    check_session,
    continue_candidates,
    find_session,
    load_session,
    written_by_this_user,
)

DEFAULT_CHAPTER = 9
NOT_WRITTEN_HERE = (
    "this folder is not trusted and the file was not written by you here (committed or "
    "copied into the project); `--resume ID` resumes it, `agent-tutorial trust` trusts "
    "the folder"
)


@dataclass(frozen=True)
class ResumeChoice:
    """The session to resume, as read (and validated) before resuming it."""

    path: Path
    session: LoadedSession
    skipped: list[str] = field(default_factory=list)
    """One line for each newer session `--continue` passed over, with why."""

    def resumed_line(self, chapter: int) -> str:
        """Names the session and the chapter it now runs under (the recorded one unless
        `--chapter` chose another; a separate warning says when they differ)."""
        messages = len(self.session.history)
        return f"resumed {self.session.meta.session_id} ({messages} messages, chapter {chapter})"


def choose_session(
    workspace: Path, latest: bool, session_id: str | None, *, others_sessions: bool = True
) -> ResumeChoice | None:
    """The session `--resume ID` (or, with `latest`, `--continue`) names; None for neither.
    Without `others_sessions` (an untrusted folder) `--continue` passes over, and names,
    the session files the agent did not write for this user: a repository can commit a
    conversation in which "the user" asked for anything. Raises `SessionError` when there
    is none to resume or the named one does not load."""
    if session_id is not None:
        path = find_session(workspace, session_id)
        return ResumeChoice(path, load_session(path, repair=False))
    if not latest:
        return None
    skipped: list[str] = []
    damaged = 0
    for info in continue_candidates(workspace):
        if not (others_sessions or written_by_this_user(info)):
            skipped.append(f"skipped session {info.session_id}: {NOT_WRITTEN_HERE}")
            continue
        check = check_session(info)
        if check.problem is None:
            return ResumeChoice(info.path, load_session(info.path, repair=False), skipped)
        skipped.append(f"skipped session {info.session_id}: {check.problem}")
        damaged += 1
    reason = "no saved session to continue in this workspace"
    if skipped:
        why = "is damaged" if damaged == len(skipped) else "was passed over"
        reason = f"{reason}: every session with a prompt {why} ({len(skipped)})"
    raise NothingToContinue(reason, skipped)


class NothingToContinue(SessionLookupError):
    def __init__(self, message: str, skipped: list[str]) -> None:
        super().__init__(message)
        self.skipped = skipped


def chapter_for(choice: ResumeChoice | None, requested: int | None) -> int:
    """The chapter to run: `--chapter`'s, else a resumed session's own, else the default.
    Resuming under the recorded chapter needs no warning (`resumed_line` names it)."""
    if requested is not None:
        return requested
    return DEFAULT_CHAPTER if choice is None else choice.session.meta.chapter
