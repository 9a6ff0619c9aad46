"""This lesson: the agent loop and one tool, bash.
One file, the standard library and openai; each lesson is the previous plus one idea."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
from openai.types.chat import ChatCompletion

Message = dict[str, Any]  # one chat message in the wire shape the endpoint receives
CALL_FIELDS = {"id", "type", "function"}  # a tool call, as the endpoint wants it back

CHAPTER = 1
MAX_TURNS = 100  # model requests per prompt before the loop gives up (the package default)
OUTPUT_CAP = {"max_tokens": 2_048}  # --max-tokens sets it; 2,048 fits an 8k-token window
BASH_TIMEOUT_S = 120
OUTPUT_KEEP_CHARS = 20_000  # bash keeps this much from the start and from the end
SECRET_NAME = re.compile("KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL", re.IGNORECASE)  # kept from bash

SYSTEM_PROMPT = """\
You are a coding agent working in the user's project at {workspace}.
Use the tools to inspect the project before you answer; never guess file contents.
Keep answers short and concrete. When you are done, answer without calling a tool."""

COMMAND = {"command": {"type": "string"}}
BASH_SPEC = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the project directory; returns its output.",
        "parameters": {"type": "object", "properties": COMMAND, "required": ["command"]},
    },
}


class AgentError(Exception):
    """The run cannot finish (too many turns, a cut-off reply); main prints one line."""


def run_bash(arguments: str) -> str:
    """Run the call's command with no stdin and no variable that looks secret (`env` must not
    show the model your API key); a bad call or a non-zero exit is news for the model."""
    try:
        command = str(json.loads(arguments)["command"])
    except (json.JSONDecodeError, TypeError, KeyError):
        return 'Error [invalid_arguments]: bash needs a JSON object like {"command": "ls"}'
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=BASH_TIMEOUT_S,
            env={name: value for name, value in os.environ.items() if not SECRET_NAME.search(name)},
        )
    except subprocess.TimeoutExpired:
        return f"Error [timeout]: the command ran longer than {BASH_TIMEOUT_S} s"
    output = done.stdout + done.stderr
    if len(output) > 2 * OUTPUT_KEEP_CHARS:  # keep the start and the end
        middle = f"\n[... {len(output) - 2 * OUTPUT_KEEP_CHARS} characters left out ...]\n"
        output = output[:OUTPUT_KEEP_CHARS] + middle + output[-OUTPUT_KEEP_CHARS:]
    return f"{output}\n[exit code {done.returncode}]"


def trace(request: Any) -> None:
    """--trace: one stderr line per HTTP request as sent: its bytes, roles and tool names."""
    body = json.loads(request.content or b"{}")
    roles = " ".join(message["role"] for message in body.get("messages", []))
    tools = " ".join(spec["function"]["name"] for spec in body.get("tools", []))
    print(f"⇢ {len(request.content):,} B: {roles}; tools: {tools or 'none'}", file=sys.stderr)


def ask_model(client: openai.OpenAI, model: str, messages: list[Message]) -> Message:
    """One request; returns the assistant message as it goes into the history."""
    request: dict[str, Any] = {"model": model, "messages": messages}
    # Send tool_choice with the tools (some servers hide tools without it) and an output cap.
    request |= {"tools": [BASH_SPEC], "tool_choice": "auto", **OUTPUT_CAP}
    response: ChatCompletion = client.chat.completions.create(**request)
    choice = response.choices[0]
    if choice.finish_reason == "length":
        raise AgentError(f"the reply was cut off at {OUTPUT_CAP['max_tokens']} output tokens")
    calls = [call.model_dump(include=CALL_FIELDS) for call in choice.message.tool_calls or []]
    message: Message = {"role": "assistant", "content": choice.message.content or ""}  # not null
    return {**message, "tool_calls": calls} if calls else message  # never an empty list


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
            result = run_bash(arguments) if name == "bash" else f"Error [unknown_tool]: {name!r}"
            print(f"• {name} {arguments[:80]}  ({len(result)} chars)", file=sys.stderr)
            history.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise AgentError(f"the model did not finish within {MAX_TURNS} turns")


def endpoint(env_file: Path = Path(".agent_tutorial/.env")) -> tuple[str | None, ...]:
    """Model, base URL and key from the environment, else `.agent_tutorial/.env` (not its URL)."""
    lines = env_file.read_text().splitlines() if env_file.is_file() else []
    pairs = [line.removeprefix("export ").split("=", 1) for line in lines if "=" in line]
    settings = {name.strip(): value.strip().strip("\"'") for name, value in pairs}
    if os.environ.get("OPENAI_API_KEY"):
        settings.pop("OPENAI_BASE_URL", None)
    settings |= {name: value for name, value in os.environ.items() if value}
    model = settings.get("AGENT_TUTORIAL_MODEL") or settings.get("OPENAI_MODEL")
    return model, settings.get("OPENAI_BASE_URL"), settings.get("OPENAI_API_KEY")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Lesson {CHAPTER}: {__doc__}")
    parser.add_argument("-p", "--prompt", required=True, help="what to ask the agent")
    parser.add_argument("--trace", action="store_true", help="one line per request on stderr")
    parser.add_argument("--max-tokens", type=int, default=os.getenv("LESSON_MAX_TOKENS", "2048"))
    options = parser.parse_args(argv)
    OUTPUT_CAP["max_tokens"] = options.max_tokens  # every request carries this output cap
    model, base_url, api_key = endpoint()
    if not model or not (base_url or api_key):
        print("error: no model or endpoint: set OPENAI_MODEL and OPENAI_API_KEY", file=sys.stderr)
        return 2
    http = openai.DefaultHttpxClient(event_hooks={"request": [trace] if options.trace else []})
    client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", http_client=http)
    try:
        print(run_agent(client, model, options.prompt))
    except (openai.APIError, AgentError) as error:  # the endpoint's or the loop's: one line
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, no traceback
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
