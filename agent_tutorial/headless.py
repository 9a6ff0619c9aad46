"""`--output-format json` and `stream-json`, in Claude Code's shapes so scripts written for
it work here too.

json prints one result object, on one line, when the run ends, success or failure (a
command line `run` refuses included). stream-json prints one
object per line: a `system/init` line first, then the agent's events, then the same result
object; every line carries `session_id`. While the model is awaited (from a turn's start
to the first thing that happens next), a `system/waiting` line says so every few seconds,
so a script can tell a slow server from a stuck pipe. The result's `session_id` is the one
a script can `--resume`: null when the run kept no session file (none could be opened, or a
hook blocked the prompt and the empty file was deleted). The init and event lines keep the
id the run announced: they describe the run as it went. The event lines are this module's own shape,
kept apart from the session file's record format (`features.session_log`), so either can
change without the other.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import IO, Any, Literal

import orjson

from agent_tutorial.core.events import (
    WAITING_INTERVAL_S,
    CompactionApplied,
    Event,
    EventSink,
    MessageAppended,
    ModelReplied,
    NestedEvent,
    Notice,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
    UsageReported,
)
from agent_tutorial.core.messages import to_wire
from agent_tutorial.core.model import Usage
from agent_tutorial.core.text import plain_json
from agent_tutorial.core.tools import CommandOutcome
from agent_tutorial.run_summary import RunSummary

ResultSubtype = Literal["success", "error_max_turns", "error_during_execution"]
Record = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a one-shot run ended: its answer, or the one-line error that stopped it."""

    subtype: ResultSubtype
    final_text: str = ""
    error: str | None = None

    @property
    def is_error(self) -> bool:
        return self.subtype != "success"


def result_record(
    outcome: RunOutcome,
    summary: RunSummary,
    *,
    session_id: str | None,
    chapter: int | None,
    duration_ms: int,
) -> Record:
    """The `result` object both formats end with; Claude Code's fields first, then ours."""
    record: Record = {
        "type": "result",
        "subtype": outcome.subtype,
        "is_error": outcome.is_error,
        "result": outcome.final_text,
        "session_id": session_id,
        "num_turns": summary.turns,
        "duration_ms": duration_ms,
        "usage": summary.usage_record(),
        "final_text": outcome.final_text,
        "turns": summary.turns,
        "chapter": chapter,
        "tool_calls": summary.tool_calls,
        "tool_errors": summary.tool_errors,
        "compaction": summary.compaction,
    }
    if outcome.error is not None:
        record["error"] = outcome.error
    return record


def init_record(
    *,
    session_id: str,
    chapter: int,
    model: str,
    tools: list[str],
    cwd: str,
    project_root: str | None = None,
    ignored_project_settings: Sequence[str] = (),
    mcp_servers: Sequence[Record] = (),
) -> Record:
    """stream-json's first line: what this run is working with. `cwd` is the tools'
    boundary; `project_root` the folder whose `.agent_tutorial/` the run uses (the same
    or above it); `ignored_project_settings` its powerful settings this run goes without,
    the folder being untrusted (the names the stderr line gives); `mcp_servers` each
    started MCP server's `name` and `status` (`connected` or `failed`), as Claude Code's."""
    return {
        "type": "system",
        "subtype": "init",
        "session_id": session_id,
        "chapter": chapter,
        "model": model,
        "tools": tools,
        "cwd": cwd,
        "project_root": cwd if project_root is None else project_root,
        "ignored_project_settings": list(ignored_project_settings),
        "mcp_servers": list(mcp_servers),
    }


def stream_event(event: Event) -> Record:
    """One stream-json line for an event (without `session_id`, which the sink adds)."""
    if isinstance(event, NestedEvent):
        return {**stream_event(event.event), "depth": event.depth}
    if isinstance(event, TurnStarted):
        return {"type": "turn_started", "turn": event.turn}
    if isinstance(event, TextDelta):
        return {"type": "text_delta", "text": event.text}
    if isinstance(event, MessageAppended):
        return {"type": "message", "message": to_wire(event.message)}
    if isinstance(event, ModelReplied):
        return {
            "type": "model_reply",
            "finish_reason": event.finish_reason,
            "usage": _usage(event.usage),
        }
    if isinstance(event, ToolStarted | ToolFinished):
        return _tool_event(event)
    if isinstance(event, CompactionApplied):
        return {"type": "compaction", **_fields(event)}
    if isinstance(event, PermissionDecided):
        return {"type": "permission", **_fields(event)}
    if isinstance(event, UsageReported):
        return {"type": "usage", "purpose": event.purpose, "usage": _usage(event.usage)}
    return _notice(event)


