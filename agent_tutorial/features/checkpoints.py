"""Checkpoints and undo: the workspace's files recorded before the first write-capable
tool of a turn and again when the turn ends, and undo, which puts back what those turns
changed, whoever changed it (the file tools or bash).

`TurnCheckpoints` is a `CallGuard`: the loop never learns about it. The front end calls
`begin_turn` and `end_turn` around each prompt (`conversation.Conversation.run`). A turn
that changes nothing leaves no checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Literal

from agent_tutorial.adapters.checkpoint_store import (
    CheckpointStore,
    CheckpointStoreError,
    Manifest,
    Snapshot,
)
from agent_tutorial.core.errors import EXIT_FAILURE, EXIT_USAGE, AgentTutorialError
from agent_tutorial.core.events import EventBus, Notice
from agent_tutorial.core.loop import EMPTY_REPLY_FOLLOW_UP
from agent_tutorial.core.messages import ChatMessage, UserMessage
from agent_tutorial.core.tools import ParsedCall, ToolRegistry, ToolResult

WRITE_CAPABLE_EFFECTS = frozenset({"write", "execute"})
"""Tools with these effects may change files (write_file, edit_file, bash)."""
PROMPT_LINE_CHARS = 80

Action = Literal["removed", "recreated", "restored"]


class UndoError(AgentTutorialError):
    """Undo cannot go ahead: bad input (exit 2) or nothing it can do (exit 1)."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpointed turn of a session."""

    number: int
    """1, 2, … in the order the session's turns were checkpointed."""
    time: str
    prompt: str
    """The prompt's first line, shortened."""
    workspace: str
    before: str
    """The manifest recorded before the turn's first write-capable tool."""
    after: str
    """The manifest recorded when the turn ended."""
    changed: tuple[str, ...]
    max_file_bytes: int
    """The size limit the turn's snapshots kept to; undo compares the files now by it."""
    messages_before: int
    """The conversation's length when the turn's prompt was sent."""


class TurnCheckpoints:
    """The guard that takes a turn's checkpoint (the `CallGuard` protocol)."""

    def __init__(self, store: CheckpointStore, workspace: Path, events: EventBus) -> None:
        self.store = store
        self.workspace = workspace
        self.events = events
        self._session_id = ""
        self._prompt = ""
        self._messages_before = 0
        self._before: Snapshot | None = None
        self._pending = False

    def begin_turn(self, session_id: str, prompt: str, messages_before: int) -> None:
        """A prompt's turn starts; `messages_before` is the history's length before it,
        which ties the checkpoint to the turn (`/rewind`)."""
        self._session_id, self._prompt = session_id, prompt
        self._messages_before = messages_before
        self._before, self._pending = None, True

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        if self._pending and parsed.tool.effect in WRITE_CAPABLE_EFFECTS:
            self._pending = False  # one try a turn, taken or not
            self._before = self._snapshot(hold=True)
        return parsed

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        return result

    def end_turn(self) -> None:
        """Record the files as the turn left them; a turn that changed nothing is dropped."""
        before, self._before, self._pending = self._before, None, False
        try:
            if before is not None and self._session_id:
                self._record(before)
        finally:
            self.store.release()

    def _record(self, before: Snapshot) -> None:
        after = self._snapshot()
        if after is None:
            return
        too_large = sorted({*before.too_large, *after.too_large})
        if too_large:
            self._tell_too_large(too_large)
        changed = changed_paths(before.manifest, after.manifest)
        if not changed:
            return
        try:
            number = 1 + len(checkpoints_of(self.store, self._session_id, undone=True))
            record = {
                "type": "checkpoint",
                "number": number,
                "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "prompt": first_line(self._prompt),
                "workspace": str(self.workspace),
                "before": before.digest,
                "after": after.digest,
                "changed": list(changed),
                "max_file_bytes": self.store.max_file_bytes,
                "messages_before": self._messages_before,
            }
            self.store.append_record(self._session_id, record)
        except (CheckpointStoreError, OSError) as error:
            self._warn(f"checkpoint not saved: {error}")

    def _snapshot(self, *, hold: bool = False) -> Snapshot | None:
        try:
            if hold:
                self.store.hold()
            return self.store.snapshot(self.workspace)
        except (CheckpointStoreError, OSError) as error:
            self._warn(f"checkpoint not taken: {error}")
            return None

    def _tell_too_large(self, paths: Sequence[str]) -> None:
        limit = self.store.max_file_bytes
        shown = ", ".join(paths[:3]) + (", …" if len(paths) > 3 else "")
        self.events.emit(
            Notice(
                "info",
                f"checkpoint: {len(paths)} file(s) over {limit:,} bytes not recorded "
                f"(undo leaves them as they are): {shown}",
            )
        )

    def _warn(self, text: str) -> None:
        self.events.emit(Notice("warning", text))


