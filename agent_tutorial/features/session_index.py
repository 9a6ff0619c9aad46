"""Listing, finding, checking and pruning session files.

Listing reads only each file's header lines (the meta line and the lines up to the first
prompt, at most `HEADER_BYTES`), so `sessions list`, `/sessions` and `--continue` stay
fast however long the sessions grow; a file whose header is damaged is listed with the
reason. `check_session` reads a whole file, as resuming would.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from agent_tutorial.features.session_files import (
    SESSION_FILE_NAME,
    SessionError,
    SessionLoadError,
    SessionLookupError,
    SessionMeta,
    close_quietly,
    file_id,
    load_session,
    open_for_reading,
    os_reason,
    session_files,
)

FIRST_PROMPT_CHARS = 80
HEADER_BYTES = 64 * 1024
"""How much of a file listing reads at most: enough for the meta line and a first prompt
of several pages; a longer first prompt is listed as present but not shown."""
_FIRST_READ_BYTES = 4096
_USER_MESSAGE_PREFIX = b'{"type":"message","message":{"role":"user"'
"""How `SessionLog` starts a prompt's line (orjson, keys in order, no spaces)."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session file as its header lines describe it."""

    session_id: str
    path: Path
    started: datetime
    chapter: int | None
    """None when the header cannot be read."""
    model: str
    first_prompt: str | None
    """The first prompt on one line, at most `FIRST_PROMPT_CHARS` characters."""
    has_prompt: bool
    """False for a session left before its first prompt (never resumed by `--continue`)."""
    size_bytes: int
    modified: datetime
    problem: str | None = None
    """Why the header cannot be read (a damaged file); None for a readable header."""


@dataclass(frozen=True, slots=True)
class SessionCheck:
    """The result of reading a whole session file as resuming would."""

    info: SessionInfo
    problem: str | None
    """The first problem found, with its line (`path:line: …`); None when the file loads."""


def list_sessions(project_root: Path) -> list[SessionInfo]:
    """Every session file of the project, damaged or not, newest first."""
    sessions = [read_header(path) for path in session_files(project_root)]
    sessions.sort(key=lambda info: (info.started, info.path.name), reverse=True)
    return sessions


def read_header(path: Path) -> SessionInfo:
    """What the first lines of one session file say; never raises for a damaged file."""
    stamp = _started_from_name(path)
    try:
        fd = open_for_reading(path)
    except SessionError as error:
        return _damaged(path, stamp, str(error), size=0, modified=stamp)
    try:
        status = os.fstat(fd)
        head = _header_bytes(fd)
    except OSError as error:
        return _damaged(path, stamp, f"cannot read {path}: {os_reason(error)}", 0, stamp)
    finally:
        close_quietly(fd)
    modified = datetime.fromtimestamp(status.st_mtime, UTC)
    lines = head.split(b"\n")
    try:
        meta = SessionMeta.from_record(_record(lines[0], path), str(path))
    except SessionLoadError as error:
        return _damaged(path, stamp, str(error), status.st_size, modified)
    has_prompt, first_prompt, problem = _prompt_or_problem(lines[1:], path)
    return SessionInfo(
        session_id=meta.session_id,
        path=path,
        started=meta.started,
        chapter=meta.chapter,
        model=meta.model,
        first_prompt=first_prompt,
        has_prompt=has_prompt,
        size_bytes=status.st_size,
        modified=modified,
        problem=problem,
    )


def _header_bytes(fd: int) -> bytes:
    """The file's start: 4 KiB, doubled up to `HEADER_BYTES` until it holds a prompt's
    whole line (most sessions need one small read)."""
    size = _FIRST_READ_BYTES
    while True:
        head = os.pread(fd, size, 0)
        prompt_at = head.find(b'"role":"user"')
        whole = prompt_at != -1 and head.find(b"\n", prompt_at) != -1
        if whole or len(head) < size or size >= HEADER_BYTES:
            return head
        size = min(size * 2, HEADER_BYTES)


def _record(line: bytes, path: Path) -> dict[str, object]:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise SessionLoadError(f"{path}:1: the meta line is not JSON ({error})") from error
    if not isinstance(record, dict):
        raise SessionLoadError(f"{path}:1: the first line is not a session_meta record")
    return record


def _first_prompt(lines: Sequence[bytes]) -> tuple[bool, str | None] | None:
    """Whether the header holds a prompt, and the first one on one line; None when a line
    before it does not read. The last element of `lines` may be cut short by
    `HEADER_BYTES`: a prompt there is recognised by how the writer starts such a line, but
    not shown."""
    *whole, last = lines
    for line in whole:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            return None
        if record["type"] != "message":
            continue
        message = record.get("message")
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return True, _one_line(content) if isinstance(content, str) else None
    return last.startswith(_USER_MESSAGE_PREFIX), None


