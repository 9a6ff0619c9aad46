# Lesson 1 of 8: the agent loop and one tool, bash.
# Every lesson repeats the one before it on purpose, so that `make lesson-diff A=1 B=2`
# (diff -u chapters/ch01.py chapters/ch02.py) shows exactly what the next chapter adds.
"""A coding agent in one file: ask the model, run the tools it asks for, repeat.
Standard library plus the `openai` SDK only; the full version is the `agent_tutorial` package."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
from openai.types.chat import ChatCompletion

Message = dict[str, Any]  # one chat message in the wire shape the endpoint receives

MAX_TURNS = 100  # model requests per prompt before the loop gives up (the package default)
MAX_OUTPUT_TOKENS = 8_192  # every request carries an output cap
BASH_TIMEOUT_S = 120
OUTPUT_KEEP_CHARS = 20_000  # bash keeps this much from the start and from the end

SYSTEM_PROMPT = """\
You are a coding agent working in the user's project at {workspace}.
Use the tools to inspect the project before you answer; never guess file contents.
Keep answers short and concrete. When you are done, answer without calling a tool."""

BASH_SPEC = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the project directory; returns its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


class AgentError(Exception):
    """The run cannot finish (too many turns, a cut-off reply); main prints one line."""


def run_bash(command: str) -> str:
    """Run `command` with no stdin; a non-zero exit is information for the model, not an error."""
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=BASH_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return f"Error [timeout]: the command ran longer than {BASH_TIMEOUT_S} s"
    output = done.stdout + done.stderr
    if len(output) > 2 * OUTPUT_KEEP_CHARS:  # keep the start and the end
        middle = f"\n[... {len(output) - 2 * OUTPUT_KEEP_CHARS} characters left out ...]\n"
        output = output[:OUTPUT_KEEP_CHARS] + middle + output[-OUTPUT_KEEP_CHARS:]
    return f"{output}\n[exit code {done.returncode}]"


def call_tool(name: str, arguments: str) -> str:
    """The tool's result text; a bad call becomes an error the model can read, never a crash."""
    if name != "bash":
        return f"Error [unknown_tool]: there is no tool named {name!r}; available: bash"
    try:
        command = json.loads(arguments)["command"]
    except (json.JSONDecodeError, TypeError, KeyError):
        return 'Error [invalid_arguments]: bash needs a JSON object like {"command": "ls"}'
    return run_bash(str(command))


def ask_model(client: openai.OpenAI, model: str, messages: list[Message]) -> Message:
    """One request; returns the assistant message as it goes into the history."""
    request: dict[str, Any] = {"model": model, "messages": messages}
    # Send tool_choice with the tools (some servers hide tools without it) and an output cap.
    request |= {"tools": [BASH_SPEC], "tool_choice": "auto", "max_tokens": MAX_OUTPUT_TOKENS}
    response: ChatCompletion = client.chat.completions.create(**request)
    choice = response.choices[0]
    if choice.finish_reason == "length":
        raise AgentError(f"the reply was cut off at the {MAX_OUTPUT_TOKENS}-token output cap")
    # An assistant message that only calls tools goes back with "" as its text, not null.
    message: Message = {"role": "assistant", "content": choice.message.content or ""}
    if calls := choice.message.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in calls
            if call.type == "function"
        ]
    return message


def run_agent(client: openai.OpenAI, model: str, prompt: str) -> str:
    """The loop: every tool call is answered by one tool message before the next request."""
    system = {"role": "system", "content": SYSTEM_PROMPT.format(workspace=Path.cwd())}
    history: list[Message] = [{"role": "user", "content": prompt}]
    for _ in range(MAX_TURNS):
        reply = ask_model(client, model, [system, *history])
        history.append(reply)
        if "tool_calls" not in reply:
            return str(reply["content"])
        for call in reply["tool_calls"]:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            result = call_tool(name, arguments)
            print(f"• {name} {arguments[:80]}  ({len(result)} chars)", file=sys.stderr)
            history.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise AgentError(f"the model did not finish within {MAX_TURNS} turns")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Chapter 1 lesson: the loop and bash.")
    parser.add_argument("-p", "--prompt", required=True, help="what to ask the agent")
    options = parser.parse_args(argv)
    model = os.environ.get("AGENT_TUTORIAL_MODEL") or os.environ.get("OPENAI_MODEL")
    base_url, api_key = os.environ.get("OPENAI_BASE_URL"), os.environ.get("OPENAI_API_KEY")
    if not model:
        print("error: no model: set OPENAI_MODEL (or AGENT_TUTORIAL_MODEL)", file=sys.stderr)
        return 2
    if not base_url and not api_key:
        print("error: no endpoint: set OPENAI_BASE_URL and OPENAI_API_KEY", file=sys.stderr)
        return 2
    client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed")
    try:
        print(run_agent(client, model, options.prompt))
    except openai.APIError as error:  # the endpoint's error, one line, no traceback
        print(f"error: the model request failed: {error}", file=sys.stderr)
        return 1
    except AgentError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, no traceback
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
