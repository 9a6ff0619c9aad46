"""Chapter 8 in the small windows local servers run with (issue 28), through the real CLI
against a loopback server that refuses, as llama.cpp does, any request over its `n_ctx`.

The server counts a request's tokens as its JSON body's bytes ÷ 4 (`server_tokens`): real
tokenizers give 3–4 bytes a token for English and JSON, so this is a server whose count
the agent must learn rather than one that happens to agree with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRun, RunCli
from tests.loopback import LoopbackServer, Reply, error_reply, text_stream, tool_stream

SUMMARY = {
    "current_goal": "Read the five files.",
    "key_findings": ["each file holds numbered lines"],
    "files_read_or_changed": ["f0.txt"],
    "remaining_work": ["read the rest"],
    "user_constraints": [],
}

FILES = 5
FILE_BYTES = 10_000
NOTE = "I read the next file, as the task asks, to see what it holds. " * 48
"""What the model writes beside each call (2,976 B; small models think aloud): compaction
cannot clear it as it clears old results, so a 4,096-token window needs the summary."""


def server_tokens(body: dict[str, Any]) -> int:
    """The loopback server's count of a request's prompt: its JSON body's bytes ÷ 4."""
    return len(json.dumps(body)) // 4


def llama_cpp_overflow(prompt_tokens: int, window: int) -> dict[str, Any]:
    """llama.cpp's refusal (server.cpp, `exceed_context_size_error`), both numbers stated."""
    return {
        "error": {
            "code": 400,
            "message": f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({window} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt_tokens,
            "n_ctx": window,
        }
    }


class LlamaCppWindow:
    """A scripted model behind llama.cpp's `-c WINDOW`: a request whose prompt is over the
    window is refused with llama.cpp's body; a summary request (no tools) gets a summary;
    any other request the next scripted step (five reads, each with a note, then the
    answer)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.steps = [
            tool_stream([(f"call_{n}", "read_file", {"path": f"f{n}.txt"})], content=NOTE)
            for n in range(FILES)
        ]
        self.steps.append(text_stream("All five files read."))
        self.refused: list[dict[str, Any]] = []
        self.answered: list[dict[str, Any]] = []
        self.summary_requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        tokens = server_tokens(body)
        if tokens > self.window:
            self.refused.append(body)
            return error_reply(400, llama_cpp_overflow(tokens, self.window))
        self.answered.append(body)
        if "tools" not in body:
            self.summary_requests.append(body)
            return text_stream(json.dumps(SUMMARY), usage=(tokens, 50))
        reply = self.steps.pop(0)
        assert reply.sse_events is not None
        reply.sse_events[-1]["usage"]["prompt_tokens"] = tokens
        return reply

    def requests_after_first_refusal(self, all_requests: list[dict[str, Any]]) -> list[Any]:
        """The requests sent once the window was known from the refusal (none without one)."""
        if not self.refused:
            return []
        first = next(i for i, body in enumerate(all_requests) if body is self.refused[0])
        return all_requests[first + 1 :]


def write_files(workspace: Path) -> None:
    for n in range(FILES):
        line = f"file {n}: a line of text the task reads\n"
        (workspace / f"f{n}.txt").write_text((line * (FILE_BYTES // len(line) + 1))[:FILE_BYTES])


def run_five_reads(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, window: int, *flags: str
) -> tuple[CliRun, LlamaCppWindow]:
    write_files(workspace)
    model = LlamaCppWindow(window)
    loopback.queue(*([model] * 60))
    result = run_cli("run", "-c", "8", "-y", *flags, "-p", "Read f0.txt to f4.txt")
    return result, model


@pytest.mark.parametrize("window", [4_096, 7_368, 8_192, 16_384])
def test_five_10_kb_reads_complete_in_a_window_learned_from_llama_cpp(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, window: int
) -> None:
    result, model = run_five_reads(run_cli, loopback, workspace, window)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "All five files read."
    assert len(model.refused) == (1 if window < 16_384 else 0)  # the window learned once
    for body in model.requests_after_first_refusal(loopback.requests):
        assert server_tokens(body) + body["max_tokens"] <= window  # prompt and reply fit
    assert all("tools" in body for body in model.refused)  # no summary request refused
    assert model.summary_requests or window != 4_096  # there the summary is needed


@pytest.mark.parametrize("window", [4_096, 7_368, 8_192, 16_384])
def test_with_the_window_given_five_10_kb_reads_are_never_refused(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, window: int
) -> None:
    result, model = run_five_reads(
        run_cli, loopback, workspace, window, "--context-window", str(window)
    )

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "All five files read."
    assert model.refused == []
    assert all(server_tokens(body) + body["max_tokens"] <= window for body in loopback.requests)
    assert model.summary_requests or window != 4_096


# Overflow replies as each server words them, from the refused request's count and the
# window; DashScope states the window only, in a form no count can be read from.
OVERFLOW_BODIES: dict[str, Callable[[int, int], dict[str, Any]]] = {
    "openai": lambda tokens, window: {
        "error": {
            "message": f"This model's maximum context length is {window} tokens. However, your "
            f"messages resulted in {tokens} tokens. Please reduce the length of the messages.",
            "code": "context_length_exceeded",
        }
    },
    "vllm": lambda tokens, window: {
        "message": f"This model's maximum context length is {window} tokens. However, you "
        f"requested {tokens + 100} tokens ({tokens} in the messages, 100 in the completion).",
        "type": "BadRequestError",
        "code": 400,
    },
    "anthropic-style": lambda tokens, window: {
        "error": {"message": f"prompt is too long: {tokens} tokens > {window} maximum"}
    },
    "dashscope": lambda tokens, window: {
        "error": {
            "message": f"<400> InternalError.Algo.InvalidParameter: Range of input length "
            f"should be [1, {window}]",
            "code": "InvalidParameter",
        }
    },
    "llama.cpp": llama_cpp_overflow,
}
STATING_NO_COUNT = {"dashscope"}  # the retry is then at most half the refused request


class WordedWindow(LlamaCppWindow):
    """`LlamaCppWindow`, refusing in another server's words."""

    def __init__(self, window: int, words: Callable[[int, int], dict[str, Any]]) -> None:
        super().__init__(window)
        self.words = words

    def __call__(self, body: dict[str, Any]) -> Reply:
        tokens = server_tokens(body)
        if tokens > self.window:
            self.refused.append(body)
            return error_reply(400, self.words(tokens, self.window))
        return super().__call__(body)


def sent_bytes(body: dict[str, Any]) -> int:
    """Bytes of the messages and tool schemas a request sent."""
    return len(json.dumps(body["messages"])) + len(json.dumps(body.get("tools", [])))


@pytest.mark.parametrize("server", OVERFLOW_BODIES)
def test_each_retry_is_smaller_than_the_request_refused(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, server: str
) -> None:
    write_files(workspace)
    model = WordedWindow(8_192, OVERFLOW_BODIES[server])
    loopback.queue(*([model] * 60))

    result = run_cli("run", "-c", "8", "-y", "-p", "Read f0.txt to f4.txt")

    assert model.refused, "the window never refused: the test proves nothing"
    requests = loopback.requests
    for refused in model.refused:
        at = next(i for i, body in enumerate(requests) if body is refused)
        retry = next((body for body in requests[at + 1 :] if "tools" in body), None)
        if retry is not None:
            assert sent_bytes(retry) < sent_bytes(refused)
            assert server not in STATING_NO_COUNT or sent_bytes(retry) * 2 <= sent_bytes(refused)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "All five files read."


def fixed_part_bytes(body: dict[str, Any]) -> int:
    """The system prompt, project context and tool schemas of a request, as compact JSON
    (the way the agent counts them); the reminders' 2,000 B allowance comes on top."""
    system, project_context = body["messages"][:2]
    parts = [system, project_context, body["tools"]]
    return sum(len(json.dumps(part, separators=(",", ":"), ensure_ascii=False)) for part in parts)


@pytest.mark.parametrize(("window", "compact"), [(16_384, True), (16_385, False)])
def test_chapter_8_sends_a_fixed_part_of_at_most_6000_bytes_in_a_window_of_16k_or_less(
    run_cli: RunCli, loopback: LoopbackServer, window: int, compact: bool
) -> None:
    loopback.queue(text_stream("hello"))

    result = run_cli("run", "-c", "8", "--context-window", str(window), "-p", "hi")

    assert result.exit_code == 0, result.stderr
    (body,) = loopback.requests
    assert (fixed_part_bytes(body) + 2_000 <= 6_000) is compact
    assert [tool["function"]["name"] for tool in body["tools"]] == [
        "bash", "read_file", "write_file", "edit_file", "glob", "grep", "todo_write", "task",
        "load_skill",
    ]  # fmt: skip