def _prompt_or_problem(lines: Sequence[bytes], path: Path) -> tuple[bool, str | None, str | None]:
    """`has_prompt`, `first_prompt` and `problem` for the lines after the meta line. When
    one before the first prompt does not read, the whole file decides: a torn last line is
    repaired on resume, any other bad line damages the session, which is then listed as
    damaged (and never passed over in silence by `--continue`)."""
    found = _first_prompt(lines)
    if found is not None:
        return *found, None
    try:
        prompt = load_session(path, repair=False).first_prompt
    except (SessionError, OSError) as error:
        return False, None, _named_by_file(str(error), path)
    return prompt is not None, None if prompt is None else _one_line(prompt), None


def _damaged(
    path: Path, started: datetime, problem: str, size: int, modified: datetime
) -> SessionInfo:
    return SessionInfo(
        session_id=file_id(path),
        path=path,
        started=started,
        chapter=None,
        model="",
        first_prompt=None,
        has_prompt=False,
        size_bytes=size,
        modified=modified,
        problem=_named_by_file(problem, path),  # the listing's row has no room for a path
    )


def _started_from_name(path: Path) -> datetime:
    match = SESSION_FILE_NAME.fullmatch(path.name)
    assert match is not None  # session_files() lists only matching names
    try:
        return datetime.strptime(match["stamp"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:  # digits that are no date (a renamed file): sort it oldest
        return datetime.fromtimestamp(0, UTC)


def _one_line(text: str, limit: int = FIRST_PROMPT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def check_session(info: SessionInfo) -> SessionCheck:
    """Read the whole file as resuming would (without repairing it)."""
    if info.problem is not None:
        return SessionCheck(info, _named_by_file(info.problem, info.path))
    try:
        load_session(info.path, repair=False)
    except (SessionError, OSError) as error:
        return SessionCheck(info, _named_by_file(str(error), info.path))
    return SessionCheck(info, None)


def _named_by_file(problem: str, path: Path) -> str:
    """`problem` with the file's full path shortened to its name (`….jsonl:3: …`)."""
    return problem.replace(str(path), path.name)


def continue_candidates(project_root: Path) -> list[SessionInfo]:
    """What `--continue` may resume, newest first: sessions with a prompt, and damaged
    ones (so that skipping them can be reported rather than done silently)."""
    return [info for info in list_sessions(project_root) if info.has_prompt or info.problem]


def written_by_this_user(info: SessionInfo) -> bool:
    """Whether the agent wrote this session file for the user now running it: theirs and
    readable by nobody else, as `SessionLog` creates every file (0600). A checkout or a
    copy leaves a file readable by others (unless the umask is 077)."""
    try:
        status = info.path.lstat()
    except OSError:
        return False
    return status.st_uid == os.geteuid() and not status.st_mode & 0o077


def find_session(project_root: Path, id_or_prefix: str) -> Path:
    """The one session file whose id starts with `id_or_prefix`."""
    prefix = id_or_prefix.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{1,8}", prefix):
        raise SessionLookupError(
            f"{id_or_prefix!r} is not a session id (8 hex digits, or a unique prefix of one)"
        )
    matches = sorted(
        path for path in session_files(project_root) if file_id(path).startswith(prefix)
    )
    if not matches:
        raise SessionLookupError(
            f"no session id starts with {id_or_prefix!r}; `agent-tutorial sessions list` shows them"
        )
    if len(matches) > 1:
        names = ", ".join(path.name for path in matches)
        raise SessionLookupError(f"{id_or_prefix!r} matches {len(matches)} sessions: {names}")
    return matches[0]


def sessions_older_than(
    project_root: Path, age_seconds: float, now: datetime | None = None
) -> list[SessionInfo]:
    """Sessions last written more than `age_seconds` ago, oldest first."""
    # Compare ages, not dates: `now - 1000000d` is before year 1 and overflows a datetime.
    now = now or datetime.now(UTC)
    old = [
        info
        for info in list_sessions(project_root)
        if (now - info.modified).total_seconds() > age_seconds
    ]
    return sorted(old, key=lambda info: info.modified)


def delete_sessions(sessions: Iterable[SessionInfo]) -> tuple[list[SessionInfo], list[str]]:
    """Delete each file unless a process holds it open (its lock is taken); returns what
    was deleted and one line for each file that was kept."""
    deleted: list[SessionInfo] = []
    kept: list[str] = []
    for info in sessions:
        reason = _delete_unless_in_use(info.path)
        if reason is None:
            deleted.append(info)
        else:
            kept.append(f"{info.path.name}: {reason}")
    return deleted, kept


def _delete_unless_in_use(path: Path) -> str | None:
    try:
        fd = open_for_reading(path)
    except SessionError as error:
        return str(error)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path.unlink()
    except BlockingIOError:
        return "in use by a running session; kept"
    except OSError as error:
        return f"cannot delete: {os_reason(error)}"
    finally:
        close_quietly(fd)
    return None
