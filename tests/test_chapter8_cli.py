"""Chapter 8 end to end: `agent-tutorial run --chapter 8 -y` against the loopback server with
the real openai SDK, asserting on the request bodies the server saw and on the files on disk."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import ToolRegistry
from agent_tutorial.features.builtin_tools import file_tools
from agent_tutorial.features.compaction import (
    CONTINUE_AFTER_SUMMARY,
    SUMMARY_SYSTEM_PROMPT,
)
from tests.conftest import CliRun, RunCli, session_messages
from tests.contracts import (
    ANY_PATH,
    ARTIFACTS,
    CIRCUIT_OPENING_KINDS,
    LARGE_READ_COUNT,
    SUMMARY,
    THIRD_BAD_SUMMARY,
    Body,
    artifact_files,
    artifact_id,
    assert_first_two_of_five_reads_cleared,
    overflow,
    persisted_block,
    queue_large_reads,
    queue_three_failed_summaries,
    read_call,
    request_kinds,
    summary_reply,
    tool_contents,
    wire_summary,
    write_text_file,
)
from tests.loopback import (
    LoopbackServer,
    Reply,
    conversation,
    text_stream,
    tool_stream,
)
from tests.test_error_classification import STATED_WINDOWS

REPO = Path(__file__).resolve().parents[1]


def read_file_output(workspace: Path, path: str) -> str:
    """What the real `read_file` tool returns for `path`: the bytes the model would see."""
    result = ToolRegistry(file_tools(workspace)).run(
        tool_call("expected", "read_file", json.dumps({"path": path}))
    )
    assert not result.is_error, result.content
    return result.content


def run_chapter_8(run_cli: RunCli, *extra: str) -> CliRun:
    return run_cli("run", "--chapter", "8", "-y", "--prompt", "Read the files.", *extra)


# --- layer 1: persist --------------------------------------------------------------------


def test_large_read_is_persisted_before_the_next_request(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    path = write_text_file(workspace, "big.txt", 36_000)
    full = read_file_output(workspace, path)
    loopback.queue(read_call("read-big", path), text_stream("done"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    (artifact,) = artifact_files(workspace, "tool-result")
    assert artifact.read_bytes() == full.encode()
    expected = persisted_block((ARTIFACTS / artifact.name).as_posix(), full)
    assert tool_contents(loopback.requests[1]) == {"read-big": expected}


def test_canonical_history_keeps_the_preview_not_the_full_result(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    path = write_text_file(workspace, "big.txt", 36_000)
    full = read_file_output(workspace, path)
    loopback.queue(read_call("read-big", path), text_stream("done"))

    run_chapter_8(run_cli)

    (artifact,) = artifact_files(workspace, "tool-result")
    (tool_message,) = [m for m in session_messages(workspace) if m["role"] == "tool"]
    assert tool_message["content"] == persisted_block((ARTIFACTS / artifact.name).as_posix(), full)


def test_model_can_read_a_persisted_result_back_from_its_path(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    path = write_text_file(workspace, "big.txt", 36_000)

    def read_the_artifact(body: Body) -> Reply:
        preview = tool_contents(body)["read-big"]
        artifact = preview.splitlines()[1].removeprefix("path: ")
        return tool_stream([("read-back", "read_file", {"path": artifact, "offset": 200})])

    loopback.queue(read_call("read-big", path), read_the_artifact, text_stream("done"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    read_back = tool_contents(loopback.requests[2])["read-back"]
    assert read_back.startswith("200\t200\tbig.txt 00199 x")


def test_json_output_counts_the_persisted_result_and_the_bytes_saved(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    path = write_text_file(workspace, "big.txt", 36_000)
    full = read_file_output(workspace, path)
    loopback.queue(read_call("read-big", path), text_stream("done"))

    result = run_chapter_8(run_cli, "--output-format", "json")

    assert result.exit_code == 0, result.stderr
    compaction = json.loads(result.stdout)["compaction"]
    kept = tool_contents(loopback.requests[1])["read-big"]
    saved = len(full.encode()) - len(kept.encode())
    assert compaction["persist"] == {"events": 1, "count": 1, "bytes_saved": saved}
    assert all(layer["events"] == 0 for name, layer in compaction.items() if name != "persist")


# --- layer 3: micro ----------------------------------------------------------------------


def test_after_five_reads_the_first_two_results_are_cleared(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    paths = [write_text_file(workspace, f"notes{n}.txt", 4_000) for n in range(1, 6)]
    outputs = {f"read-{n}": read_file_output(workspace, p) for n, p in enumerate(paths, 1)}
    loopback.queue(
        *(read_call(f"read-{n}", path) for n, path in enumerate(paths, 1)), text_stream("done")
    )

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    assert_first_two_of_five_reads_cleared(loopback, outputs)
    canonical = {
        m["tool_call_id"]: m["content"] for m in session_messages(workspace) if m["role"] == "tool"
    }
    assert canonical == outputs
    assert "⚙ micro: 1 result cleared" in result.stderr  # its first step; the next is counted
    assert "⚙ compaction this run: micro 2 results; " in result.stderr


def queue_reads(loopback: LoopbackServer, workspace: Path, numbers: range) -> None:
    for n in numbers:
        path = write_text_file(workspace, f"notes{n}.txt", 4_000)
        loopback.queue(read_call(f"read-{n}", path))
    loopback.queue(text_stream("done"))


def test_the_lines_the_totals_and_stream_json_count_the_same_steps_and_results(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_reads(loopback, workspace, range(1, 6))
    shown = run_chapter_8(run_cli, "-v").stderr.splitlines()
    queue_reads(loopback, workspace, range(1, 6))
    streamed = run_chapter_8(run_cli, "--output-format", "stream-json").stdout.splitlines()

    micro_lines = [line for line in shown if line.startswith("⚙ micro: ")]
    events = [json.loads(line) for line in streamed]
    micro_events = [event for event in events if event.get("layer") == "micro"]
    assert micro_lines == ["⚙ micro: 1 result cleared"] * 2
    assert [(event["text"], event["count"]) for event in micro_events] == [
        ("micro: 1 result cleared", 1)
    ] * 2
    assert shown[-1].startswith("⚙ compaction this run: micro 2 results; ")
    micro = events[-1]["compaction"]["micro"]
    assert (micro["events"], micro["count"]) == (2, 2)


def test_a_continued_session_counts_only_what_this_run_cleared(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_reads(loopback, workspace, range(1, 6))
    first = run_chapter_8(run_cli).stderr.splitlines()
    queue_reads(loopback, workspace, range(6, 7))

    again = run_chapter_8(run_cli, "--continue").stderr.splitlines()

    assert first[-1].startswith("⚙ compaction this run: micro 2 results; ")
    # One more read, one more result cleared: the first run's two are not counted again.
    assert [line for line in again if line.startswith("⚙ micro")] == ["⚙ micro: 1 result cleared"]
    assert again[-1].startswith("⚙ compaction this run: micro 1 result; ")


# --- layer 4: summary --------------------------------------------------------------------


def test_three_large_reads_trigger_one_tool_free_summary_request(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_large_reads(loopback, workspace, LARGE_READ_COUNT)
    loopback.queue(summary_reply(), text_stream("done"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    assert request_kinds(loopback) == ["agent", "agent", "agent", "summary", "agent"]
    summary_request = loopback.requests[3]
    assert summary_request["messages"][0] == {"role": "system", "content": SUMMARY_SYSTEM_PROMPT}
    assert not summary_request.get("tools")


def test_the_request_after_a_summary_carries_it_and_its_transcript_on_disk(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_large_reads(loopback, workspace, LARGE_READ_COUNT)
    loopback.queue(summary_reply(), text_stream("done"))

    run_chapter_8(run_cli)

    content = wire_summary(loopback.requests[4])
    assert content == {"kind": "compacted_history", "transcript_path": ANY_PATH, **SUMMARY}
    transcript = workspace / content["transcript_path"]
    lines = transcript.read_text().splitlines()
    canonical = session_messages(workspace)
    covered = 1 + 2 * LARGE_READ_COUNT  # the prompt, then a call and its result per read
    assert [json.loads(line) for line in lines] == canonical[:covered]
    assert not tool_contents(loopback.requests[4])


def test_the_request_after_a_summary_ends_with_a_user_turn_that_is_not_kept(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_large_reads(loopback, workspace, LARGE_READ_COUNT)
    loopback.queue(summary_reply(), text_stream("done"))

    run_chapter_8(run_cli)

    after_summary = loopback.requests[4]["messages"]
    assert after_summary[-1] == {"role": "user", "content": CONTINUE_AFTER_SUMMARY}
    user_turns = [m for m in conversation(loopback.requests[4]) if m["role"] == "user"]
    assert user_turns == [after_summary[-1]]
    assert all(m.get("content") != CONTINUE_AFTER_SUMMARY for m in session_messages(workspace))


def test_json_usage_counts_the_summary_request_too(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_large_reads(loopback, workspace, LARGE_READ_COUNT)
    loopback.queue(summary_reply(), text_stream("done"))

    result = run_chapter_8(run_cli, "--output-format", "json")

    calls = len(loopback.requests)  # every reply above reports 10 prompt + 5 completion tokens
    assert request_kinds(loopback).count("summary") == 1
    assert json.loads(result.stdout)["usage"] == {
        "prompt_tokens": 10 * calls,
        "completion_tokens": 5 * calls,
        "total_tokens": 15 * calls,
        "redactions": 0,
    }


# --- reactive recovery -------------------------------------------------------------------

# Replies that state no window. One that states a window is believed (issue 16), and the
# one-line requests below are far too small to overflow any window a reply states here,
# so no retry of them could fit: that case has its own test.
STATING_NO_WINDOW = sorted(p for p, tokens in STATED_WINDOWS.items() if tokens is None)
STATING_A_WINDOW = sorted(p for p, tokens in STATED_WINDOWS.items() if tokens is not None)
NO_WINDOW = "openai-context-window"
"""OpenAI's other wording of an overflow, which names no window."""


