"""The append-only session writer: `SessionLog` turns the agent's events into whole JSON lines
of a session file, under an exclusive lock, and makes them durable at the end of each turn."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

import orjson

from agent_tutorial.core.events import (
    CompactionApplied,
    Event,
    MessageAppended,
    ModelReplied,
    Notice,
    PermissionDecided,
    UsageReported,
)
from agent_tutorial.core.messages import to_wire
from agent_tutorial.core.model import Usage
from agent_tutorial.core.text import plain_json
from agent_tutorial.features.session_files import (
    DUMP_OPTIONS,
    Record,
    SessionLogError,
    SessionMeta,
    append_durably,
    append_line,
    close_quietly,
    cut_torn_end,
    encode_record,
    ensure_sessions_directory,
    fsync_directory,
    lock_exclusively,
    open_locked,
    os_reason,
    read_all,
    whole_length,
)

# Kinds the loader rebuilds state from; `record()` must not be able to forge them.
_RESERVED_KINDS = frozenset({"session_meta", "message", "compaction"})


class SessionLog:
    """An `EventSink` appending one whole JSON line per canonical message or notable event.

    Streamed text and tool start/finish events are not recorded: the messages hold them.
    Each line is one `write` on an `O_APPEND` descriptor, so a crash can tear only the last
    line; `end_turn()` fsyncs. The file is locked while open, so two processes never
    interleave one session.

    Failure policy: a session log must never end a run. `emit` and `record` run inside the
    agent loop and never raise; the first write failure (a full disk, a closed file) stops
    the log for good — later lines would follow a possibly torn one — and is raised once, as
    `SessionLogError`, by the next `end_turn()`, so the caller can warn and carry on.
    """

    def __init__(self, path: Path, fd: int, *, created: bool = False) -> None:
        self.path = path
        self._fd: int | None = fd
        self._failure: SessionLogError | None = None
        self._failure_raised = False
        self._created = created
        self._messages_written = 0

    @classmethod
    def create(cls, project_root: Path, meta: SessionMeta) -> SessionLog:
        """A new session file holding only its meta line; never overwrites a file."""
        directory = ensure_sessions_directory(project_root)
        path = directory / meta.file_name()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o600)  # conversations can hold private code
        except OSError as error:
            raise SessionLogError(
                f"cannot create session file {path}: {os_reason(error)}"
            ) from error
        log = cls(path, fd, created=True)
        with ExitStack() as on_failure:
            on_failure.callback(path.unlink, missing_ok=True)
            on_failure.callback(log.close)
            lock_exclusively(fd, path)
            append_durably(fd, path, [meta.to_record()])
            fsync_directory(directory, path)
            on_failure.pop_all()
        return log

    @classmethod
    def open_existing(cls, path: Path) -> SessionLog:
        """Reopen a session to append to it, cutting a torn last line first."""
        fd = open_locked(path)
        log = cls(path, fd)
        with ExitStack() as on_failure:
            on_failure.callback(log.close)
            data = read_all(fd, path)
            cut_torn_end(fd, path, whole_length(data)[0], len(data))
            on_failure.pop_all()
        return log

    @property
    def failure(self) -> SessionLogError | None:
        """Why the log stopped, or None while it is healthy."""
        return self._failure

    def emit(self, event: Event) -> None:
        record = _event_record(event)
        if record is not None:
            self._write(record, _encode_event)
            if isinstance(event, MessageAppended):
                self._messages_written += 1

    def record(self, kind: str, payload: dict[str, Any]) -> None:
        """Append a CLI event (a permission decision, an error) as `{"type": kind, **payload}`."""
        if not kind or kind in _RESERVED_KINDS:
            raise ValueError(f"record kind {kind!r} is empty or reserved for the log itself")
        if "type" in payload:
            raise ValueError("payload must not have a 'type' key; the kind goes there")
        self._write({"type": kind, **payload}, encode_record)

    def end_turn(self) -> None:
        """Make everything written so far durable; raise a failure once if there was one."""
        if self._failure is None and self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as error:
                if error.errno != errno.EINVAL:  # EINVAL: this file cannot be synced at all
                    self._stop(error, "sync")
        if self._failure is not None and not self._failure_raised:
            self._failure_raised = True
            raise self._failure

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            close_quietly(fd)  # everything written was already synced by end_turn

    def close_discarding_if_empty(self) -> bool:
        """Close; a file this log created that has no message yet is deleted, so `/clear`
        or leaving the REPL before a prompt adds no empty sessions to the list. Returns
        whether it was deleted. A resumed file is never deleted."""
        empty = self._created and self._messages_written == 0 and self._fd is not None
        if empty and self._fd is not None and _same_file(self._fd, self.path):
            with suppress(OSError):  # a file that stays is a nuisance, not an error
                self.path.unlink()
                self.close()
                return True
        self.close()
        return False

    def __enter__(self) -> SessionLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _write(self, record: Record, encode: Callable[[Record], bytes]) -> None:
        if self._failure is not None:
            return
        try:
            self._append(encode(record))
        except (OSError, orjson.JSONEncodeError) as error:
            self._stop(error, "write")

    def _stop(self, error: Exception, action: str) -> None:
        reason = os_reason(error) if isinstance(error, OSError) else str(error)
        self._failure = SessionLogError(
            f"session log {self.path} stopped: cannot {action} ({reason}); "
            "the session goes on but is no longer recorded"
        )
        self.close()

    def _append(self, line: bytes) -> None:
        if self._fd is None:
            raise OSError(errno.EBADF, "the session log is closed")
        append_line(self._fd, line)


def _same_file(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd` (and locked by us)."""
    try:
        opened, named = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _event_record(event: Event) -> Record | None:
    """The session-file line for one event, or None for events the file does not keep.

    This is the session file's own format, read back by the loader; stream-json output has
    its own shape (`agent_tutorial.headless`), so either can change without the other.
    Streamed text, tool start/finish, turns and subagent events are not kept: the messages
    already hold them.
    """
    if isinstance(event, MessageAppended):
        return {"type": "message", "message": to_wire(event.message)}
    if isinstance(event, CompactionApplied):
        return {
            "type": "compaction",
            "layer": event.layer,
            "text": event.text,
            "count": event.count,
            "bytes_saved": event.bytes_saved,
            "details": dict(event.details),
        }
    if isinstance(event, Notice):
        return {"type": "notice", "level": event.level, "text": event.text}
    if isinstance(event, PermissionDecided):
        return {
            "type": "permission",
            "tool": event.tool,
            "subject": event.subject,
            "decision": event.decision,
            "reason": event.reason,
            "source": event.source,
        }
    if isinstance(event, UsageReported):
        return {"type": "usage", "purpose": event.purpose, **_usage_fields(event.usage)}
    if isinstance(event, ModelReplied) and event.usage is not None:
        return {"type": "usage", **_usage_fields(event.usage)}
    return None


def _usage_fields(usage: Usage) -> dict[str, int]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def _encode_event(record: Record) -> bytes:
    """Like `encode_record`, but a value orjson refuses even then (an integer beyond 64 bits, a
    key that is not a string) is written as text: one odd value in an event's details must
    not stop the log and lose the rest of the conversation."""
    try:
        return encode_record(record)
    except orjson.JSONEncodeError:
        return orjson.dumps(plain_json(record), option=DUMP_OPTIONS)
