"""The headless contract: `--output-format json` and `stream-json` in Claude Code's shapes,
piped input, and what a script sees when a run fails or answers nothing."""

from __future__ import annotations

import io
import json
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.conversation import EMPTY_ANSWER_NOTICE
from agent_tutorial.core.events import (
    CompactionApplied,
    NestedEvent,
    TextDelta,
    TurnStarted,
    UsageReported,
)
from agent_tutorial.core.model import Usage
from agent_tutorial.headless import StreamJsonSink, stream_event
from tests.conftest import (
    CliRun,
    RunCli,
    SteppedClock,
    cli_command,
    cli_environment,
    wait_until,
    write_state,
)
from tests.loopback import LoopbackServer, Reply, error_reply, exchanged, text_stream, tool_stream
from tests.terminal import Terminal
from tests.test_chapters_3_to_7_cli import hook_table, python_hook

UNAUTHORIZED = {"error": {"message": "Incorrect API key provided"}}


def json_result(result: CliRun) -> dict[str, Any]:
    """The one JSON object a json run prints, on one line as Claude Code prints it,
    whatever happened."""
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1, result.stdout
    record = json.loads(result.stdout)
    assert isinstance(record, dict)
    assert record["type"] == "result"
    return record


def stream_lines(result: CliRun) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines()]


def without_usage(reply: Reply) -> Reply:
    """The same stream minus its closing usage chunk, as servers that report none send."""
    assert reply.sse_events is not None and "usage" in reply.sse_events[-1]
    return Reply(sse_events=reply.sse_events[:-1])


def test_json_success_is_one_result_object_with_claude_code_fields(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream([("c1", "glob", {"pattern": "*"})], usage=(100, 20)),
        text_stream("done", usage=(150, 10)),
    )

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "json")

    record = json_result(result)
    assert result.exit_code == 0
    assert record["subtype"] == "success" and record["is_error"] is False
    assert record["result"] == record["final_text"] == "done"
    assert record["num_turns"] == record["turns"] == 2
    assert record["usage"] == {
        "prompt_tokens": 250,
        "completion_tokens": 30,
        "total_tokens": 280,
        "redactions": 0,
    }
    assert record["chapter"] == 2 and record["tool_calls"] == 1
    assert isinstance(record["duration_ms"], int) and record["duration_ms"] >= 0
    assert "error" not in record
    assert [path.name for path in saved_sessions(workspace) if record["session_id"] in path.name]


def test_json_on_a_401_is_one_error_result_and_exit_1(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(error_reply(401, UNAUTHORIZED))

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "json")

    record = json_result(result)
    assert result.exit_code == 1
    assert record["is_error"] is True and record["subtype"] == "error_during_execution"
    assert "401" in record["error"] and "\n" not in record["error"]
    assert record["result"] == "" and record["session_id"]
    assert "error:" in result.stderr


def test_json_at_the_turn_limit_reports_error_max_turns(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(tool_stream([("c1", "glob", {"pattern": "*"})]))

    result = run_cli("run", "-c", "2", "-p", "go", "--max-turns", "1", "--output-format", "json")

    record = json_result(result)
    assert result.exit_code == 1
    assert record["is_error"] is True and record["subtype"] == "error_max_turns"
    assert record["num_turns"] == 1 and record["tool_calls"] == 1
    assert "after 1 turn without" in record["error"]


def test_json_on_a_configuration_error_still_prints_one_result_and_exit_2(
    run_cli: RunCli,
) -> None:
    result = run_cli("run", "-p", "go", "--output-format", "json", env={"AGENT_TUTORIAL_MODEL": ""})

    record = json_result(result)
    assert result.exit_code == 2
    assert record["is_error"] is True and record["session_id"] is None
    assert "AGENT_TUTORIAL_MODEL" in record["error"]


REFUSED_COMMAND_LINES = {
    "a chapter out of range": (("-c", "10"), "Invalid value for '--chapter' / '-c'"),
    "no turns": (("--max-turns", "0"), "Invalid value for '--max-turns'"),
    "a count that is no number": (("--max-turns", "many"), "Invalid value for '--max-turns'"),
    "an unknown flag": (("--bogus",), "No such option: --bogus"),
}


@pytest.mark.parametrize("output_format", ["json", "stream-json"])
@pytest.mark.parametrize(
    ("flags", "error"), REFUSED_COMMAND_LINES.values(), ids=list(REFUSED_COMMAND_LINES)
)
def test_a_refused_command_line_still_prints_one_error_result_and_exits_2(
    run_cli: RunCli,
    loopback: LoopbackServer,
    output_format: str,
    flags: tuple[str, ...],
    error: str,
) -> None:
    result = run_cli("run", "-p", "go", "--output-format", output_format, *flags)

    record = json_result(result)
    assert result.exit_code == 2
    assert record["is_error"] is True and record["subtype"] == "error_during_execution"
    assert record["error"].startswith(error)
    assert (record["session_id"], record["chapter"], record["num_turns"]) == (None, None, 0)
    assert f"error: {record['error']}" in result.stderr
    assert loopback.requests == []


def test_a_refused_command_line_prints_nothing_on_stdout_as_text(run_cli: RunCli) -> None:
    result = run_cli("run", "-p", "go", "-c", "10")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "error: Invalid value for '--chapter' / '-c'" in result.stderr


def test_an_output_format_given_as_a_prompt_asks_for_no_json(run_cli: RunCli) -> None:
    # `-p` takes the next word whatever it looks like: the format is text, the line refused.
    result = run_cli("run", "-p", "--output-format", "json")

    assert result.exit_code == 2
    assert result.stdout == ""
    assert "error: Got unexpected extra argument(s) (json)" in result.stderr


def test_usage_no_call_reported_is_null_not_zero(run_cli: RunCli, loopback: LoopbackServer) -> None:
    loopback.queue(without_usage(text_stream("hi")))

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "json")

    usage = json_result(result)["usage"]
    assert usage == {
        "prompt_tokens": None,
        "completion_tokens": None,
        "total_tokens": None,
        "redactions": 0,
    }


