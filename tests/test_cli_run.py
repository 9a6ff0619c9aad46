"""`agent-tutorial run` end to end: the real openai SDK over real HTTP to a loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.core.messages import from_wire, validate_tool_pairing
from tests.conftest import TEST_API_KEY, CliRun, RunCli, write_state
from tests.loopback import (
    LoopbackServer,
    cut_stream,
    error_reply,
    exchanged,
    text_stream,
    tool_stream,
)


def assert_every_request_paired(loopback: LoopbackServer) -> None:
    for body in loopback.requests:
        validate_tool_pairing([from_wire(message) for message in body["messages"]])


def assert_one_line_error(result: CliRun, fragment: str) -> None:
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    assert fragment in lines[0].lower()
    assert "Traceback" not in result.stderr
    assert TEST_API_KEY not in result.stderr + result.stdout


def test_chapter_2_runs_four_tools_from_one_streamed_message(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "notes.md").write_text("# Notes\nTODO: ship chapter two\n")
    loopback.queue(
        tool_stream(
            [
                ("call-glob", "glob", {"pattern": "*.md"}),
                ("call-read", "read_file", {"path": "notes.md"}),
                ("call-grep", "grep", {"pattern": "TODO"}),
                ("call-bash", "bash", {"command": "wc -l notes.md"}),
            ]
        ),
        text_stream("notes.md has one TODO."),
    )

    result = run_cli("run", "--chapter", "2", "--prompt", "What is left to do?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "notes.md has one TODO."
    assert len(loopback.requests) == 2
    assert_every_request_paired(loopback)
    tool_replies = {
        m["tool_call_id"]: m["content"]
        for m in loopback.requests[1]["messages"]
        if m["role"] == "tool"
    }
    assert "notes.md" in tool_replies["call-glob"]
    assert "TODO: ship chapter two" in tool_replies["call-read"]
    assert "notes.md:2:TODO: ship chapter two" in tool_replies["call-grep"]
    assert "2 notes.md" in tool_replies["call-bash"]


def test_request_uses_streaming_with_usage_and_the_chapter_2_tools(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("hello"))

    run_cli("run", "--chapter", "2", "--prompt", "hi")

    body = loopback.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "loopback-model"
    names = [tool["function"]["name"] for tool in body["tools"]]
    assert names == ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]
    assert loopback.headers[0]["authorization"] == f"Bearer {TEST_API_KEY}"


def test_chapter_1_offers_only_bash(run_cli: RunCli, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("ok"))

    run_cli("run", "--chapter", "1", "--prompt", "hi")

    assert [tool["function"]["name"] for tool in loopback.requests[0]["tools"]] == ["bash"]


def test_prompt_is_read_from_piped_stdin(run_cli: RunCli, loopback: LoopbackServer) -> None:
    loopback.queue(text_stream("piped answer"))

    result = run_cli("run", "--chapter", "2", input="summarise the repo\n")

    assert result.exit_code == 0
    user = [m for m in exchanged(loopback.requests[0]) if m["role"] == "user"]
    assert user[0]["content"].strip() == "summarise the repo"


def test_path_escape_is_refused_and_the_model_reads_why(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    secret = workspace.parent / "secret.txt"
    secret.write_text("top secret value")
    (workspace / "link.txt").symlink_to(secret)
    loopback.queue(
        tool_stream(
            [
                ("c1", "read_file", {"path": "../secret.txt"}),
                ("c2", "read_file", {"path": str(secret)}),
                ("c3", "read_file", {"path": "link.txt"}),
            ]
        ),
        text_stream("I cannot read those."),
    )

    result = run_cli("run", "--chapter", "2", "--prompt", "read the secret")

    assert result.exit_code == 0
    tool_messages = [m for m in loopback.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 3
    for message in tool_messages:
        assert message["content"].startswith("Error [")
        assert "top secret value" not in message["content"]


def test_malformed_and_unknown_tool_calls_become_paired_errors(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        tool_stream([("c1", "read_file", '{"path": '), ("c2", "teleport", {"to": "mars"})]),
        text_stream("sorry"),
    )

    result = run_cli("run", "--chapter", "2", "--prompt", "go")

    assert result.exit_code == 0
    assert_every_request_paired(loopback)
    contents = [m["content"] for m in loopback.requests[1]["messages"] if m["role"] == "tool"]
    assert contents[0].startswith("Error [invalid_json]")
    assert contents[1].startswith("Error [unknown_tool]")


OVERFLOW_REPLIES = [
    {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "code": "context_length_exceeded",
        }
    },
    {
        "error": {
            "message": "the request exceeds the available context size",
            "type": "exceed_context_size_error",
        }
    },
    {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens (4000 in the messages, 1000 in the completion). input tokens",
        "type": "BadRequestError",
        "code": 400,
    },
    {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}},
    {"error": {"message": "Range of input length should be [1, 30720]"}},
]


@pytest.mark.parametrize("body", OVERFLOW_REPLIES)
def test_context_overflow_without_compaction_is_one_line_and_sent_once(
    run_cli: RunCli, loopback: LoopbackServer, body: dict[str, Any]
) -> None:
    loopback.queue(error_reply(400, body))

    result = run_cli("run", "--chapter", "2", "--prompt", "go")

    assert_one_line_error(result, "no longer fits")
    assert len(loopback.requests) == 1


def test_authentication_failure_is_not_retried_and_hides_the_key(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        error_reply(401, {"error": {"message": f"Incorrect API key provided: {TEST_API_KEY}"}})
    )

    result = run_cli("run", "--chapter", "2", "--prompt", "go")

    assert_one_line_error(result, "401")
    assert len(loopback.requests) == 1


def test_rate_limit_is_retried_then_reported(run_cli: RunCli, loopback: LoopbackServer) -> None:
    limited = {"error": {"message": "Rate limit reached: tokens per min (TPM) limit 30000"}}
    loopback.queue(*(error_reply(429, limited) for _ in range(3)))

    result = run_cli("run", "--chapter", "2", "--prompt", "go")

    assert_one_line_error(result, "rate limit")
    assert len(loopback.requests) == 3


def test_server_error_is_retried_and_the_run_succeeds(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(error_reply(503, {"error": {"message": "overloaded"}}), text_stream("fine"))

    result = run_cli("run", "--chapter", "2", "--prompt", "go")

    assert result.exit_code == 0
    assert result.stdout.strip() == "fine"
    assert len(loopback.requests) == 2


def test_cut_stream_twice_is_a_clear_failure(run_cli: RunCli, loopback: LoopbackServer) -> None:
    loopback.queue(cut_stream(), cut_stream())

    result = run_cli("run", "--chapter", "2", "--prompt", "go")

    assert_one_line_error(result, "finish")
    assert len(loopback.requests) == 2


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (("--base-url", "notaurl"), {}, "--base-url 'notaurl'"),
        ((), {"OPENAI_BASE_URL": "notaurl"}, "OPENAI_BASE_URL 'notaurl'"),
        (("--base-url", "http://h:9x/v1"), {}, "--base-url 'http://h:9x/v1' is not a valid URL"),
    ],
    ids=["a flag", "a variable", "a flag whose port is no number"],
)
def test_a_bad_base_url_is_named_as_it_was_given(
    run_cli: RunCli, flags: tuple[str, ...], env: dict[str, str], named: str
) -> None:
    result = run_cli("run", "-p", "hi", *flags, env=env)

    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {named}")


def test_missing_settings_are_all_named_with_exit_2(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    result = run_cli(
        "run",
        "--prompt",
        "go",
        env={"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "AGENT_TUTORIAL_MODEL": ""},
    )

    assert result.exit_code == 2
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_TUTORIAL_MODEL"):
        assert name in result.stderr
    assert "Traceback" not in result.stderr
    assert loopback.requests == []


def test_bash_commands_do_not_see_the_agents_api_key(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(
        tool_stream([("c1", "bash", {"command": "echo key=${OPENAI_API_KEY:-hidden}"})]),
        text_stream("done"),
    )

    run_cli("run", "--chapter", "1", "--prompt", "print the key")

    tool_reply = next(m for m in loopback.requests[1]["messages"] if m["role"] == "tool")
    assert "key=hidden" in tool_reply["content"]
    assert TEST_API_KEY not in tool_reply["content"]


@pytest.mark.parametrize(
    ("lines", "warnings"),
    [
        (
            "max_turns=4\nDEEPSEEK_API_KEY=sk-other\n",
            ["max_turns is not read; write AGENT_TUTORIAL_MAX_TURNS to set max_turns"],
        ),
        ("AGENT_TUTORIAL_MAX_TURNS=4\nDEEPSEEK_API_KEY=sk-other\n", []),
    ],
    ids=["bare setting name", "variables"],
)
def test_a_dotenv_line_that_sets_nothing_is_warned_of_once_and_the_run_goes_on(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, lines: str, warnings: list[str]
) -> None:
    dotenv = write_state(workspace, ".env", lines)
    loopback.queue(text_stream("done"))

    result = run_cli("run", "--chapter", "2", "--prompt", "hi")

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "done\n"
    said = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert said == [f"warning: in {dotenv}: {warning}" for warning in warnings]
