"""Edge cases of the core, the adapters, the built-in tools, the CLI and the settings: each
test pins a defect that used to crash the agent, hang it, garble its output or touch a file
it should have left alone."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel

from agent_tutorial.adapters.openai_chat import OpenAIChatModel
from agent_tutorial.config import ConfigError, load_settings
from agent_tutorial.core.loop import AgentRunner, FullContext, TurnInterrupted
from agent_tutorial.core.messages import from_wire, tool_call, user_message, validate_tool_pairing
from agent_tutorial.core.model import ModelRequest, PromptTooLongError, ProviderError
from agent_tutorial.core.tools import ToolDefinition, ToolRegistry, ToolResult, tool_success
from agent_tutorial.features.builtin_tools import bash_tool, file_tools, search_tools
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply
from tests.conftest import TEST_API_KEY, MakeAdapter
from tests.loopback import LoopbackServer, Reply, cut_stream, delta_stream, text_stream


def run_tool(workspace: Path, name: str, **arguments: object) -> ToolResult:
    registry = ToolRegistry(
        [bash_tool(workspace), *file_tools(workspace), *search_tools(workspace)]
    )
    return registry.run(tool_call("call-1", name, orjson.dumps(arguments).decode()))


# --- built-in tools --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("glob", {"pattern": "[z-a]"}), ("grep", {"pattern": "x", "glob": "[z-a].py"})],
)
def test_a_glob_with_a_reversed_range_is_a_tool_error(
    workspace: Path, tool: str, arguments: dict[str, Any]
) -> None:
    (workspace / "a.py").write_text("x\n")

    result = run_tool(workspace, tool, **arguments)

    assert result.error_code == "invalid_glob"
    assert "[z-a]" in result.content


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("write_file", {"path": "locked.txt", "content": "new"}),
        ("edit_file", {"path": "locked.txt", "old_text": "keep", "new_text": "lose"}),
    ],
)
def test_a_read_only_file_is_never_overwritten(
    workspace: Path, tool: str, arguments: dict[str, Any]
) -> None:
    locked = workspace / "locked.txt"
    locked.write_text("keep me\n")
    locked.chmod(0o444)

    result = run_tool(workspace, tool, **arguments)

    assert result.error_code == "read_only"
    assert locked.read_text() == "keep me\n"
    assert stat.S_IMODE(locked.stat().st_mode) == 0o444


def test_write_file_replaces_a_file_whose_long_name_is_multibyte(workspace: Path) -> None:
    name = "é" * 125 + ".txt"  # 254 bytes: a valid name, too long to pad for the temp file
    (workspace / name).write_text("old")

    result = run_tool(workspace, "write_file", path=name, content="new")

    assert not result.is_error, result.content
    assert (workspace / name).read_text() == "new"
    assert sorted(path.name for path in workspace.iterdir()) == [name]


@pytest.mark.timeout(15)
def test_grep_skips_a_named_pipe_instead_of_waiting_on_it(workspace: Path) -> None:
    (workspace / "a.txt").write_text("needle\n")
    os.mkfifo(workspace / "pipe")

    result = run_tool(workspace, "grep", pattern="needle")

    assert result == ToolResult("a.txt:1:needle")


@pytest.mark.timeout(15)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_file", {"path": "pipe"}),
        ("edit_file", {"path": "pipe", "old_text": "a", "new_text": "b"}),
        ("grep", {"pattern": "a", "path": "pipe"}),
    ],
)
def test_a_named_pipe_is_refused_without_blocking(
    workspace: Path, tool: str, arguments: dict[str, Any]
) -> None:
    os.mkfifo(workspace / "pipe")

    result = run_tool(workspace, tool, **arguments)

    assert result.error_code == "not_a_regular_file"


def test_a_command_with_a_nul_byte_is_a_tool_error(workspace: Path) -> None:
    result = run_tool(workspace, "bash", command="echo a\x00b")

    assert result.error_code == "invalid_command"


# --- the loop ------------------------------------------------------------------------------


class _EchoInput(BaseModel):
    text: str


def _echo_registry() -> ToolRegistry:
    return ToolRegistry(
        [ToolDefinition("echo", "Echo.", _EchoInput, lambda arguments: tool_success("ok"))]
    )


class _InterruptedProcessor(FullContext):
    """A tool-result processor that is busy (writing artifacts) when Ctrl-C arrives."""

    def process_tool_results(self, results: Sequence[ToolResult]) -> Sequence[ToolResult]:
        raise KeyboardInterrupt


def test_ctrl_c_while_results_are_processed_keeps_history_paired() -> None:
    calls = [tool_call("c1", "echo", '{"text": "a"}'), tool_call("c2", "echo", '{"text": "b"}')]
    model = ScriptedModel([tool_reply(*calls), text_reply("still here")])
    runner = AgentRunner(model, _echo_registry(), context=_InterruptedProcessor())

    with pytest.raises(TurnInterrupted):
        runner.run("go")

    validate_tool_pairing(runner.history)
    assert runner.run("go on").final_text == "still here"


# --- messages ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool_calls",
    [5, [5], [{"id": "a", "function": 5}], "abc"],
)
def test_from_wire_rejects_malformed_tool_calls_with_a_value_error(tool_calls: object) -> None:
    with pytest.raises(ValueError, match="tool call"):
        from_wire({"role": "assistant", "content": None, "tool_calls": tool_calls})


# --- the OpenAI adapter ----------------------------------------------------------------------


@pytest.fixture
def model(make_adapter: MakeAdapter) -> OpenAIChatModel:
    return make_adapter()


def ask(on_text: Any = None) -> ModelRequest:
    return ModelRequest(messages=(user_message("hi"),), on_text=on_text)


def test_tool_arguments_sent_as_a_json_object_become_json_text(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    # llama.cpp (ggml-org/llama.cpp#20198) and TGI have sent `arguments` as an object.
    first = {"index": 0, "id": "call_1", "function": {"name": "glob", "arguments": {"a": 1}}}
    loopback.queue(delta_stream([{"tool_calls": [first]}], finish_reason="tool_calls"))

    reply = model.complete(ask())

    assert [(c.name, orjson.loads(c.arguments)) for c in reply.message.tool_calls] == [
        ("glob", {"a": 1})
    ]


@pytest.mark.parametrize("arguments", [5, True, 2.5])
def test_tool_arguments_that_are_neither_text_nor_an_object_arrive_as_their_json_text(
    loopback: LoopbackServer, model: OpenAIChatModel, arguments: object
) -> None:
    first = {"index": 0, "id": "call_1", "function": {"name": "glob", "arguments": arguments}}
    loopback.queue(delta_stream([{"tool_calls": [first]}], finish_reason="tool_calls"))

    reply = model.complete(ask())

    assert [c.arguments for c in reply.message.tool_calls] == [json.dumps(arguments)]


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    "event",
    [42, None, ["a"], {"choices": 5}, {"choices": [5]}, {"choices": [], "usage": 5}],
)
def test_a_malformed_stream_chunk_is_a_provider_error(
    loopback: LoopbackServer, model: OpenAIChatModel, event: Any
) -> None:
    loopback.queue(Reply(sse_events=[FINISH, event]))

    with pytest.raises(ProviderError, match="cannot read"):
        model.complete(ask())


def test_an_error_in_a_200_json_body_is_classified_and_sent_once(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    overflow = {"error": {"message": "This model's maximum context length is 8192 tokens"}}
    loopback.queue(Reply(json_body=overflow), Reply(json_body=overflow))

    with pytest.raises(PromptTooLongError, match="maximum context length"):
        model.complete(ask())
    assert len(loopback.requests) == 1


def test_a_json_reply_to_a_stream_request_is_a_clear_error_sent_once(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    message = {"role": "assistant", "content": "hello"}
    completion = {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}
    loopback.queue(Reply(json_body=completion), Reply(json_body=completion))

    with pytest.raises(ProviderError, match="not an event stream"):
        model.complete(ask())
    assert len(loopback.requests) == 1


def test_a_login_page_instead_of_a_stream_is_named_without_the_key(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    page = f"<html><body><h1>Sign in</h1><p>Bearer {TEST_API_KEY}</p></body></html>".encode()
    loopback.queue(Reply(raw_body=page))  # the loopback labels it application/json

    with pytest.raises(ProviderError, match="Sign in") as raised:
        model.complete(ask())
    assert TEST_API_KEY not in str(raised.value)
    assert len(loopback.requests) == 1


def test_a_retried_stream_does_not_show_the_cut_text_twice(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    shown: list[str] = []
    loopback.queue(cut_stream("a whole"), text_stream("a whole answer"))

    reply = model.complete(ask(shown.append))

    assert reply.message.content == "a whole answer"
    assert "".join(shown) == "a whole answer"


def test_a_usage_count_that_is_not_a_number_makes_the_usage_unknown_not_zero(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    usage = {"prompt_tokens": "12", "completion_tokens": 3, "total_tokens": None}
    loopback.queue(Reply(sse_events=[FINISH, {"choices": [], "usage": usage}]))

    assert model.complete(ask()).usage is None


def test_a_retry_that_answers_differently_starts_on_a_new_line(
    loopback: LoopbackServer, model: OpenAIChatModel
) -> None:
    shown: list[str] = []
    loopback.queue(cut_stream("half an ans"), text_stream("another answer"))

    model.complete(ask(shown.append))

    assert "".join(shown) == "half an ans\nanother answer"


# --- settings ------------------------------------------------------------------------------


def _state_file(workspace: Path, name: str, data: bytes) -> None:
    (workspace / ".agent_tutorial").mkdir(exist_ok=True)
    (workspace / ".agent_tutorial" / name).write_bytes(data)


def test_a_config_toml_that_is_not_utf8_is_a_config_error(workspace: Path) -> None:
    _state_file(workspace, "config.toml", b'model = "caf\xe9"\n')

    with pytest.raises(ConfigError, match=r"config\.toml"):
        load_settings(workspace)


def test_a_dotenv_that_is_not_utf8_is_a_config_error(workspace: Path) -> None:
    _state_file(workspace, ".env", b"OPENAI_MODEL=caf\xe9\n")

    with pytest.raises(ConfigError, match=r"\.env"):
        load_settings(workspace)


def test_an_unparsable_settings_table_in_the_environment_is_a_config_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_PERMISSIONS", "not json")

    with pytest.raises(ConfigError, match="permissions"):
        load_settings(workspace)


MALFORMED_BASE_URLS = ["http://[::1/v1", "localhost:8080/v1", "http://h:port/v1"]


@pytest.mark.parametrize("base_url", MALFORMED_BASE_URLS)
def test_a_malformed_base_url_flag_is_a_config_error_naming_the_flag(
    workspace: Path, base_url: str
) -> None:
    with pytest.raises(ConfigError, match=f"^--base-url '{re.escape(base_url)}' "):
        load_settings(workspace, {"base_url": base_url, "model": "m"})


@pytest.mark.parametrize("base_url", MALFORMED_BASE_URLS)
def test_a_malformed_base_url_variable_is_a_config_error_naming_the_variable(
    workspace: Path, base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)

    with pytest.raises(ConfigError, match=f"^OPENAI_BASE_URL '{re.escape(base_url)}' "):
        load_settings(workspace, {"model": "m"})


def test_the_demo_model_ignores_a_malformed_base_url(workspace: Path) -> None:
    settings = load_settings(workspace, {"base_url": "http://[::1/v1", "model": "demo"})

    assert settings.is_demo


# --- the command line ----------------------------------------------------------------------


DEMO_RUN = [sys.executable, "-m", "agent_tutorial", "run", "--chapter", "1", "--model", "demo"]


def _cli(workspace: Path, *args: str | bytes, stdin: bytes = b"") -> Any:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENT_"))}
    return subprocess.run(
        [*DEMO_RUN, *args],
        cwd=workspace,
        input=stdin,
        capture_output=True,
        env=environment,
        timeout=60,
        check=False,
    )


def test_a_prompt_on_stdin_that_is_not_utf8_is_a_usage_error(workspace: Path) -> None:
    done = _cli(workspace, stdin=b"summarise caf\xe9 menu\n")

    assert done.returncode == 2
    assert b"UTF-8" in done.stderr
    assert b"Traceback" not in done.stderr


def test_a_prompt_argument_that_is_not_utf8_is_a_usage_error(workspace: Path) -> None:
    done = _cli(workspace, "--prompt", b"caf\xe9")

    assert done.returncode == 2
    assert b"UTF-8" in done.stderr


def test_a_run_with_stdin_closed_uses_its_prompt(workspace: Path) -> None:
    done = subprocess.run(
        ["bash", "-c", 'exec 0<&-; exec "$@"', "bash", *DEMO_RUN, "--prompt", "hi"],
        cwd=workspace,
        capture_output=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr.decode()
    assert b"not an LLM" in done.stdout
