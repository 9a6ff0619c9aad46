"""The loop's secret and size rules: results are redacted right after the tool returns
(before guards, events and history), spooled outputs are closed once a batch is recorded,
and tool arguments over the registry's cap are refused and shortened in history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from pydantic import BaseModel

from agent_tutorial.bootstrap import secret_redactor
from agent_tutorial.config import load_settings, read_project_settings
from agent_tutorial.core.events import EventBus, MessageAppended, ToolFinished
from agent_tutorial.core.loop import AgentRunner
from agent_tutorial.core.messages import (
    AssistantMessage,
    ToolMessage,
    assistant_message,
    tool_call,
)
from agent_tutorial.core.tools import (
    ParsedCall,
    ToolDefinition,
    ToolRegistry,
    ToolResult,
    shorten_oversized_arguments,
    tool_success,
)
from agent_tutorial.features.redaction import Redactor
from agent_tutorial.testing import ScriptedModel, text_reply, tool_reply
from tests.event_log import EventLog

SECRET = "correct-horse-battery-staple"


class TextInput(BaseModel):
    text: str = ""


class SpyOutput:
    """A `WholeOutput` that records whether it was closed."""

    total_bytes = 5
    closed = False

    def chunks(self) -> Iterator[bytes]:
        yield b"whole"

    def close(self) -> None:
        self.closed = True


class SeenByGuard:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_call(self, parsed: ParsedCall) -> ParsedCall | ToolResult:
        return parsed

    def after_call(self, parsed: ParsedCall, result: ToolResult) -> ToolResult:
        self.seen.append(result.content)
        return result


def leaky_tool(output: SpyOutput | None = None) -> ToolDefinition:
    def run(arguments: TextInput) -> ToolResult:
        return replace(tool_success(f"password is {SECRET}"), whole_output=output)

    return ToolDefinition("leak", "Prints a secret.", TextInput, run)


def test_hooks_events_and_history_see_only_the_redacted_result() -> None:
    guard, log = SeenByGuard(), EventLog()
    agent = AgentRunner(
        ScriptedModel([tool_reply(tool_call("c1", "leak", "{}")), text_reply("done")]),
        ToolRegistry([leaky_tool()]),
        redaction=Redactor({SECRET: "DB_PASSWORD"}),
        guards=[guard],
        events=EventBus([log]),
    )

    agent.run("go")

    masked = "password is [REDACTED:DB_PASSWORD]"
    assert guard.seen == [masked]
    [finished] = [event for event in log.events if isinstance(event, ToolFinished)]
    assert (finished.result.content, finished.result.redactions) == (masked, 1)
    appended = [e.message for e in log.events if isinstance(e, MessageAppended)]
    assert [m.content for m in appended if isinstance(m, ToolMessage)] == [masked]
    assert SECRET not in json.dumps([str(m) for m in agent.history])


def test_a_spooled_output_is_closed_once_the_batch_is_recorded() -> None:
    output = SpyOutput()
    agent = AgentRunner(
        ScriptedModel([tool_reply(tool_call("c1", "leak", "{}")), text_reply("done")]),
        ToolRegistry([leaky_tool(output)]),
    )

    agent.run("go")

    assert output.closed


def test_arguments_over_the_cap_are_refused_and_shortened_in_history() -> None:
    ran: list[str] = []

    def remember(arguments: TextInput) -> ToolResult:
        ran.append(arguments.text)
        return tool_success("ok")

    tools = ToolRegistry(
        [ToolDefinition("note", "Notes text.", TextInput, remember)], max_argument_bytes=1000
    )
    big = json.dumps({"text": "y" * 5000})
    model = ScriptedModel([tool_reply(tool_call("c1", "note", big)), text_reply("done")])
    agent = AgentRunner(model, tools)

    agent.run("go")

    assert ran == []
    call = next(m for m in agent.history if isinstance(m, AssistantMessage)).tool_calls[0]
    assert orjson.loads(call.arguments) == {
        "text": f"[omitted: {len(big)} bytes of arguments, over the 1000-byte cap]"
    }
    result = next(m for m in agent.history if isinstance(m, ToolMessage))
    assert result.content.startswith("Error [arguments_too_large]: the arguments are 5012 bytes")


def test_shortening_replaces_the_largest_values_first_and_keeps_the_rest() -> None:
    arguments = json.dumps({"path": "a.txt", "old_text": "o" * 600, "new_text": "n" * 900})
    message = assistant_message(None, [tool_call("c1", "edit_file", arguments)])

    shortened = shorten_oversized_arguments(message, 1000)

    values = orjson.loads(shortened.tool_calls[0].arguments)
    assert values["path"] == "a.txt"
    assert values["old_text"] == "o" * 600
    assert values["new_text"].startswith("[omitted: ")


@pytest.mark.parametrize("arguments", ['{"text": "' + "z" * 3000, json.dumps(["z" * 3000])])
def test_arguments_that_are_not_an_object_become_one_note(arguments: str) -> None:
    message = assistant_message(None, [tool_call("c1", "note", arguments)])

    shortened = shorten_oversized_arguments(message, 1000)

    assert list(orjson.loads(shortened.tool_calls[0].arguments)) == ["omitted"]


def test_a_message_within_the_cap_is_returned_as_it_is() -> None:
    message = assistant_message(None, [tool_call("c1", "note", '{"text": "small"}')])

    assert shorten_oversized_arguments(message, 1000) is message


def test_the_agent_masks_its_key_and_secret_variables_but_not_public_values(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROJECT_SECRET_DIR", str(workspace))  # already in the system prompt
    monkeypatch.setenv("SERVICE_TOKEN", "service-token-value")
    settings = load_settings(
        workspace, {"api_key": "key-in-use-123", "base_url": "http://127.0.0.1:9/v1"}
    )

    redactor = secret_redactor(settings, workspace, {})

    text = f"{workspace} key-in-use-123 service-token-value http://127.0.0.1:9/v1"
    assert redactor.redact(text).text == (
        f"{workspace} [REDACTED:OPENAI_API_KEY] [REDACTED:SERVICE_TOKEN] http://127.0.0.1:9/v1"
    )


def test_a_dotenv_key_with_a_trailing_comment_is_sent_and_masked_as_the_same_value(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    state = workspace / ".agent_tutorial"
    state.mkdir(exist_ok=True)
    (state / "config.toml").write_text('api_key_env = "DEEPSEEK_API_KEY"\n', encoding="utf-8")
    (state / ".env").write_text(
        "DEEPSEEK_API_KEY=sk-deepseek-0123456789abcdef # the team key\n", encoding="utf-8"
    )
    settings = load_settings(workspace, {"base_url": "http://127.0.0.1:9/v1"}, trusted=True)

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-deepseek-0123456789abcdef"
    redactor = secret_redactor(settings, workspace, read_project_settings(workspace).dotenv_lines)
    assert redactor.redact("sk-deepseek-0123456789abcdef").text == "[REDACTED:DEEPSEEK_API_KEY]"
