"""Durable sessions: each run appends its canonical messages and notable events to
`.agent_tutorial/sessions/<utc-timestamp>-<id>.jsonl`, so `--continue` and `--resume ID`
can rebuild the conversation after an exit or a crash. The writer is in `session_log`; the
reader, the record types and the errors are in `session_files`; listing, checking and
pruning are in `session_index`; every public name is importable from here.

File format (one JSON object per line, written whole with orjson):

    {"type": "session_meta", "format_version": 1, "session_id": ..., "started": ..., ...}
    {"type": "message", "message": <OpenAI wire shape>}     one per canonical message
    {"type": "usage" | "compaction" | "notice" | "permission", ...}     events worth keeping
    {"type": <kind given to SessionLog.record>, ...}                    what the CLI adds

Errors:

    SessionError
    ├── SessionPathError     `.agent_tutorial` or `sessions` is a symlink or not a directory
    ├── SessionLogError      the log cannot be created or written (disk full, closed file)
    ├── SessionLoadError     a file is damaged somewhere other than its torn last line
    ├── SessionInUseError    another process is writing that session
    └── SessionLookupError   no session, or more than one, matches an id prefix
"""

from agent_tutorial.features.session_files import (
    FORMAT_VERSION,
    INTERRUPTED_RESULT,
    SUMMARY_LAYERS,
    DamagedLine,
    LoadedSession,
    Record,
    SessionError,
    SessionInUseError,
    SessionLoadError,
    SessionLogError,
    SessionLookupError,
    SessionMeta,
    SessionPathError,
    SummaryRecord,
    endpoint_host,
    load_session,
    salvage_session,
)
from agent_tutorial.features.session_index import (
    FIRST_PROMPT_CHARS,
    SessionCheck,
    SessionInfo,
    check_session,
    continue_candidates,
    delete_sessions,
    find_session,
    list_sessions,
    read_header,
    sessions_older_than,
    written_by_this_user,
)
from agent_tutorial.features.session_log import SessionLog

__all__ = [
    "FIRST_PROMPT_CHARS",
    "FORMAT_VERSION",
    "INTERRUPTED_RESULT",
    "SUMMARY_LAYERS",
    "DamagedLine",
    "LoadedSession",
    "Record",
    "SessionCheck",
    "SessionError",
    "SessionInUseError",
    "SessionInfo",
    "SessionLoadError",
    "SessionLog",
    "SessionLogError",
    "SessionLookupError",
    "SessionMeta",
    "SessionPathError",
    "SummaryRecord",
    "check_session",
    "continue_candidates",
    "delete_sessions",
    "endpoint_host",
    "find_session",
    "list_sessions",
    "load_session",
    "read_header",
    "salvage_session",
    "sessions_older_than",
    "written_by_this_user",
]