def _notice(event: Notice) -> Record:
    return {"type": "notice", **_fields(event)}


def _fields(event: CompactionApplied | PermissionDecided | Notice | Usage) -> Record:
    """The event's own fields, as they are: the stream shows events whole, so a field added
    to an event appears here by itself. (The session file lists its fields one by one
    instead: the loader reads it back, so it changes only on purpose.)"""
    return {
        item.name: dict(value) if isinstance(value, Mapping) else value
        for item in fields(event)
        for value in [getattr(event, item.name)]
    }


def _tool_event(event: ToolStarted | ToolFinished) -> Record:
    record: Record = {"id": event.call.id, "name": event.call.name}
    if isinstance(event, ToolStarted):
        return {"type": "tool_started", **record}
    return {
        "type": "tool_finished",
        **record,
        "is_error": event.result.is_error,
        "error_code": event.result.error_code,
        "bytes": len(event.result.content.encode()),
        "redactions": event.result.redactions,
        "sandboxed": event.result.sandboxed,
        **_command_ending(event.result.command),
        "seconds": round(event.seconds, 3),
    }


def _command_ending(command: CommandOutcome | None) -> Record:
    """A command's `exit_code` (128 + N for one killed by signal N; absent when it timed
    out) and `sandbox_denied: true` when the sandbox refused it."""
    if command is None:
        return {}
    ending: Record = {} if command.exit_code is None else {"exit_code": command.exit_code}
    return ending | ({"sandbox_denied": True} if command.sandbox_denied else {})


def _usage(usage: Usage | None) -> Record | None:
    return None if usage is None else _fields(usage)


# orjson escapes C0 controls; DEL and C1 controls (0x9b is CSI to some terminals) are valid
# JSON as they are, and would reach a terminal that shows this output raw.
_RAW_CONTROLS = re.compile(rb"\x7f|\xc2[\x80-\x9f]")


def json_text(record: Record) -> str:
    """The record as one line of JSON with every control character escaped (`\\u001b`,
    `\\u009b`), so it parses to the same values and is inert on a terminal."""
    # default=str: an unusual value in an event's details must not end the run
    try:
        data = orjson.dumps(record, default=str)
    except orjson.JSONEncodeError:  # a lone surrogate: a byte of a name that is not UTF-8
        data = orjson.dumps(plain_json(record))
    return _RAW_CONTROLS.sub(_escaped_control, data).decode()


def _escaped_control(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match[0].decode())


def waiting_record(turn_started: Record, elapsed_s: float) -> Record:
    """`{"type": "system", "subtype": "waiting", "elapsed_s": 10.0, "turn": 3}`: the model
    has been awaited that long since the turn started (`depth` for a subagent's turn)."""
    depth = {"depth": turn_started["depth"]} if "depth" in turn_started else {}
    return {
        "type": "system",
        "subtype": "waiting",
        "elapsed_s": round(elapsed_s, 1),
        "turn": turn_started["turn"],
        **depth,
    }


