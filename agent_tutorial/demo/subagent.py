"""The child run of the demo's own `task` call: it recognises its prompt by
`SUBAGENT_MARKER`, reads the head of the one file named there, and answers in a sentence."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    ToolMessage,
    UserMessage,
    assistant_message,
    is_project_context,
    tool_call,
)
from agent_tutorial.core.model import ModelRequest
from agent_tutorial.demo.script import DEMO_BANNER, SUBAGENT_MARKER
from agent_tutorial.demo.text import is_tool_error, output_lines, to_json


def subagent_prompt(messages: Sequence[ChatMessage]) -> str | None:
    """The run's first prompt if it is one the demo's `task` call wrote, else None."""
    prompts = (m for m in messages if isinstance(m, UserMessage) and not is_project_context(m))
    first_prompt = next((m.content for m in prompts), None)
    if first_prompt is not None and first_prompt.startswith(SUBAGENT_MARKER):
        return first_prompt
    return None


def subagent_reply(
    task_prompt: str, request: ModelRequest, next_call_id: Callable[[], str]
) -> AssistantMessage:
    """Read the file the prompt names, then report on it once the result is back."""
    path = _quoted_path(task_prompt)
    results = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    if results:
        return assistant_message(_subagent_report(path, results[-1]))
    offered = {spec.name for spec in request.tools}
    if "read_file" in offered:
        arguments: dict[str, object] = {"path": path, "limit": 20}
        call = tool_call(next_call_id(), "read_file", to_json(arguments))
    elif "bash" in offered:
        command = f"head -n 20 -- {shlex.quote(path)}"
        call = tool_call(next_call_id(), "bash", to_json({"command": command}))
    else:
        return assistant_message(f"{DEMO_BANNER} Subagent: no tool to read `{path}` with.")
    return assistant_message(f"{DEMO_BANNER} Subagent: reading `{path}`.", [call])


def _quoted_path(task_prompt: str) -> str:
    found = re.search(r"`([^`]+)`", task_prompt)
    return found[1] if found else "."


def _subagent_report(path: str, result: str) -> str:
    if is_tool_error(result):
        return f"{DEMO_BANNER} Could not read `{path}`: {result.splitlines()[0]}"
    lines = [line.split("\t", 1)[-1].strip() for line in output_lines(result)]
    opening = next((text for line in lines if (text := line.strip("\"'# "))), "")
    return f"{DEMO_BANNER} Read {len(lines)} lines of `{path}`; it opens with: {opening[:100]}"