def turn_checkpoints(
    tools: ToolRegistry, store: CheckpointStore, workspace: Path, events: EventBus
) -> TurnCheckpoints | None:
    """The guard for a chapter with a write-capable tool; None for one without."""
    if not any(tool.effect in WRITE_CAPABLE_EFFECTS for tool in tools):
        return None
    return TurnCheckpoints(store, workspace, events)


def changed_paths(before: Manifest, after: Manifest) -> tuple[str, ...]:
    return tuple(sorted(path for path in {*before, *after} if before.get(path) != after.get(path)))


def first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= PROMPT_LINE_CHARS else line[: PROMPT_LINE_CHARS - 1] + "…"


def prompt_starts(history: Sequence[ChatMessage]) -> list[int]:
    """Where each prompt's turn begins in canonical history: its user message (the request
    the loop adds after an empty answer is not a prompt)."""
    return [
        index
        for index, message in enumerate(history)
        if isinstance(message, UserMessage) and message.content != EMPTY_REPLY_FOLLOW_UP
    ]


# Reading the records


def checkpoints_of(
    store: CheckpointStore, session_id: str, *, undone: bool = False
) -> list[Checkpoint]:
    """The session's checkpoints, oldest first; those an undo took back only if `undone`."""
    records = store.records(session_id)
    taken_back = {
        number
        for record in records
        if record.get("type") == "undo"
        for number in _numbers(record.get("checkpoints"))
    }
    found = [
        checkpoint
        for record in records
        if record.get("type") == "checkpoint" and (checkpoint := _checkpoint(record)) is not None
    ]
    return [c for c in found if undone or c.number not in taken_back]


def _numbers(value: object) -> list[int]:
    return [item for item in value if isinstance(item, int)] if isinstance(value, list) else []


def _checkpoint(record: Mapping[str, object]) -> Checkpoint | None:
    fields = [record.get(name) for name in ("time", "prompt", "workspace", "before", "after")]
    number, limit = record.get("number"), record.get("max_file_bytes")
    changed, messages_before = record.get("changed"), record.get("messages_before")
    if not isinstance(number, int) or not isinstance(limit, int):
        return None
    if not isinstance(messages_before, int):
        return None
    if not all(isinstance(value, str) for value in fields) or not isinstance(changed, list):
        return None
    time, prompt, workspace, before, after = (str(value) for value in fields)
    paths = tuple(str(path) for path in changed)
    return Checkpoint(number, time, prompt, workspace, before, after, paths, limit, messages_before)


def latest_session(store: CheckpointStore, *, undone: bool = False) -> str | None:
    """The session whose newest checkpoint (still standing, unless `undone`) is the
    newest of all."""
    newest: tuple[str, str] | None = None
    for session_id in store.sessions():
        standing = checkpoints_of(store, session_id, undone=undone)
        if standing and (newest is None or standing[-1].time >= newest[0]):
            newest = (standing[-1].time, session_id)
    return None if newest is None else newest[1]


def checkpoint_store_bytes(project_root: Path) -> int:
    """The store's size on disk (`/context`)."""
    return ProjectCheckpoints(project_root).store.size_bytes()


def forget_checkpoints(project_root: Path, session_ids: Sequence[str]) -> list[str]:
    """Remove deleted sessions' checkpoints and the objects only they named (`sessions
    prune`); returns a warning line when the store cannot be cleaned."""
    try:
        ProjectCheckpoints(project_root).store.forget(session_ids)
    except (CheckpointStoreError, OSError) as error:
        return [f"checkpoints not removed: {error}"]
    return []


# Undo


@dataclass(frozen=True, slots=True)
class PathChange:
    path: str
    action: Action


@dataclass(frozen=True, slots=True)
class UndoPlan:
    session_id: str
    checkpoints: tuple[Checkpoint, ...]
    workspace: Path
    changes: tuple[PathChange, ...]
    conflicts: tuple[str, ...]
    """Paths changed since the last undone turn ended (the user edited them)."""
    before: Manifest


