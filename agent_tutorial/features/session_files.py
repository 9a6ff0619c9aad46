"""Reading session files: the record types, and loading and repairing a session. It also
holds the low-level file helpers that the writer (`session_log`) and the listing
(`session_index`) share."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from secrets import token_hex
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import orjson

from agent_tutorial.core.errors import EXIT_USAGE, AgentTutorialError
from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    ToolMessage,
    ToolPairingError,
    UserMessage,
    from_wire,
    to_wire,
    tool_message,
    validate_tool_pairing,
)
from agent_tutorial.core.paths import STATE_DIR
from agent_tutorial.core.text import encodable
from agent_tutorial.features.state_folder import ensure_state_folder

FORMAT_VERSION = 1
INTERRUPTED_RESULT = "Error [interrupted]: the session ended before this tool call finished"
SUMMARY_LAYERS = frozenset({"summary", "reactive"})
DUMP_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS

SESSION_FILE_NAME = re.compile(r"(?P<stamp>\d{8}T\d{6}Z)-(?P<id>[0-9a-f]{8})\.jsonl")
_SESSION_ID = re.compile(r"[0-9a-f]{8}")

Record: TypeAlias = dict[str, Any]


class SessionError(AgentTutorialError):
    """Base of every session error; the CLI prints `str(error)`."""


class SessionPathError(SessionError):
    pass


class SessionLogError(SessionError):
    pass


class SessionLoadError(SessionError):
    pass


class SessionInUseError(SessionError):
    pass


class SessionLookupError(SessionError):
    """No session, or more than one, matches what the user asked for (exit code 2)."""

    exit_code = EXIT_USAGE


@dataclass(frozen=True, slots=True)
class SessionMeta:
    """The first line of a session file. Holds the endpoint's host only: never a URL that
    could carry credentials, never a key."""

    session_id: str
    chapter: int
    model: str
    endpoint_host: str | None
    started: datetime
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if not _SESSION_ID.fullmatch(self.session_id):
            raise ValueError(f"session id must be 8 lowercase hex digits, got {self.session_id!r}")
        if self.started.utcoffset() is None:
            raise ValueError("started must be a timezone-aware datetime")

    @classmethod
    def new(
        cls,
        chapter: int,
        model: str,
        base_url: str | None,
        *,
        started: datetime | None = None,
        session_id: str | None = None,
    ) -> SessionMeta:
        """Meta for a session starting now; `base_url` is reduced to its host here."""
        return cls(
            session_id=session_id or token_hex(4),
            chapter=chapter,
            model=model,
            endpoint_host=endpoint_host(base_url),
            started=(started or datetime.now(UTC)).astimezone(UTC),
        )

    def file_name(self) -> str:
        return f"{self.started.astimezone(UTC):%Y%m%dT%H%M%SZ}-{self.session_id}.jsonl"

    def to_record(self) -> Record:
        return {
            "type": "session_meta",
            "format_version": self.format_version,
            "session_id": self.session_id,
            "started": self.started.astimezone(UTC).isoformat(),
            "chapter": self.chapter,
            "model": self.model,
            "endpoint_host": self.endpoint_host,
        }

    @classmethod
    def from_record(cls, record: Record, where: str) -> SessionMeta:
        if record.get("type") != "session_meta":
            raise SessionLoadError(f"{where}: the first line is not a session_meta record")
        version = record.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise SessionLoadError(
                f"{where}: format version {version!r} is not one this version reads "
                f"(up to {FORMAT_VERSION}); upgrade agent-tutorial"
            )
        try:
            return cls(
                session_id=_typed(record, "session_id", str),
                chapter=_typed(record, "chapter", int),
                model=_typed(record, "model", str),
                endpoint_host=_optional_str(record, "endpoint_host"),
                started=datetime.fromisoformat(_typed(record, "started", str)),
                format_version=version,
            )
        except (TypeError, ValueError) as error:
            raise SessionLoadError(f"{where}: bad session_meta record: {error}") from error


def _typed(record: Record, key: str, kind: type[Any]) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{key} must be {kind.__name__}, got {value!r}")
    return value


def _optional_str(record: Record, key: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key} must be a string or null, got {value!r}")
    return value


def endpoint_host(base_url: str | None) -> str | None:
    """`host` or `host:port` of an endpoint URL, without its credentials, path or query."""
    if not base_url:
        return None
    try:
        parts = urlsplit(base_url if "//" in base_url else f"//{base_url}")
        host, port = parts.hostname, parts.port
    except ValueError:  # a malformed port or IPv6 literal: better no host than a guess
        return None
    if host is None:
        return None
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


REWIND_RECORD = "rewind"
"""A record that cuts the conversation back to its first `messages` messages."""


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """The latest summary state, for `CompactionManager.restore_summary(content, covered)`."""

    layer: str
    summary_content: str
    covered_messages: int


@dataclass(frozen=True, slots=True)
class LoadedSession:
    meta: SessionMeta
    history: tuple[ChatMessage, ...]
    summary: SummaryRecord | None
    turns: int
    first_prompt: str | None
    repaired: list[str]
    """What loading fixed (a torn last line, interrupted tool calls), for a notice."""


def load_session(path: Path, *, repair: bool = True) -> LoadedSession:
    """Rebuild a session's canonical history, summary state and counts from its file.

    A torn last line (no newline, unparsable, or trailing NUL bytes left by a crash) is cut
    off; tool calls left without results get an `interrupted` result. With `repair`, both
    fixes are written to the file (under its lock) so it is whole again; without it (for
    listing), the file is only read. Damage anywhere else raises `SessionLoadError`.
    """
    if not repair:
        data = _read_file(path)
        good_length, repaired = whole_length(data)
        return _rebuild(data[:good_length], str(path), repaired)[0]
    fd = open_locked(path)
    try:
        data = read_all(fd, path)
        good_length, repaired = whole_length(data)
        loaded, added = _rebuild(data[:good_length], str(path), repaired)
        cut_torn_end(fd, path, good_length, len(data))
        append_durably(fd, path, [_message_record(message) for message in added])
    finally:
        close_quietly(fd)
    return loaded


@dataclass(frozen=True, slots=True)
class DamagedLine:
    """A line of a session file that does not read back, and why (`sessions show`)."""

    number: int
    problem: str


def salvage_session(path: Path) -> list[ChatMessage | DamagedLine]:
    """What can still be shown of a session that does not load: each message line that
    reads and each line that does not, in file order. Nothing is repaired or resumed from
    this; raises `SessionLoadError` when the file cannot be read at all."""
    where = path.name
    lines = _read_file(path).removesuffix(b"\n").split(b"\n")
    shown: list[ChatMessage | DamagedLine] = []
    for number, line in enumerate(lines, start=1):
        try:
            record = _parse_line(line, number, where)
            if number == 1:
                SessionMeta.from_record(record, f"{where}:1")
            elif record["type"] == "message":
                shown.append(_message_from(record, f"{where}:{number}"))
        except SessionLoadError as error:
            shown.append(DamagedLine(number, str(error)))
    return shown


def whole_length(data: bytes) -> tuple[int, list[str]]:
    """The length of `data` up to its last whole, parsable line, and what was torn after it.

    Only the end is examined: a crash can tear just the last write, and filesystems may
    leave NUL bytes where unsynced data should have been.
    """
    repaired: list[str] = []
    content = data.rstrip(b"\0")
    if len(content) < len(data):
        repaired.append(f"removed {len(data) - len(content)} NUL bytes left by a crash")
    end = content.rfind(b"\n") + 1
    if end < len(content):
        repaired.append(f"cut a torn last line ({len(content) - end} bytes without a newline)")
        return end, repaired
    last_start = content.rfind(b"\n", 0, max(end - 1, 0)) + 1
    if end and not _parses(content[last_start : end - 1]):
        repaired.append(f"cut an unreadable last line ({end - last_start} bytes)")
        return last_start, repaired
    return end, repaired


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _rebuild(
    data: bytes, where: str, repaired: list[str]
) -> tuple[LoadedSession, list[ToolMessage]]:
    """The session in `data` (whole lines only), and the interrupted results it lacked."""
    records = [_parse_line(line, number, where) for number, line in _numbered_lines(data)]
    if not records:
        if repaired:  # there were bytes, but no line of them was whole
            raise SessionLoadError(
                f"{where} has no whole session_meta line: its only line is torn or unreadable"
            )
        raise SessionLoadError(f"{where} is empty: it has no session_meta line")
    meta = SessionMeta.from_record(records[0], where)
    history, summary = _replay(records, where, repaired)
    added = _interrupted_results(history)
    repaired.extend(f"added an interrupted result for tool call {m.tool_call_id!r}" for m in added)
    history.extend(added)
    try:
        validate_tool_pairing(history)
    except ToolPairingError as error:
        raise SessionLoadError(f"{where}: tool calls and results do not pair: {error}") from error
    users = [message.content for message in history if isinstance(message, UserMessage)]
    loaded = LoadedSession(
        meta=meta,
        history=tuple(history),
        summary=summary,
        turns=len(users),
        first_prompt=users[0] if users else None,
        repaired=repaired,
    )
    return loaded, added


def _replay(
    records: Sequence[Record], where: str, repaired: list[str]
) -> tuple[list[ChatMessage], SummaryRecord | None]:
    """The messages after the meta line, and the latest summary state that fits them."""
    history: list[ChatMessage] = []
    summary: SummaryRecord | None = None
    for number, record in enumerate(records[1:], start=2):
        if record["type"] == "message":
            history.append(_message_from(record, f"{where}:{number}"))
        elif record["type"] == "compaction":
            try:
                summary = _summary_from(record, len(history), f"{where}:{number}") or summary
            except SessionLoadError as error:  # the messages are intact: keep them all
                repaired.append(f"ignored a summary record that does not fit ({error})")
        elif record["type"] == REWIND_RECORD:
            summary = _rewound(record, history, summary, repaired, f"{where}:{number}")
    return history, summary


def _rewound(
    record: Record,
    history: list[ChatMessage],
    summary: SummaryRecord | None,
    repaired: list[str],
    where: str,
) -> SummaryRecord | None:
    """`/undo` and `/rewind` leave the messages on disk (history stays append-only) and
    say how many of them the conversation keeps; a summary of dropped ones goes too."""
    keep = record.get("messages")
    if not isinstance(keep, int) or isinstance(keep, bool) or not 0 <= keep <= len(history):
        repaired.append(f"ignored a rewind record that does not fit ({where}: {keep!r})")
        return summary
    del history[keep:]
    return None if summary is not None and summary.covered_messages > keep else summary


def _numbered_lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    return enumerate(data.split(b"\n")[:-1], start=1)  # data ends with a newline or is empty


def _parse_line(line: bytes, number: int, where: str) -> Record:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise SessionLoadError(
            f"{where}:{number}: line is not JSON ({error}); the file is damaged before its "
            "last line, so it is not resumed"
        ) from error
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        raise SessionLoadError(f"{where}:{number}: line is not a record with a 'type'")
    return record


def _message_from(record: Record, where: str) -> ChatMessage:
    wire = record.get("message")
    if not isinstance(wire, dict):
        raise SessionLoadError(f"{where}: message record without a message object")
    try:
        return from_wire(wire)
    # from_wire trusts nested shapes: a non-object tool call surfaces as AttributeError.
    except (ValueError, TypeError, AttributeError) as error:
        raise SessionLoadError(f"{where}: bad message: {error}") from error


def _summary_from(record: Record, messages_so_far: int, where: str) -> SummaryRecord | None:
    """The summary state a compaction record holds; raises on one that cannot be right."""
    details = record.get("details")
    layer = record.get("layer")
    if layer not in SUMMARY_LAYERS or not isinstance(details, dict):
        return None
    if "summary_content" not in details or "covered_messages" not in details:
        return None
    content, covered = details["summary_content"], details["covered_messages"]
    valid_count = isinstance(covered, int) and not isinstance(covered, bool)
    if not isinstance(content, str) or not valid_count or not 0 <= covered <= messages_so_far:
        raise SessionLoadError(
            f"{where}: summary record covers {covered!r} of {messages_so_far} messages "
            "or has no text"
        )
    return SummaryRecord(layer=str(layer), summary_content=content, covered_messages=covered)


def _interrupted_results(history: Sequence[ChatMessage]) -> list[ToolMessage]:
    """Results for the calls the last assistant message left unanswered (a crash mid-batch)."""
    answered: set[str] = set()
    for message in reversed(history):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if isinstance(message, AssistantMessage):
            return [
                tool_message(INTERRUPTED_RESULT, call.id)
                for call in message.tool_calls
                if call.id not in answered
            ]
        return []
    return []


# Low-level file helpers, shared with the writer in `session_log`.


def ensure_sessions_directory(project_root: Path) -> Path:
    """`.agent_tutorial/sessions`, made if missing; symlinks and files on the way are refused."""
    state = project_root / STATE_DIR
    try:
        ensure_state_folder(project_root)
    except OSError as error:
        _is_real_directory(state)  # a symlink or a file: it says which
        raise SessionPathError(f"cannot create {state}: {os_reason(error)}") from error
    directory = state / "sessions"
    try:
        directory.mkdir(exist_ok=True)
    except FileExistsError:
        pass  # a symlink or a file: _is_real_directory says which
    except OSError as error:
        raise SessionPathError(f"cannot create {directory}: {os_reason(error)}") from error
    _is_real_directory(directory)
    return directory


def _existing_sessions_directory(project_root: Path) -> Path | None:
    """`.agent_tutorial/sessions` if it exists (checked as above), else None."""
    directory = project_root
    for name in (".agent_tutorial", "sessions"):
        directory = directory / name
        if not _is_real_directory(directory):
            return None
    return directory


def _is_real_directory(path: Path) -> bool:
    """False if `path` is missing; raises `SessionPathError` for a symlink or a non-directory."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise SessionPathError(f"{path} is a symlink; sessions are kept in real directories only")
    if not stat.S_ISDIR(mode):
        raise SessionPathError(f"{path} is not a directory")
    return True