class StreamJsonSink:
    """`--output-format stream-json`: one JSON object per line on `file`.

    Events that arrive before `start()` (warnings while the agent is built) are held back,
    so the `system/init` line is always first; each line is flushed as it is written.
    From a `turn_started` line to the next event, a thread of its own writes a
    `system/waiting` line every `waiting_interval_s` (`clock` measures the wait); lines are
    written whole under one lock, and none of those follows the event that ended the wait.
    """

    def __init__(
        self,
        file: IO[str],
        *,
        waiting_interval_s: float = WAITING_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.file = file
        self.session_id: str | None = None
        self.waiting_interval_s = waiting_interval_s
        self._clock = clock
        self._held: list[Record] = []
        self._lock = threading.Lock()
        self._wait: _Wait | None = None

    def start(self, init: Record) -> None:
        self.session_id = init["session_id"]
        self._write(init)
        held, self._held = self._held, []
        for record in held:
            self._write(record)

    def emit(self, event: Event) -> None:
        self._stop_waiting()
        record = stream_event(event)
        if self.session_id is None:
            self._held.append(record)
            return
        self._write(record)
        if record["type"] == "turn_started":
            self._wait = _Wait(
                record, self.waiting_interval_s, clock=self._clock, write=self._write
            )

    def finish(self, result: Record) -> None:
        """The closing `result` line (written even if `start` never ran: a run that failed
        before it had a session still ends with one result)."""
        self._stop_waiting()
        for record in self._held:
            self._write(record)
        self._held = []
        self._write(result)

    def _stop_waiting(self) -> None:
        if self._wait is not None:
            self._wait.stop()
            self._wait = None

    def _write(self, record: Record, *, unless: threading.Event | None = None) -> None:
        line = {**record, "session_id": record.get("session_id", self.session_id)}
        with self._lock:
            if unless is not None and unless.is_set():
                return
            self.file.write(json_text(line) + "\n")
            self.file.flush()


class _Wait:
    """One wait for the model: a thread that writes `system/waiting` lines until stopped."""

    def __init__(
        self,
        turn_started: Record,
        interval_s: float,
        *,
        clock: Callable[[], float],
        write: Callable[..., None],
    ) -> None:
        self._turn_started = turn_started
        self._interval_s = interval_s
        self._clock = clock
        self._write = write
        self._started = clock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="stream-json-waiting", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _tick(self) -> None:
        while not self._stopped.wait(self._interval_s):
            elapsed = self._clock() - self._started
            try:
                # Checked again under the sink's lock: an event that ended the wait
                # meanwhile must not be followed by a waiting line.
                self._write(waiting_record(self._turn_started, elapsed), unless=self._stopped)
            except (OSError, ValueError):  # stdout closed: the run's own next line says so
                return


class RunReport:
    """What a one-shot run prints besides the answer: with json or stream-json, exactly one
    result object whether the run succeeded or not, and stream-json's event lines."""

    def __init__(self, output_format: str, *, file: IO[str], started: float) -> None:
        self.output_format = output_format
        self.file = file
        self.started = started
        self.summary = RunSummary()
        self.stream = StreamJsonSink(file) if output_format == "stream-json" else None
        self._init: Record | None = None
        self._saved_session_id: Callable[[], str | None] = lambda: None

    def sinks(self, renderer: EventSink, *, waiting_interval_s: float) -> list[EventSink]:
        """The summary, and the terminal renderer; under stream-json the event lines
        instead (a `system/waiting` line every `waiting_interval_s` while the model is
        awaited), with warnings still shown on stderr by the renderer."""
        if self.stream is None:
            return [self.summary, renderer]
        self.stream.waiting_interval_s = waiting_interval_s
        return [self.summary, self.stream, NoticesOnly(renderer)]

    def start(self, init: Record, saved_session_id: Callable[[], str | None]) -> None:
        """The session exists: stream-json opens with its `system/init` line.
        `saved_session_id` is asked when the result is written, after the session closed."""
        self._init = init
        self._saved_session_id = saved_session_id
        if self.stream is not None:
            self.stream.start(init)

    def finish(self, outcome: RunOutcome, *, chapter: int | None) -> None:
        """The result object, on one line; `chapter` is the one asked for, used when the
        run failed before its session started (None when the command line was refused)."""
        if self.output_format == "text":
            return
        init = self._init or {"chapter": chapter}
        record = result_record(
            outcome,
            self.summary,
            session_id=self._saved_session_id(),
            chapter=init["chapter"],
            duration_ms=round((time.monotonic() - self.started) * 1000),
        )
        if self.stream is not None:
            self.stream.finish(record)
        else:
            self.file.write(json_text(record) + "\n")
            self.file.flush()


@dataclass(frozen=True)
class NoticesOnly:
    """Passes only notices (warnings, notes) on, for the stderr of a stream-json run."""

    sink: EventSink

    def emit(self, event: Event) -> None:
        if isinstance(event, Notice):
            self.sink.emit(event)