def plan_undo(store: CheckpointStore, session_id: str, turns: int) -> UndoPlan:
    """What undoing the session's last `turns` checkpointed turns would do."""
    if turns < 1:
        raise UndoError(f"--turns must be at least 1, got {turns}", EXIT_USAGE)
    standing = checkpoints_of(store, session_id)
    if not standing:
        raise UndoError(f"nothing to undo: session {session_id} has no checkpoints left")
    if turns > len(standing):
        raise UndoError(
            f"session {session_id} has {len(standing)} checkpointed turn(s) to undo, not {turns}",
            EXIT_USAGE,
        )
    undone = tuple(standing[-turns:])
    workspace = Path(undone[-1].workspace)
    before = store.manifest(undone[0].before)
    after = store.manifest(undone[-1].after)
    now = store.scan(workspace, max_file_bytes=undone[-1].max_file_bytes).manifest
    changes = tuple(
        PathChange(path, _action(before, path, after)) for path in changed_paths(before, after)
    )
    conflicts = tuple(c.path for c in changes if now.get(c.path) != after.get(c.path))
    return UndoPlan(session_id, undone, workspace, changes, conflicts, before)


def _action(before: Manifest, path: str, after: Manifest) -> Action:
    if path not in before:
        return "removed"
    return "recreated" if path not in after else "restored"


def apply_undo(store: CheckpointStore, plan: UndoPlan) -> list[str]:
    """Put every changed path back; returns one line per path that could not be, and
    records the undo so that the next one goes further back."""
    removed = [c for c in plan.changes if c.action == "removed"]
    put_back = [c for c in plan.changes if c.action != "removed"]
    # Removals first, then the folders they emptied: a file the turns put where a folder
    # was (or a folder where a file was) must be gone before what was there comes back.
    failures = _restore_each(store, plan, removed)
    store.remove_empty_folders(
        plan.workspace, _folders_made([c.path for c in removed], plan.before)
    )
    failures += _restore_each(store, plan, put_back)
    store.append_record(
        plan.session_id,
        {
            "type": "undo",
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "checkpoints": [c.number for c in plan.checkpoints],
        },
    )
    return failures


def _restore_each(
    store: CheckpointStore, plan: UndoPlan, changes: Sequence[PathChange]
) -> list[str]:
    failures: list[str] = []
    for change in changes:
        try:
            store.restore(plan.workspace, change.path, plan.before.get(change.path))
        except (CheckpointStoreError, OSError) as error:
            failures.append(f"{change.path}: {error}")
    return failures


def _folders_made(removed: Sequence[str], before: Manifest) -> list[str]:
    """Folders of removed files that held nothing recorded before the turns."""
    had_files = {str(parent) for path in before for parent in PurePosixPath(path).parents}
    return sorted(
        {
            str(parent)
            for path in removed
            for parent in PurePosixPath(path).parents
            if str(parent) != "." and str(parent) not in had_files
        }
    )


class ProjectCheckpoints:
    """A project's checkpoints as `undo` and `checkpoints list` reach them; a store that
    cannot be read is an `UndoError` (exit 1)."""

    def __init__(self, project_root: Path) -> None:
        # The size limit is the snapshots' business; each record says which one it kept.
        self.store = CheckpointStore.in_state_folder(project_root, max_file_bytes=0)

    def sessions(self) -> list[str]:
        return self.store.sessions()

    def of(self, session_id: str, *, undone: bool = False) -> list[Checkpoint]:
        with _as_undo_error():
            return checkpoints_of(self.store, session_id, undone=undone)

    def latest_session(self, *, undone: bool = False) -> str | None:
        with _as_undo_error():
            return latest_session(self.store, undone=undone)

    def turns_since(self, session_id: str, messages: int) -> int:
        """How many standing checkpoints belong to turns sent once the conversation had
        `messages` messages or more (what `/rewind` to there takes back)."""
        with _as_undo_error():
            standing = checkpoints_of(self.store, session_id)
        return sum(1 for c in standing if c.messages_before >= messages)

    def plan_undo(self, session_id: str, turns: int) -> UndoPlan:
        with _as_undo_error():
            return plan_undo(self.store, session_id, turns)

    def apply_undo(self, plan: UndoPlan) -> list[str]:
        with _as_undo_error():
            return apply_undo(self.store, plan)


@contextmanager
def _as_undo_error() -> Iterator[None]:
    try:
        yield
    except (CheckpointStoreError, OSError) as error:
        raise UndoError(f"checkpoint store: {error}") from None