def session_files(project_root: Path) -> list[Path]:
    """The session files of the project, in no particular order."""
    directory = _existing_sessions_directory(project_root)
    if directory is None:
        return []
    try:
        return [path for path in directory.iterdir() if SESSION_FILE_NAME.fullmatch(path.name)]
    except OSError as error:
        raise SessionPathError(f"cannot list {directory}: {os_reason(error)}") from error


def file_id(path: Path) -> str:
    """The session id in a session file's name."""
    match = SESSION_FILE_NAME.fullmatch(path.name)
    return match["id"] if match else ""


def open_locked(path: Path) -> int:
    """A descriptor for appending to an existing session, holding its exclusive lock."""
    flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as error:
        raise SessionLoadError(f"cannot open session {path}: {os_reason(error)}") from error
    with ExitStack() as on_failure:
        on_failure.callback(close_quietly, fd)
        _require_regular_file(fd, path)
        lock_exclusively(fd, path)
        on_failure.pop_all()
    return fd


def open_for_reading(path: Path) -> int:
    """A read-only descriptor of a regular session file (never through a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise SessionLoadError(f"cannot open session {path}: {os_reason(error)}") from error
    with ExitStack() as on_failure:
        on_failure.callback(close_quietly, fd)
        _require_regular_file(fd, path)
        on_failure.pop_all()
    return fd


def _read_file(path: Path) -> bytes:
    fd = open_for_reading(path)
    try:
        return read_all(fd, path)
    finally:
        os.close(fd)


def read_all(fd: int, path: Path) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    try:
        while chunk := os.pread(fd, 1 << 20, offset):
            chunks.append(chunk)
            offset += len(chunk)
    except OSError as error:
        raise SessionLoadError(f"cannot read session {path}: {os_reason(error)}") from error
    return b"".join(chunks)


def _require_regular_file(fd: int, path: Path) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise SessionLoadError(f"{path} is not a regular file")


def lock_exclusively(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        raise SessionInUseError(
            f"session {path.name} is already open (in this or another process)"
        ) from error
    except OSError as error:
        if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):  # no locks here: go on without
            raise SessionLogError(f"cannot lock {path}: {os_reason(error)}") from error


def append_line(fd: int, line: bytes) -> None:
    written = os.write(fd, line)
    if written != len(line):  # only a full disk shortens a write to a regular file
        raise OSError(errno.ENOSPC, f"short write ({written} of {len(line)} bytes)")


def append_durably(fd: int, path: Path, records: Sequence[Record]) -> None:
    """Write and fsync, raising `SessionLogError` (for creation and repairs)."""
    if not records:
        return
    try:
        for record in records:
            append_line(fd, encode_record(record))
        os.fsync(fd)
    except OSError as error:
        raise SessionLogError(f"cannot write {path}: {os_reason(error)}") from error


def cut_torn_end(fd: int, path: Path, good_length: int, length: int) -> None:
    if good_length == length:
        return
    try:
        os.ftruncate(fd, good_length)
        os.fsync(fd)
    except OSError as error:
        raise SessionLogError(f"cannot cut the torn end of {path}: {os_reason(error)}") from error


def fsync_directory(directory: Path, path: Path) -> None:
    """Make the new file's name durable, not just its bytes."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        raise SessionLogError(f"cannot sync the directory of {path}: {os_reason(error)}") from error


def close_quietly(fd: int) -> None:
    with suppress(OSError):
        os.close(fd)


def _message_record(message: ChatMessage) -> Record:
    return {"type": "message", "message": to_wire(message)}


def encode_record(record: Record) -> bytes:
    """One JSON line; values orjson does not know (paths) are written as `str(value)`."""
    try:
        return orjson.dumps(record, default=str, option=DUMP_OPTIONS)
    except orjson.JSONEncodeError:
        # A lone surrogate (a byte of a file name that is not UTF-8) is written as `\\xe9`.
        return orjson.dumps(_scrub_surrogates(record), default=str, option=DUMP_OPTIONS)


def _scrub_surrogates(value: object) -> object:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {key: _scrub_surrogates(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub_surrogates(item) for item in value]
    return value


def os_reason(error: OSError) -> str:
    return error.strerror or str(error)