def test_usage_counts_only_the_calls_that_reported_it(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        without_usage(tool_stream([("c1", "glob", {"pattern": "*"})])),
        text_stream("done", usage=(40, 2)),
    )

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "json")

    assert json_result(result)["usage"]["prompt_tokens"] == 40


def test_stream_json_opens_with_init_and_closes_with_the_result(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(tool_stream([("c1", "glob", {"pattern": "*"})]), text_stream("done"))

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    lines = stream_lines(result)
    init, last = lines[0], lines[-1]
    assert (init["type"], init["subtype"]) == ("system", "init")
    assert init["chapter"] == 2 and init["model"] == "loopback-model"
    assert init["cwd"] == str(workspace) and "read_file" in init["tools"]
    assert last["type"] == "result" and last["is_error"] is False and last["result"] == "done"
    assert {line["session_id"] for line in lines} == {init["session_id"]}


def test_stream_json_events_between_describe_the_run(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(tool_stream([("c1", "glob", {"pattern": "*"})]), text_stream("done"))

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    events = stream_lines(result)[1:-1]
    types = [event["type"] for event in events]
    assert types[0] == "message"  # the user prompt entering history
    assert {"turn_started", "text_delta", "model_reply", "tool_started", "tool_finished"} <= set(
        types
    )
    finished = next(event for event in events if event["type"] == "tool_finished")
    assert finished["name"] == "glob" and finished["is_error"] is False
    assert events[-1]["message"] == {"role": "assistant", "content": "done"}


def test_stream_json_on_a_401_still_ends_with_an_error_result(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(error_reply(401, UNAUTHORIZED))

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    lines = stream_lines(result)
    assert result.exit_code == 1
    assert lines[0]["subtype"] == "init"
    assert lines[-1]["type"] == "result" and lines[-1]["is_error"] is True
    assert [line["type"] for line in lines].count("result") == 1


def test_stream_json_failing_before_a_session_prints_the_result_line_alone(
    run_cli: RunCli,
) -> None:
    result = run_cli("run", "--continue", "-p", "go", "--output-format", "stream-json")

    lines = stream_lines(result)
    assert result.exit_code == 2
    assert len(lines) == 1 and lines[0]["type"] == "result"
    assert lines[0]["is_error"] is True and lines[0]["session_id"] is None


def block_every_prompt(workspace: Path) -> None:
    """A UserPromptSubmit hook that refuses every prompt, so the run writes no message."""
    refuse = "import sys\nprint('no prompts today', file=sys.stderr)\nsys.exit(2)\n"
    command = python_hook(workspace, "refuse.py", refuse)
    write_state(workspace, "config.toml", hook_table("UserPromptSubmit", command))


def saved_sessions(workspace: Path) -> list[Path]:
    return list((workspace / ".agent_tutorial" / "sessions").glob("*.jsonl"))


def test_json_result_of_a_blocked_prompt_names_no_session_since_none_was_kept(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    block_every_prompt(workspace)

    result = run_cli("run", "--trust-project", "-c", "4", "-p", "go", "--output-format", "json")

    record = json_result(result)
    assert result.exit_code == 1
    assert "no prompts today" in record["error"]
    assert saved_sessions(workspace) == []  # so there is nothing to --resume
    assert record["session_id"] is None
    assert loopback.requests == []


def test_stream_json_blocked_prompt_keeps_the_announced_id_but_the_result_names_none(
    run_cli: RunCli, workspace: Path
) -> None:
    block_every_prompt(workspace)

    result = run_cli(
        "run", "--trust-project", "-c", "4", "-p", "go", "--output-format", "stream-json"
    )

    lines = stream_lines(result)
    assert result.exit_code == 1
    assert lines[0]["subtype"] == "init" and lines[0]["session_id"]
    assert lines[-1]["type"] == "result" and lines[-1]["session_id"] is None
    assert saved_sessions(workspace) == []


def test_an_empty_final_answer_prints_a_notice_on_stderr(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream(""))

    result = run_cli("run", "-c", "2", "-p", "go")

    assert result.exit_code == 0
    assert EMPTY_ANSWER_NOTICE in result.stderr
    assert result.stdout.strip() == ""


def test_an_empty_answer_notice_reaches_stderr_under_stream_json_too(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream(""))

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    assert EMPTY_ANSWER_NOTICE in result.stderr
    assert stream_lines(result)[-1]["type"] == "result"


def test_piped_input_and_prompt_are_joined_input_first(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "2", "-p", "explain this log", input="line one\nline two\n")

    user = [m for m in exchanged(loopback.requests[0]) if m["role"] == "user"]
    assert user[0]["content"] == "line one\nline two\n\nexplain this log"


def test_piped_input_over_the_cap_is_refused_with_exit_2(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    result = run_cli(
        "run",
        "-c",
        "2",
        "-p",
        "summarise",
        input="x" * 101,
        env={"AGENT_TUTORIAL_MAX_STDIN_BYTES": "100"},
    )

    assert result.exit_code == 2
    assert "larger than 100 bytes" in result.stderr
    assert loopback.requests == []


def test_piped_input_at_the_cap_is_accepted(run_cli: RunCli, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("ok"))

    result = run_cli(
        "run", "-c", "2", input="y" * 100, env={"AGENT_TUTORIAL_MAX_STDIN_BYTES": "100"}
    )

    assert result.exit_code == 0
    assert loopback.requests[0]["messages"][-1]["content"] == "y" * 100


def test_stream_events_show_compaction_and_usage_whole() -> None:
    compaction = CompactionApplied("micro", "micro: 2 results", 2, 100, {"ids": ("a", "b")})
    usage = UsageReported(Usage(10, 2, 12), "summary")

    assert stream_event(compaction) == {
        "type": "compaction",
        "layer": "micro",
        "text": "micro: 2 results",
        "count": 2,
        "bytes_saved": 100,
        "details": {"ids": ("a", "b")},
    }
    assert stream_event(usage)["usage"]["total_tokens"] == 12


def test_json_output_on_a_terminal_without_a_prompt_is_a_usage_error(
    make_terminal: Callable[..., Terminal], loopback: LoopbackServer
) -> None:
    # Not a REPL that silently drops the JSON the caller asked for.
    terminal = make_terminal("run", "--output-format", "json")

    assert terminal.wait_for_exit() == 2
    assert "--output-format json needs a prompt" in terminal.flat_text()
    assert loopback.requests == []


# --- stream-json while the model is awaited ---------------------------------------------------


def written_lines(file: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file.getvalue().splitlines()]


def awaiting_sink(clock: SteppedClock, interval_s: float) -> tuple[StreamJsonSink, io.StringIO]:
    file = io.StringIO()
    sink = StreamJsonSink(file, waiting_interval_s=interval_s, clock=clock)
    sink.start({"type": "system", "subtype": "init", "session_id": "s1"})
    return sink, file


def waiting_lines(file: io.StringIO) -> list[dict[str, Any]]:
    return [line for line in written_lines(file) if line.get("subtype") == "waiting"]


def test_stream_json_says_how_long_the_model_has_been_awaited() -> None:
    clock = SteppedClock(1000.0)
    sink, file = awaiting_sink(clock, interval_s=0.01)

    sink.emit(TurnStarted(3))
    clock.advance(12.34)
    assert wait_until(lambda: len(waiting_lines(file)) >= 2)
    sink.emit(TextDelta("at last"))

    assert waiting_lines(file)[0] == {
        "type": "system",
        "subtype": "waiting",
        "elapsed_s": 12.3,
        "turn": 3,
        "session_id": "s1",
    }
    types = [line["type"] for line in written_lines(file)]
    assert types[1] == "turn_started" and types[-1] == "text_delta"  # none after the reply


def test_a_subagents_wait_carries_its_depth() -> None:
    clock = SteppedClock()
    sink, file = awaiting_sink(clock, interval_s=0.01)

    sink.emit(NestedEvent(depth=1, event=TurnStarted(1)))
    assert wait_until(lambda: bool(waiting_lines(file)))
    sink.finish({"type": "result", "is_error": False})

    assert waiting_lines(file)[0]["depth"] == 1
    assert written_lines(file)[-1]["type"] == "result"


def test_a_reply_within_the_interval_is_not_preceded_by_a_waiting_line() -> None:
    clock = SteppedClock()
    sink, file = awaiting_sink(clock, interval_s=3600)

    sink.emit(TurnStarted(1))
    clock.advance(5000)
    sink.emit(TextDelta("quick"))

    assert [line["type"] for line in written_lines(file)] == [
        "system",
        "turn_started",
        "text_delta",
    ]


def test_a_held_reply_is_waited_on_visibly_through_the_cli(
    workspace: Path, loopback: LoopbackServer
) -> None:
    """The server holds its reply until the test has read a waiting line, so the line's
    arrival, not a pause, decides when the run may go on."""
    release = threading.Event()
    loopback.queue(replace(text_stream("worth the wait"), hold=release))
    environment = {
        **cli_environment(loopback),
        "AGENT_TUTORIAL_WAITING_EVENT_INTERVAL_S": "0.2",
        "AGENT_TUTORIAL_REQUEST_TIMEOUT_S": "30",
    }
    command = cli_command("run", "-c", "1", "-p", "go", "--output-format", "stream-json")
    with subprocess.Popen(
        command, cwd=workspace, env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
    ) as cli:
        assert cli.stdout is not None
        before = []
        for line in cli.stdout:
            before.append(json.loads(line))
            if before[-1].get("subtype") == "waiting":
                break
        release.set()
        after = [json.loads(line) for line in cli.stdout]
        assert cli.wait() == 0

    assert [line["type"] for line in before[-2:]] == ["turn_started", "system"]
    assert before[-1]["elapsed_s"] >= 0.2 and before[-1]["turn"] == 1
    assert after[-1]["result"] == "worth the wait"


# A provider reply nested deeper than the JSON decoder goes (issue 27): a provider error.
DEEP = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
DEEP_CHUNK = (
    b'{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": '
    b'[{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}], "extra": ' + DEEP + b"}"
)
DEEP_COMPLETION = (
    b'{"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": '
    b'[{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": '
    b'"stop"}], "extra": ' + DEEP + b"}"
)


def deep_stream() -> Reply:
    return Reply(raw_stream=lambda: iter([b"data: " + DEEP_CHUNK + b"\n\n", b"data: [DONE]\n\n"]))


@pytest.mark.parametrize(
    ("reply", "stream", "what"),
    [
        (deep_stream, "true", "a stream event"),
        (lambda: Reply(raw_body=DEEP_COMPLETION), "false", "a reply"),
    ],
    ids=["streamed", "whole"],
)
def test_json_on_a_reply_nested_too_deeply_is_one_error_result_and_exit_1(
    run_cli: RunCli,
    loopback: LoopbackServer,
    reply: Callable[[], Reply],
    stream: str,
    what: str,
) -> None:
    loopback.queue(reply())

    result = run_cli(
        "run",
        "-c",
        "2",
        "-p",
        "go",
        "--output-format",
        "json",
        env={"AGENT_TUTORIAL_STREAM": stream},
    )

    record = json_result(result)
    assert result.exit_code == 1
    assert record["is_error"] is True and record["subtype"] == "error_during_execution"
    assert record["error"] == f"the endpoint sent {what} nested too deeply to read as JSON"
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr


def test_stream_json_on_a_reply_nested_too_deeply_ends_with_an_error_result(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(deep_stream())

    result = run_cli("run", "-c", "2", "-p", "go", "--output-format", "stream-json")

    lines = stream_lines(result)
    assert result.exit_code == 1
    assert lines[-1]["type"] == "result" and lines[-1]["is_error"] is True
    assert "nested too deeply" in lines[-1]["error"]


def test_text_on_a_reply_nested_too_deeply_is_one_error_line(
    run_cli_process: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(deep_stream())

    result = run_cli_process("run", "-c", "2", "-p", "go")

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the endpoint sent a stream event nested too deeply to read as JSON"
    )
    assert "Traceback" not in result.stderr
