"""Chapter 8 against a server with a small context window, through the real CLI: requests
keep within the window, and in cache-aware mode earlier request prefixes rarely change."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRun, RunCli
from tests.loopback import LoopbackServer, Reply, error_reply, text_stream, tool_stream

SUMMARY = {
    "current_goal": "Read the files.",
    "key_findings": ["files hold numbered lines"],
    "files_read_or_changed": ["f0.txt"],
    "remaining_work": ["read the rest"],
    "user_constraints": [],
}


def vllm_overflow(window_tokens: int) -> dict[str, Any]:
    return {"error": {"message": f"This model's maximum context length is {window_tokens} tokens."}}


class WindowedModel:
    """A scripted model behind a window: a request whose JSON body is over `window_tokens`
    (at 4 bytes a token) gets the overflow reply vLLM sends (or `refusal`'s); a summary
    request (no tools) gets a summary; any other request the next scripted step."""

    def __init__(
        self,
        window_tokens: int,
        reads: int,
        refusal: Callable[[int], dict[str, Any]] = vllm_overflow,
    ) -> None:
        self.window_tokens = window_tokens
        self.refusal = refusal
        self.steps = [
            tool_stream([(f"call_{n}", "read_file", {"path": f"f{n}.txt"})]) for n in range(reads)
        ]
        self.steps.append(text_stream("All files read."))
        self.overflows = 0
        self.overflow_at: list[int] = []
        """How many agent requests had been answered at each overflow."""
        self.agent_requests: list[list[dict[str, Any]]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        tokens = len(json.dumps(body)) // 4
        if tokens > self.window_tokens:
            self.overflows += 1
            self.overflow_at.append(len(self.agent_requests))
            return error_reply(400, self.refusal(self.window_tokens))
        if "tools" not in body:
            return text_stream(json.dumps(SUMMARY), usage=(tokens, 50))
        self.agent_requests.append(body["messages"])
        reply = self.steps.pop(0)
        assert reply.sse_events is not None
        reply.sse_events[-1]["usage"]["prompt_tokens"] = tokens
        return reply


def write_files(workspace: Path, count: int, lines: int) -> None:
    for n in range(count):
        text = "".join(f"file {n} line {i}: some text to read\n" for i in range(lines))
        (workspace / f"f{n}.txt").write_text(text)


def serve(loopback: LoopbackServer, model: WindowedModel, requests: int) -> None:
    loopback.queue(*([model] * requests))


REQUEST_ONLY_STARTS = ("<system-reminder>", "Reminder:", "[The conversation so far")


def canonical_part(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request without its request-only messages at the end (reminders, the continue
    turn), which are rebuilt for every request and never part of the cached prefix."""
    end = len(messages)
    while end > 1 and str(messages[end - 1].get("content") or "").startswith(REQUEST_ONLY_STARTS):
        end -= 1
    return messages[:end]


def prefix_changes(requests: list[list[dict[str, Any]]]) -> int:
    """How often a request does not extend the canonical part of the one before it."""
    changes = 0
    for before, after in itertools.pairwise(requests):
        kept = canonical_part(before)
        if after[: len(kept)] != kept:
            changes += 1
    return changes


def test_a_14_turn_reading_session_fits_a_small_window(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_files(workspace, 13, 60)
    model = WindowedModel(window_tokens=6_000, reads=13)
    serve(loopback, model, 80)

    result: CliRun = run_cli(
        "run", "-c", "8", "-y", "--context-window", "6000", "-p", "Read f0.txt to f12.txt"
    )

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "All files read."
    assert len(model.agent_requests) == 14
    assert model.overflows <= 1


def test_cache_aware_changes_an_earlier_prefix_at_most_3_times_in_24_turns(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_files(workspace, 23, 60)
    model = WindowedModel(window_tokens=16_000, reads=23)
    serve(loopback, model, 80)

    result: CliRun = run_cli(
        "run",
        "-c",
        "8",
        "-y",
        "--context-window",
        "16000",
        "--compaction",
        "cache-aware",
        "-p",
        "Read f0.txt to f22.txt",
    )

    assert result.exit_code == 0, result.stderr
    assert len(model.agent_requests) == 24
    assert model.overflows == 0
    changes = prefix_changes(model.agent_requests)
    assert 1 <= changes <= 3  # the layers did cut (the window is too small for all 24)


def test_the_seed_in_the_same_session_changes_its_prefix_far_more_often(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_files(workspace, 23, 60)
    model = WindowedModel(window_tokens=16_000, reads=23)
    serve(loopback, model, 80)

    result: CliRun = run_cli("run", "-c", "8", "-y", "--context-window", "16000", "-p", "Read them")

    assert result.exit_code == 0, result.stderr
    assert prefix_changes(model.agent_requests) > 10


def test_a_prompt_that_cannot_fit_the_window_stops_the_run_before_any_request(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    prompt = "Explain this log:\n" + "line of log output\n" * 2_000

    result: CliRun = run_cli("run", "-c", "8", "--context-window", "6000", "-p", prompt)

    assert result.exit_code == 1
    assert "latest message alone" in result.stderr
    assert "does not fit the model's context window" in result.stderr
    assert loopback.requests == []


# Overflow replies that state the window, as each server words it (issue 16).
STATING_THE_WINDOW: dict[str, Callable[[int], dict[str, Any]]] = {
    "vllm": vllm_overflow,
    "llama.cpp": lambda window: {
        "error": {
            "code": 400,
            "message": f"request ({window + 500} tokens) exceeds the available context size "
            f"({window} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": window + 500,
            "n_ctx": window,
        }
    },
    "llama-cpp-python": lambda window: {
        "error": {"message": f"Requested tokens ({window + 500}) exceed context window of {window}"}
    },
}


@pytest.mark.parametrize("server", STATING_THE_WINDOW)
def test_without_a_window_set_the_one_an_overflow_states_is_kept_to_from_then_on(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, server: str
) -> None:
    """No --context-window and a server that does not say its window until it refuses: the
    first overflow teaches it, the one retry fits, and no later request is refused."""
    write_files(workspace, 13, 120)
    model = WindowedModel(window_tokens=6_000, reads=13, refusal=STATING_THE_WINDOW[server])
    serve(loopback, model, 80)

    result: CliRun = run_cli("run", "-c", "8", "-y", "-p", "Read f0.txt to f12.txt")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "All files read."
    assert len(model.agent_requests) == 14
    assert model.overflows == 1
    assert "the server states a context window of 6,000 tokens" in result.stderr


@pytest.mark.parametrize("chapter", ["2", "7"])
def test_before_chapter_8_a_stated_window_changes_nothing_and_the_overflow_ends_the_run(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, chapter: str
) -> None:
    """No compaction, so nothing can be made to fit: the first overflow ends the run with
    its clear error, and no request follows it."""
    write_files(workspace, 13, 120)
    model = WindowedModel(window_tokens=6_000, reads=13, refusal=STATING_THE_WINDOW["llama.cpp"])
    serve(loopback, model, 80)

    result: CliRun = run_cli("run", "-c", chapter, "-y", "-p", "Read f0.txt to f12.txt")

    assert result.exit_code == 1
    assert model.overflows == 1
    assert len(loopback.requests) == len(model.agent_requests) + 1  # the refused one last
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "does not fit the model's context window" in line
    assert "states a context window" not in result.stderr
    assert "Traceback" not in result.stderr
