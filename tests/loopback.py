"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

Tests queue replies (SSE streams, JSON bodies, error bodies, cut streams) and read back the
JSON bodies of the requests the real openai SDK sent. Nothing here reaches the network.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.loopback_quirks import (
    TOOLS_IGNORED_ANSWER,
    Quirks,
    chunk,
    ignores_tools,
    output_cap,
    refusal,
    rewrite_events,
    whole_completion,
)


@dataclass
class Reply:
    """One scripted HTTP reply: status, headers and either a JSON body, SSE events, or a
    raw event stream's bytes as a generator makes them (`tests.loopback_quirks`' runaway
    servers), sent until the client hangs up.

    `cut_after` ends an SSE stream after that many events without `[DONE]`; `hold` keeps
    the reply (headers too) back until the event is set, as a server still computing does;
    `hang_up` closes the connection without a reply, as a server that crashed does.
    """

    status: int = 200
    json_body: Any = None
    sse_events: Sequence[dict[str, Any]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    raw_body: bytes | None = None
    raw_stream: Callable[[], Iterator[bytes]] | None = None
    hold: threading.Event | None = None
    hang_up: bool = False


Responder = Reply | Callable[[dict[str, Any]], Reply]

_REMINDER = re.compile(r"<system-reminder>\n(.*)\n</system-reminder>", re.DOTALL)
_PROJECT_CONTEXT = re.compile(r"<project_context>\n(.*)\n</project_context>", re.DOTALL)


def reminder_text(message: dict[str, Any]) -> str | None:
    """The note inside a `<system-reminder>` user turn, or None for any other message."""
    return _user_text_inside(_REMINDER, message)


def project_context_text(message: dict[str, Any]) -> str | None:
    """The project context (where the project is, AGENTS.md, the skills) inside its
    `<project_context>` user turn, or None for any other message."""
    return _user_text_inside(_PROJECT_CONTEXT, message)


def _user_text_inside(marks: re.Pattern[str], message: dict[str, Any]) -> str | None:
    if message.get("role") != "user" or not isinstance(message.get("content"), str):
        return None
    match = marks.fullmatch(message["content"])
    return match.group(1) if match else None


def system_notes(body: dict[str, Any]) -> list[str]:
    """What a request says as the agent rather than the user: its leading system message,
    the project context, then each reminder."""
    messages = body["messages"]
    notes = [str(messages[0]["content"])] if messages and messages[0]["role"] == "system" else []
    notes += [text for text in map(project_context_text, messages) if text is not None]
    return notes + [text for text in map(reminder_text, messages) if text is not None]


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's messages without its system message, project context and reminders."""
    return [
        message
        for message in body["messages"]
        if message["role"] != "system"
        and reminder_text(message) is None
        and project_context_text(message) is None
    ]


def exchanged(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's messages after its system prompt and project context: the conversation,
    reminders and all."""
    return [
        message
        for message in body["messages"]
        if message["role"] != "system" and project_context_text(message) is None
    ]


def prompt_text(body: dict[str, Any]) -> str:
    """The system prompt and the project context of a request, as the model reads them."""
    messages = body["messages"]
    system = [str(m["content"]) for m in messages if m["role"] == "system"]
    return "\n\n".join(system + [t for t in map(project_context_text, messages) if t is not None])


def _usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "loopback-model",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def text_stream(
    text: str, *, pieces: int = 3, finish_reason: str = "stop", usage: tuple[int, int] = (10, 5)
) -> Reply:
    """A streamed text answer split into `pieces` content deltas."""
    size = max(1, -(-len(text) // pieces))
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]
    events.append(chunk({}, finish_reason))
    events.append(_usage_chunk(*usage))
    return Reply(sse_events=events)


def tool_stream(
    calls: Iterable[tuple[str, str, dict[str, Any] | str]],
    *,
    content: str | None = None,
    split: int = 3,
    usage: tuple[int, int] = (10, 5),
) -> Reply:
    """A streamed assistant message whose tool calls' arguments arrive in `split` chunks."""
    events = [chunk({"role": "assistant", "content": content})]
    for index, (call_id, name, arguments) in enumerate(calls):
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        size = max(1, -(-len(text) // split))
        parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
        first = {"index": index, "id": call_id, "type": "function"}
        events.append(
            chunk({"tool_calls": [{**first, "function": {"name": name, "arguments": parts[0]}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            for part in parts[1:]
        ]
    events.append(chunk({}, "tool_calls"))
    events.append(_usage_chunk(*usage))
    return Reply(sse_events=events)


def error_reply(status: int, body: Any, headers: dict[str, str] | None = None) -> Reply:
    """An error body; retryable statuses carry `retry-after-ms: 1` so SDK retries are fast."""
    return Reply(status=status, json_body=body, headers={"retry-after-ms": "1", **(headers or {})})


def empty_stream() -> Reply:
    """`200 text/event-stream` closed without a single event (not even `[DONE]`)."""
    return Reply(sse_events=[], cut_after=0)


def cut_stream(text: str = "partial") -> Reply:
    """A stream that stops mid-answer: no finish reason, no `[DONE]`."""
    return Reply(
        sse_events=[chunk({"role": "assistant", "content": ""}), chunk({"content": text})],
        cut_after=2,
    )


class _QuietServer(ThreadingHTTPServer):
    """Reports a handler's errors except a client that hung up mid-reply or refused the
    server's certificate: tests end clients on purpose (a signal while the model answers,
    a certificate the client must not trust), and a traceback there is noise."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], BrokenPipeError | ConnectionResetError | ssl.SSLError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class LoopbackServer:
    """Serves queued replies in order; records every request body in `.requests`.

    `quirks` switches on behaviours of real servers (see `tests.loopback_quirks`); a
    request a quirk refuses does not use up a queued reply and is counted in `.refused`.
    A request with `stream: false` gets a queued stream as one JSON completion.
    """

    def __init__(self, quirks: Quirks | None = None) -> None:
        self.quirks = quirks or Quirks()
        self.refused: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._replies: list[Responder] = []
        self.get_replies: dict[str, Reply] = {}
        """Fixed replies to GET requests by path (`/v1/models`, `/props`); others are 404."""
        self.get_paths: list[str] = []
        self.get_headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        scheme = "https" if isinstance(self._server.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://{host!s}:{port}/v1"

    def use_tls(self, context: ssl.SSLContext) -> None:
        """Serve HTTPS with `context` (its certificate and key loaded); before `start`."""
        self._server.socket = context.wrap_socket(
            self._server.socket, server_side=True, do_handshake_on_connect=False
        )  # each connection shakes hands in its own thread, never in the accepting one

    def queue(self, *replies: Responder) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_reply(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            refused = refusal(self.quirks, body)
            if refused is not None:
                self.refused.append(body)
                return error_reply(*refused)
            if not self._replies:
                return error_reply(500, {"error": {"message": "loopback: no reply queued"}})
            responder = self._replies.pop(0)
        reply = responder(body) if callable(responder) else responder
        return self._as_served(reply, body, responder)

    def _as_served(self, reply: Reply, body: dict[str, Any], responder: Responder) -> Reply:
        """The scripted reply as this server's quirks and the request's `stream` shape it."""
        if reply.raw_stream is not None:
            return reply
        streamed = body.get("stream") is True
        if reply.status >= 400 and streamed and self.quirks.empty_stream_on_error:
            with self._lock:
                self._replies.insert(0, responder)  # what a request without streaming gets
            return empty_stream()
        if reply.sse_events is None:
            return reply
        if ignores_tools(self.quirks, body):
            reply = text_stream(TOOLS_IGNORED_ANSWER)
        events = list(reply.sse_events or ())
        if not streamed:
            completion = whole_completion(self.quirks, events, output_cap(body))
            return Reply(json_body=completion, headers=reply.headers, hold=reply.hold)
        events = rewrite_events(self.quirks, events, output_cap(body))
        return replace(reply, sse_events=events)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server._next_reply(body, {k.lower(): v for k, v in self.headers.items()})
                if reply.hold is not None:
                    reply.hold.wait()
                if reply.hang_up:
                    self.close_connection = True
                elif reply.raw_stream is not None:
                    self._send_raw_stream(reply.raw_stream)
                elif reply.sse_events is not None:
                    self._send_sse(reply)
                else:
                    self._send_json(reply)

            def do_GET(self) -> None:
                with server._lock:
                    server.get_paths.append(self.path)
                    server.get_headers.append({k.lower(): v for k, v in self.headers.items()})
                    reply = server.get_replies.get(self.path)
                if reply is not None and reply.raw_stream is not None:
                    self._send_raw_stream(reply.raw_stream)
                    return
                self._send_json(reply or Reply(status=404, json_body={"error": "not found"}))

            def _send_json(self, reply: Reply) -> None:
                data = (
                    reply.raw_body
                    if reply.raw_body is not None
                    else json.dumps(reply.json_body).encode()
                )
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _send_raw_stream(self, stream: Callable[[], Iterator[bytes]]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for data in stream():
                        self.wfile.write(data)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client stopped reading: what a runaway stream is for

            def _send_sse(self, reply: Reply) -> None:
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                events = list(reply.sse_events or ())
                if reply.cut_after is not None:
                    events = events[: reply.cut_after]
                for event in events:
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                if reply.cut_after is None:
                    self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        return Handler


def delta_stream(
    deltas: Iterable[dict[str, Any]],
    *,
    finish_reason: str | None = "stop",
    usage: tuple[int, int] | None = None,
) -> Reply:
    """A stream of hand-written deltas, for servers whose chunks differ from OpenAI's
    (no `index`, repeated ids or names). `finish_reason=None` sends no finish chunk."""
    events = [chunk(delta) for delta in deltas]
    if finish_reason is not None:
        events.append(chunk({}, finish_reason))
    if usage is not None:
        events.append(_usage_chunk(*usage))
    return Reply(sse_events=events)


def refused_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
