"""`make lesson N=3`: run lesson 3 offline, in a fresh temporary folder holding a small sample
project, against a scripted OpenAI-compatible server on 127.0.0.1 (no key, no network).

The server speaks the chat-completions wire format (`POST /v1/chat/completions`, not streamed,
as the lessons ask; `GET /v1/models`), but what it answers is a fixed script per chapter
(`lesson_scripts.py`), not a model, and every final answer says so. Usage:

    python chapters/offline/lesson_server.py 3 [--prompt TEXT] [--keep] [lesson options]

Options it does not know (`--trace`, `-y`, `--permission-mode …`) go to the lesson.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from lesson_scripts import PROMPTS, SCRIPTS, Reply, Script, seed

CHAPTERS = Path(__file__).resolve().parents[1]
MODEL = "scripted-lesson"
ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "AGENT_TUTORIAL_MODEL")
MAX_BODY_BYTES = 64 * 1024 * 1024


def api_error(message: str) -> dict[str, Any]:
    """An error body in OpenAI's shape."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None}}


def completion(reply: Reply, number: int, request: dict[str, Any]) -> dict[str, Any]:
    """`reply` as an OpenAI `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{number}_{index}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for index, (name, arguments) in enumerate(reply.calls)
        ]
    # Rough counts (four bytes a token): a script has no tokenizer.
    prompt_tokens, completion_tokens = len(json.dumps(request)) // 4, len(json.dumps(message)) // 4
    choice = {"index": 0, "message": message, "logprobs": None}
    choice["finish_reason"] = "tool_calls" if reply.calls else "stop"
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return {
        "id": f"chatcmpl-lesson-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL,
        "choices": [choice],
        "usage": usage | {"total_tokens": prompt_tokens + completion_tokens},
    }


class LessonServer:
    """Serves one chapter's script on 127.0.0.1 while the `with` block runs."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.answered = 0
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> LessonServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._http.shutdown()
        self._http.server_close()

    def answer(self, body: object) -> tuple[int, dict[str, Any]]:
        """Status and JSON body for one chat-completions request."""
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return 400, api_error("the body must be a JSON object with a messages list")
        if body.get("stream"):
            return 400, api_error("this scripted server does not stream; send stream: false")
        with self._lock:  # one step at a time, in the order the requests arrive
            self.answered += 1
            return 200, completion(self.script.reply(body), self.answered, body)


def _handler_for(server: LessonServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            return  # the lesson's own output is what the reader watches

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if not self.path.endswith("/chat/completions"):
                self._send(404, api_error(f"no such endpoint: POST {self.path}"))
            elif length > MAX_BODY_BYTES:
                self._send(413, api_error(f"the body is over {MAX_BODY_BYTES} bytes"))
            else:
                try:
                    body = json.loads(self.rfile.read(length))
                except (json.JSONDecodeError, UnicodeDecodeError):
                    self._send(400, api_error("the body is not JSON"))
                    return
                self._send(*server.answer(body))

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "a script"}
                self._send(200, {"object": "list", "data": [model]})
            else:
                self._send(404, api_error(f"no such endpoint: GET {self.path}"))

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def lesson_environment(base_url: str) -> dict[str, str]:
    """Ours, with the scripted server as the only endpoint: no key of yours goes to it."""
    environment = {k: v for k, v in os.environ.items() if k not in ENDPOINT_VARIABLES}
    return environment | {"OPENAI_BASE_URL": base_url, "AGENT_TUTORIAL_MODEL": MODEL}


def run_lesson(chapter: int, prompt: str, lesson_options: Sequence[str], keep: bool) -> int:
    """Lesson `chapter` in a fresh sample project against its script; the lesson's exit code."""
    workspace = Path(tempfile.mkdtemp(prefix=f"lesson{chapter:02d}-"))
    try:
        seed(chapter, workspace)
        with LessonServer(SCRIPTS[chapter]()) as server:
            print(
                f"lesson {chapter} in {workspace}, against {server.base_url}: "
                "a scripted server, not a model",
                file=sys.stderr,
            )
            lesson = [sys.executable, str(CHAPTERS / f"ch{chapter:02d}.py"), "--prompt", prompt]
            done = subprocess.run(
                [*lesson, *lesson_options],
                cwd=workspace,
                env=lesson_environment(server.base_url),
                check=False,
            )
            return done.returncode
    except KeyboardInterrupt:  # the lesson, in the same process group, says it was interrupted
        return 130
    finally:
        print(_workspace_fate(chapter, workspace, keep), file=sys.stderr)
        if not keep:
            shutil.rmtree(workspace, ignore_errors=True)


def _workspace_fate(chapter: int, workspace: Path, keep: bool) -> str:
    """The last line: the paths the lesson printed are inside `workspace`, so say whether
    it is still there to look at, and how to keep it next time."""
    if keep:
        return f"the workspace is kept: {workspace} (the paths above are inside it)"
    return (
        f"the workspace {workspace} is deleted; `make lesson N={chapter} ARGS=--keep` "
        "keeps it, with the files the paths above name"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("chapter", type=int, choices=sorted(SCRIPTS))
    parser.add_argument("--prompt", help="the prompt (the script answers the same way)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    options, lesson_options = parser.parse_known_args(argv)
    prompt = options.prompt or PROMPTS[options.chapter]
    return run_lesson(options.chapter, prompt, lesson_options, options.keep)


if __name__ == "__main__":
    sys.exit(main())
