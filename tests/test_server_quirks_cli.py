"""`agent-tutorial run` against the loopback server with real servers' quirks switched on:
what issue 9 saw fail with llama-cpp-python now works end to end, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_tutorial.features.compaction import SUMMARY_SYSTEM_PROMPT
from tests.conftest import CliRun, RunCli, write_state
from tests.contracts import SUMMARY, assert_every_request_fits_strict_servers, wire_summary
from tests.loopback import LoopbackServer, error_reply, text_stream, tool_stream
from tests.loopback_quirks import LLAMA_CPP_PYTHON, Quirks
from tests.test_error_classification import OVERFLOW_REPLIES


def llama_cpp_python_reading_notes(loopback: LoopbackServer, workspace: Path) -> None:
    """The llama-cpp-python quirks on, and a first reply that reads notes.md."""
    loopback.quirks = LLAMA_CPP_PYTHON
    (workspace / "notes.md").write_text("TODO: ship it\n")
    loopback.queue(tool_stream([("call_1", "read_file", {"path": "notes.md"})]))


def test_a_chapter_2_tool_round_trip_works_with_the_llama_cpp_python_quirks(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    llama_cpp_python_reading_notes(loopback, workspace)
    loopback.queue(text_stream("One TODO: ship it."))

    result: CliRun = run_cli("run", "--chapter", "2", "--prompt", "What is left?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "One TODO: ship it."
    assert len(loopback.requests) == 2
    tool_reply = loopback.requests[1]["messages"][-1]
    assert tool_reply["role"] == "tool" and "TODO: ship it" in tool_reply["content"]
    assert_every_request_fits_strict_servers(loopback)


def overflow_stating_no_window() -> tuple[int, dict[str, Any]]:
    """llama-cpp-python's overflow reply without the sentence that states its window. With a
    window stated, the agent keeps to it (issue 16), and a request as small as this one is
    then known not to be made to fit by compacting (test_chapter8_cli pins that); here the
    point is the empty stream and the fenced summary."""
    status, body = OVERFLOW_REPLIES["llama-cpp-python"]
    error = dict(body["error"])
    error["message"] = "Please reduce the length of the messages or completion."
    return status, {"error": error}


def test_a_chapter_8_overflow_sent_as_an_empty_stream_is_compacted_and_the_run_finishes(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "plan.md").write_text("read notes.md next\n")
    # 40 KB of the model's notes first: the retry after an overflow stating no count holds
    # at most half the refused request, and only a summary removes them.
    notes = "notes on what to read next. " * 1_500
    loopback.queue(tool_stream([("call_0", "read_file", {"path": "plan.md"})], content=notes))
    llama_cpp_python_reading_notes(loopback, workspace)
    loopback.queue(
        error_reply(*overflow_stating_no_window()),  # sent as an empty stream
        text_stream(f"```json\n{json.dumps(SUMMARY, indent=2)}\n```"),  # a small model's fence
        text_stream("done after compacting"),
    )

    result = run_cli("run", "--chapter", "8", "-y", "--prompt", "What is left?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "done after compacting"
    assert "reactive: prompt too long" in result.stderr
    streamed = [body["stream"] for body in loopback.requests]
    assert streamed == [True, True, True, False, True, True]
    summary_request = loopback.requests[4]
    assert summary_request["messages"][0]["content"].startswith(SUMMARY_SYSTEM_PROMPT)
    assert wire_summary(loopback.requests[5])["current_goal"] == SUMMARY["current_goal"]
    assert "extractive" not in result.stderr  # the fenced summary was accepted
    assert_every_request_fits_strict_servers(loopback)


def test_a_runaway_reply_ends_at_the_configured_cap_with_the_cut_off_message(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.quirks = Quirks(honours_output_cap=True)
    loopback.queue(text_stream("junk " * 500, pieces=500))

    result = run_cli(
        "run", "--chapter", "1", "--prompt", "hi", env={"AGENT_TUTORIAL_MAX_OUTPUT_TOKENS": "20"}
    )

    assert result.exit_code == 1
    assert "cut off at its output-token limit" in result.stderr
    assert loopback.requests[0]["max_tokens"] == 20


def test_a_server_that_rejects_tool_choice_gets_a_hint_then_works_with_the_setting(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.quirks = Quirks(rejects_tool_choice=True)
    loopback.queue(text_stream("fine without tool_choice"))

    refused = run_cli("run", "--chapter", "2", "--prompt", "hi")
    accepted = run_cli(
        "run", "--chapter", "2", "--prompt", "hi", env={"AGENT_TUTORIAL_SEND_TOOL_CHOICE": "false"}
    )

    assert refused.exit_code == 1
    (error_line,) = [line for line in refused.stderr.splitlines() if "tool_choice" in line]
    assert "set send_tool_choice = false" in error_line
    assert accepted.exit_code == 0, accepted.stderr
    assert accepted.stdout.strip() == "fine without tool_choice"


def test_streaming_can_be_turned_off_in_the_project_config(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    write_state(workspace, "config.toml", "stream = false\n")
    loopback.queue(text_stream("answered whole"))

    result = run_cli("run", "--chapter", "1", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "answered whole"
    assert loopback.requests[0]["stream"] is False


def test_the_output_cap_is_a_quarter_of_a_given_context_window_at_most(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))

    result = run_cli("run", "--chapter", "2", "--context-window", "8000", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert loopback.requests[0]["max_tokens"] == 2_000