def queue_two_large_reads(loopback: LoopbackServer, workspace: Path) -> None:
    """Two reads before the overflow, the first with 40 KB of the model's notes beside its
    call: a history a retry can be made smaller than, but only by a summary (clearing
    results would not do it, and the retry after a refusal stating no count must be at
    most half the refused request)."""
    path = queue_wordy_read(loopback, workspace)
    loopback.queue(read_call("plain", path))


def queue_wordy_read(loopback: LoopbackServer, workspace: Path) -> str:
    """A small read whose call comes with 40 KB of the model's notes; returns its path."""
    path = write_text_file(workspace, "small.txt", 500)
    notes = "notes on what to read next. " * 1_500
    loopback.queue(tool_stream([("wordy", "read_file", {"path": path})], content=notes))
    return path


@pytest.mark.parametrize("provider", STATING_NO_WINDOW)
def test_overflow_is_compacted_and_retried_once(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, provider: str
) -> None:
    queue_two_large_reads(loopback, workspace)
    loopback.queue(overflow(provider), summary_reply(), text_stream("done after compacting"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "done after compacting"
    assert request_kinds(loopback) == ["agent", "agent", "agent", "summary", "agent"]
    refused, retried = loopback.requests[2], loopback.requests[4]
    assert wire_summary(retried)["kind"] == "compacted_history"
    assert len(json.dumps(retried)) * 2 <= len(json.dumps(refused))  # no count: half at most
    assert "reactive: prompt too long" in result.stderr


def test_an_overflow_of_the_prompt_alone_ends_the_run_without_a_summary_request(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    """One short message: nothing can be removed, so no summary is asked for."""
    loopback.queue(overflow(NO_WINDOW), summary_reply(), text_stream("unused"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 1
    assert request_kinds(loopback) == ["agent"]
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "the latest message alone (44 B" in line
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("provider", STATING_A_WINDOW)
def test_an_overflow_stating_a_window_the_request_was_far_below_is_not_retried(
    run_cli: RunCli, loopback: LoopbackServer, provider: str
) -> None:
    """The window is taken as stated; with it known, a retry that cannot be smaller than
    the refused request (or cannot fit at all) is never sent, and the run ends clearly."""
    loopback.queue(overflow(provider), summary_reply(), text_stream("unused"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 1
    assert f"the server states a context window of {STATED_WINDOWS[provider]:,} tokens" in (
        result.stderr
    )
    assert request_kinds(loopback).count("agent") == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "could not be compacted" in line or "does not fit" in line
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("provider", STATING_NO_WINDOW)
def test_second_overflow_in_a_turn_ends_the_run_without_a_third_request(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, provider: str
) -> None:
    queue_two_large_reads(loopback, workspace)
    loopback.queue(overflow(provider), summary_reply(), overflow(provider), text_stream("unused"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 1
    assert request_kinds(loopback) == ["agent", "agent", "agent", "summary", "agent"]
    assert loopback.pending == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "/compact" in line
    assert "Traceback" not in result.stderr


def test_overflow_is_recovered_even_when_the_summary_request_overflows_too(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_two_large_reads(loopback, workspace)
    loopback.queue(overflow(NO_WINDOW), overflow(NO_WINDOW), text_stream("done after compacting"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    assert request_kinds(loopback) == ["agent", "agent", "agent", "summary", "agent"]
    summary = wire_summary(loopback.requests[4])
    assert summary["current_goal"] == "Read the files."  # written from the history itself
    assert "using an extractive summary instead" in result.stderr


# --- the circuit breaker -----------------------------------------------------------------


@pytest.mark.parametrize("third", sorted(THIRD_BAD_SUMMARY))
def test_three_failed_summaries_switch_automatic_summaries_off(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, third: str
) -> None:
    paths = queue_three_failed_summaries(loopback, workspace, third)
    loopback.queue(text_stream("finished anyway"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "finished anyway"
    assert request_kinds(loopback) == [*CIRCUIT_OPENING_KINDS, "agent"]
    whole = [read_file_output(workspace, path) for path in paths[:3]]
    after_first_failure = tool_contents(loopback.requests[4])
    assert list(after_first_failure.values()) == whole  # the cheap-layer history
    stderr_lines = result.stderr.splitlines()
    assert sum("automatic summary failed" in line for line in stderr_lines) == 3
    assert sum("automatic summaries are off" in line for line in stderr_lines) == 1


def test_with_the_circuit_open_an_overflow_is_recovered_with_an_extractive_summary(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_three_failed_summaries(loopback, workspace, "length")
    queue_two_large_reads(loopback, workspace)
    loopback.queue(overflow(NO_WINDOW), text_stream("recovered"))

    result = run_chapter_8(run_cli)

    assert result.exit_code == 0, result.stderr
    assert request_kinds(loopback) == [*CIRCUIT_OPENING_KINDS, *["agent"] * 4]
    summary = wire_summary(loopback.requests[-1])
    assert summary["kind"] == "compacted_history"
    assert summary["current_goal"] == "Read the files."
    assert summary["files_read_or_changed"] == [
        *(f"large-{n}.txt" for n in range(1, 7)),
        "small.txt",
    ]


# --- inspecting artifacts ----------------------------------------------------------------


def persist_and_transcribe(run_cli: RunCli, loopback: LoopbackServer, workspace: Path) -> str:
    """A run that persists a 36 KB read and then writes a transcript while recovering from an
    overflow; returns the full read output."""
    path = write_text_file(workspace, "big.txt", 36_000)
    queue_wordy_read(loopback, workspace)
    loopback.queue(
        read_call("read-big", path),
        overflow(NO_WINDOW),
        summary_reply(),
        text_stream("done"),
    )
    assert run_chapter_8(run_cli).exit_code == 0
    return read_file_output(workspace, path)


def test_artifacts_list_shows_each_artifact_with_what_made_it(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    persist_and_transcribe(run_cli, loopback, workspace)
    (result_file,) = artifact_files(workspace, "tool-result")
    (transcript,) = artifact_files(workspace, "transcript")

    listing = run_cli("artifacts", "list")

    assert listing.exit_code == 0
    assert listing.stdout.split("\n")[0].split()[-2:] == ["made", "by"]
    rows = [line.split() for line in listing.stdout.splitlines()[1:]]
    shown = {row[0]: (row[1], " ".join(row[6:])) for row in rows}  # kind: id, made by
    covered = re.search(r"of (\d+) messages", shown["transcript"][1])
    assert shown == {
        "tool-result": (artifact_id(result_file), "read_file big.txt"),
        "transcript": (
            artifact_id(transcript),
            f"summary of {covered and covered[1]} messages (prompt too long)",
        ),
    }


def test_artifacts_show_prints_the_full_bytes_of_a_persisted_result(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    full = persist_and_transcribe(run_cli, loopback, workspace)
    (result_file,) = artifact_files(workspace, "tool-result")

    shown = run_cli("artifacts", "show", artifact_id(result_file))

    assert shown.exit_code == 0
    assert shown.stdout == full


def test_artifacts_list_keeps_whole_ids_in_a_narrow_terminal(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    persist_and_transcribe(run_cli, loopback, workspace)
    ids = [
        artifact_id(path)
        for kind in ("tool-result", "transcript")
        for path in artifact_files(workspace, kind)
    ]

    listing = run_cli("artifacts", "list", env={"COLUMNS": "60"})

    assert len(ids) == 2
    assert all(shown in listing.stdout for shown in ids), listing.stdout


# --- the demo ----------------------------------------------------------------------------


def test_demo_tour_shows_every_compaction_layer(run_cli: RunCli, workspace: Path) -> None:
    for folder in ("agent_tutorial", "tests"):
        ignored = shutil.ignore_patterns("__pycache__", ".agent_tutorial")
        shutil.copytree(REPO / folder, workspace / folder, ignore=ignored)

    result = run_cli(
        "run", "--chapter", "8", "--model", "demo", "-y", "--prompt", "Give me a tour."
    )

    assert result.exit_code == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("⚙")]
    assert {line.split()[1].rstrip(":") for line in lines[:-1]} == {
        "persisted",
        "micro",
        "snip",
        "summary",
    }
    assert lines[-1].startswith("⚙ compaction this run: persist 1 result, snip ")
