"""What made each artifact, read back from the session files: the tool call whose result
was persisted (its name and arguments), or the summary a transcript was written before.
`artifacts list` shows it, so rows of 32-digit ids say what they hold.

Only lines that can matter are decoded: a session file that names no artifact is skipped
after one search of its bytes. An artifact no session names (its session pruned, or a
subagent's result, which its parent's file does not keep) has no origin.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agent_tutorial.features.compaction.persist import PERSISTED_BLOCK_START
from agent_tutorial.features.session_files import SessionError, session_files

ARTIFACT_FILE = re.compile(rb"(?:tool-result|transcript)-[a-z0-9]+(?:-[a-z0-9]+)*\.(?:txt|jsonl)")
PERSISTED_PATH = re.compile(
    "^" + re.escape(PERSISTED_BLOCK_START) + r"path: [^\n]*?(tool-result-[a-z0-9-]+\.txt)\n"
)


@dataclass(frozen=True, slots=True)
class PersistedCall:
    """The call whose result the artifact holds."""

    tool: str
    arguments: str
    """As the model wrote them (JSON text)."""


@dataclass(frozen=True, slots=True)
class SummarisedHistory:
    """The conversation a transcript holds, written before it was summarised."""

    trigger: str
    """`automatic`, `manual` (/compact) or `overflow` (the prompt was too long)."""
    covered_messages: int


ArtifactOrigin = PersistedCall | SummarisedHistory


def artifact_origins(project_root: Path) -> dict[str, ArtifactOrigin]:
    """Artifact file name -> what made it, for every artifact the sessions name."""
    origins: dict[str, ArtifactOrigin] = {}
    try:
        paths = session_files(project_root)
    except SessionError:
        return origins
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # listing goes on; `sessions list --check` says what is wrong
        if ARTIFACT_FILE.search(data):
            origins.update(_origins_in(data))
    return origins


def _origins_in(session: bytes) -> Iterator[tuple[str, ArtifactOrigin]]:
    calls: dict[str, PersistedCall] = {}
    for line in session.splitlines():
        if b'"tool_calls"' in line:
            calls.update(_calls(_record(line)))
        elif ARTIFACT_FILE.search(line):
            yield from _origin(_record(line), calls)


def _record(line: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _calls(record: dict[str, Any]) -> dict[str, PersistedCall]:
    message = record.get("message") or {}
    found = {}
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        found[str(call.get("id"))] = PersistedCall(
            str(function.get("name")), str(function.get("arguments") or "")
        )
    return found


def _origin(
    record: dict[str, Any], calls: dict[str, PersistedCall]
) -> Iterator[tuple[str, ArtifactOrigin]]:
    """A tool message whose result was persisted names its file on the preview's `path:`
    line (a result that merely mentions an artifact does not); a summary's compaction
    record names its transcript and what it covered."""
    details = record.get("details") or {}
    if record.get("type") == "message":
        message = record.get("message") or {}
        persisted = PERSISTED_PATH.search(str(message.get("content") or ""))
        call = calls.get(str(message.get("tool_call_id")))
        if persisted is not None and call is not None:
            yield persisted[1], call
    elif record.get("type") == "compaction" and isinstance(details.get("covered_messages"), int):
        name = Path(str(details.get("transcript_path"))).name
        yield name, SummarisedHistory(str(details.get("trigger")), details["covered_messages"])
