"""This lesson: command hooks; a PreToolUse hook that exits 2 blocks the call.
One file, the standard library and openai; each lesson is the previous plus one idea."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
from openai.types.chat import ChatCompletion

Message = dict[str, Any]  # one chat message in the wire shape the endpoint receives
Handler = Callable[[dict[str, Any]], str]  # a tool: checked arguments in, result text out
CALL_FIELDS = {"id", "type", "function"}  # a tool call, as the endpoint wants it back

CHAPTER = 4
MAX_TURNS = 100  # model requests per prompt before the loop gives up (the package default)
OUTPUT_CAP = {"max_tokens": 2_048}  # --max-tokens sets it; 2,048 fits an 8k-token window
BASH_TIMEOUT_S = 120
OUTPUT_KEEP_CHARS = 20_000  # bash keeps this much from the start and from the end
SECRET_NAME = re.compile("KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL", re.IGNORECASE)  # kept from bash
WORKSPACE = Path.cwd().resolve()  # the file tools never reach outside this directory
STATE_DIR = WORKSPACE / ".agent_tutorial"  # the agent's settings and keys: tools stay out
SKIP_DIRS = {".git", ".venv", "node_modules", ".agent_tutorial", "__pycache__"}
READ_LIMIT_LINES = 2_000
MAX_GLOB_RESULTS = 500
MAX_GREP_MATCHES = 200
JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool}
TEXT_CALL = re.compile(r"\s*(?:```(?:json)?\s*(\{.*\})\s*```|(\{.*\}))\s*", re.DOTALL)
CONFIG_FILE = STATE_DIR / "config.toml"
CONFIG: dict[str, Any] = {}  # the config file's tables; main reads it once
EFFECTS = {"bash": "execute", "write_file": "write", "edit_file": "write"}  # the rest only read
MODE_DEFAULTS = {  # --permission-mode: what each mode does with each effect
    "ask": {"read": "allow", "write": "ask", "execute": "ask"},
    "accept-edits": {"read": "allow", "write": "allow", "execute": "ask"},
    "auto": {"read": "allow", "write": "allow", "execute": "allow"},
}
STRICTNESS = ("allow", "ask", "deny")  # of the rules that match, the strictest wins
CHAINING = re.compile(r"[;&|<>`\n]|\$\(")  # an allow rule never covers a chained command
HOOK_TIMEOUT_S = 30  # a hook's default time limit, as in the package

SYSTEM_PROMPT = """\
You are a coding agent working in the user's project at {workspace}.
Use the tools to inspect the project before you answer; never guess file contents.
Keep answers short and concrete. When you are done, answer without calling a tool."""

TOOLS: dict[str, tuple[dict[str, Any], Handler]] = {}  # name -> (spec for the model, handler)


def tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> Callable[[Handler], Handler]:
    """Register a handler under `name` with the JSON schema the model sees."""
    parameters = {"type": "object", "properties": properties, "required": required}
    spec = {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }

    def register(handler: Handler) -> Handler:
        TOOLS[name] = (spec, handler)
        return handler

    return register


class AgentError(Exception):
    """The run cannot finish (too many turns, a cut-off reply); main prints one line."""


class ToolError(Exception):
    """A call the tool refuses; the model reads `Error [code]: message` and can try again."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@tool(
    "bash",
    "Run a bash command in the project directory.",
    {"command": {"type": "string"}},
    ["command"],
)
def run_bash(arguments: dict[str, Any]) -> str:
    """Run the command with no stdin and no variable that looks secret (`env` must not show
    the model your API key); a non-zero exit is information for the model."""
    try:
        done = subprocess.run(
            ["bash", "-c", arguments["command"]],
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


def inside(path: str) -> Path:
    """`path` with every symlink resolved, if it stays inside the workspace. (The package walks
    open directory descriptors instead, so a symlink swapped in after this check cannot win.)"""
    try:
        resolved = (WORKSPACE / path).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop, an unreadable directory
        raise ToolError("io_error", f"cannot resolve {path}: {error}") from error
    if not resolved.is_relative_to(WORKSPACE):
        raise ToolError("path_outside_workspace", f"{path} is outside the workspace {WORKSPACE}")
    state = STATE_DIR.resolve()  # compared by real path, so no symlink leads in
    if resolved.is_relative_to(state):
        raise ToolError("protected_path", f"{path}: the agent's own settings and keys are closed")
    return resolved


def replace_file(target: Path, content: str) -> None:
    """Write a temporary file next to `target`, flush it to disk, then rename it over: never a
    half-written file. A file replaced keeps its mode; a new one gets the umask's default."""
    if ".git" in (part.lower() for part in target.relative_to(WORKSPACE).parts):  # real path
        raise ToolError("protected_path", f"{target.relative_to(WORKSPACE)}: no tool writes .git/")
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with temp.open("x", encoding="utf-8") as file:  # "x": a new file, so the umask applies
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        if target.exists():
            temp.chmod(target.stat().st_mode & 0o7777)
        temp.replace(target)
    finally:
        temp.unlink(missing_ok=True)  # left only by a failure: the rename took it


@tool(
    "read_file",
    "Read a text file; numbered lines from `offset` (1-based), at most `limit` lines.",
    {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
    ["path"],
)
def read_file(arguments: dict[str, Any]) -> str:
    target = inside(arguments["path"])
    offset, limit = max(1, arguments.get("offset", 1)), arguments.get("limit", READ_LIMIT_LINES)
    if target.is_dir():
        raise ToolError("is_a_directory", f"{arguments['path']} is a directory; use glob")
    data = target.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError("binary_file", f"{arguments['path']} looks binary")
    lines = data.decode(errors="replace").splitlines()
    if lines and offset > len(lines):
        past = f"offset {offset} is past the end of {arguments['path']} ({len(lines)} lines)"
        raise ToolError("offset_past_end", past)
    shown = lines[offset - 1 : offset - 1 + max(1, limit)]
    text = "\n".join(f"{number:6}\t{line}" for number, line in enumerate(shown, start=offset))
    if offset - 1 + len(shown) < len(lines):
        text += f"\n[{len(lines)} lines in all; read on with offset={offset + len(shown)}]"
    return text or f"({arguments['path']} is empty)"


@tool(
    "write_file",
    "Create or overwrite a text file (parent directories are created).",
    {"path": {"type": "string"}, "content": {"type": "string"}},
    ["path", "content"],
)
def write_file(arguments: dict[str, Any]) -> str:
    replace_file(inside(arguments["path"]), arguments["content"])
    return f"Wrote {len(arguments['content'].encode())} bytes to {arguments['path']}"


@tool(
    "edit_file",
    "Replace old_text, which must match exactly once (or every match with replace_all).",
    {
        "path": {"type": "string"},
        "old_text": {"type": "string"},
        "new_text": {"type": "string"},
        "replace_all": {"type": "boolean"},
    },
    ["path", "old_text", "new_text"],
)
def edit_file(arguments: dict[str, Any]) -> str:
    target, old, new = inside(arguments["path"]), arguments["old_text"], arguments["new_text"]
    text = target.read_text(encoding="utf-8")
    count = text.count(old) if old else 0
    if count == 0:
        raise ToolError("no_match", f"old_text does not occur in {arguments['path']}")
    if count > 1 and not arguments.get("replace_all", False):
        raise ToolError("ambiguous_match", f"old_text matches {count} times; add context")
    replace_file(target, text.replace(old, new) if count > 1 else text.replace(old, new, 1))
    return f"Replaced {count} occurrence(s) in {arguments['path']}"


def visible_files(base: Path, pattern: str) -> Iterator[Path]:
    """Paths under `base` matching `pattern`, inside the workspace, outside SKIP_DIRS."""
    try:
        matches = sorted(base.glob(pattern)) if base.is_dir() else [base]
    except ValueError as error:  # an absolute or empty pattern
        raise ToolError("invalid_arguments", f"pattern: {error}") from error
    for path in matches:
        relative = path.relative_to(WORKSPACE) if path.is_relative_to(WORKSPACE) else None
        if relative is None or SKIP_DIRS & set(relative.parts):
            continue
        try:
            inside(str(relative))  # a symlink out, or into .agent_tutorial/, is not followed
        except ToolError:
            continue
        yield path


@tool(
    "glob",
    "Find files by glob pattern (like **/*.py), relative to `path` (default: the project).",
    {"pattern": {"type": "string"}, "path": {"type": "string"}},
    ["pattern"],
)
def glob_files(arguments: dict[str, Any]) -> str:
    base = inside(arguments.get("path", "."))
    found = [p.relative_to(WORKSPACE).as_posix() for p in visible_files(base, arguments["pattern"])]
    more = (
        f"\n[{len(found) - MAX_GLOB_RESULTS} more not shown]"
        if len(found) > MAX_GLOB_RESULTS
        else ""
    )
    return "\n".join(found[:MAX_GLOB_RESULTS]) + more if found else "No files match."


@tool(
    "grep",
    "Search file contents with a Python regex; prints path:line:text. `glob` picks the files: "
    '"*.py" matches names at any depth, "src/*.py" paths below `path`.',
    {"pattern": {"type": "string"}, "path": {"type": "string"}, "glob": {"type": "string"}},
    ["pattern"],
)
def grep(arguments: dict[str, Any]) -> str:
    try:
        regex = re.compile(arguments["pattern"])
    except re.error as error:
        raise ToolError("invalid_regex", f"pattern: {error}") from error
    matches: list[str] = []
    base, wanted = inside(arguments.get("path", ".")), arguments.get("glob", "*")
    for path in visible_files(base, "**/*"):
        name = path.relative_to(base).as_posix() if "/" in wanted else path.name
        if len(matches) >= MAX_GREP_MATCHES or not path.is_file():
            continue
        if not fnmatch.fnmatch(name, wanted):
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
            if regex.search(line) and len(matches) < MAX_GREP_MATCHES:
                matches.append(f"{path.relative_to(WORKSPACE).as_posix()}:{number}:{line[:300]}")
    return "\n".join(matches) or "No matches."


def check_arguments(spec: dict[str, Any], arguments: object) -> dict[str, Any]:
    """The arguments, if they are an object with every required key and the declared types."""
    if not isinstance(arguments, dict):
        raise ToolError("invalid_arguments", "the arguments must be a JSON object")
    parameters = spec["function"]["parameters"]
    for key in parameters["required"]:
        if key not in arguments:
            raise ToolError("invalid_arguments", f"{key}: Field required")
    for key, value in arguments.items():
        declared = parameters["properties"].get(key)
        if declared is None:
            raise ToolError("invalid_arguments", f"{key}: unexpected argument")
        expected = JSON_TYPES.get(declared["type"], object)
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is int):
            raise ToolError("invalid_arguments", f"{key}: expected {declared['type']}")
    return arguments


def hard_boundary(name: str, arguments: dict[str, Any]) -> str | None:
    """Why this write is denied whatever the mode, rules or user say; None if it is not."""
    if EFFECTS.get(name) != "write":
        return None
    try:
        target = inside(arguments["path"])
    except ToolError as error:  # outside the workspace, or the path cannot be examined
        return str(error)
    # The agent must never rewrite git's hooks or its own settings; compared by real path.
    if ".git" in target.parts or target.is_relative_to(CONFIG_FILE.parent.resolve()):
        return f"{arguments['path']} is in .git/ or .agent_tutorial/, where no write is allowed"
    return None


def subject(arguments: dict[str, Any]) -> str:
    """What a rule's pattern is searched in: the bash command, or the path."""
    return str(arguments.get("command", arguments.get("path", "")))


def rule_decision(name: str, arguments: dict[str, Any]) -> str | None:
    """The strictest of the user's `[[permissions.rules]]` that match this call, or None."""
    found = []
    for rule in CONFIG.get("permissions", {}).get("rules", []):
        if rule.get("tool", "*") not in (name, "*") or not re.search(
            rule["pattern"], subject(arguments)
        ):
            continue
        if rule["behavior"] == "allow" and name == "bash" and CHAINING.search(subject(arguments)):
            continue  # `^git status` must not allow `git status; rm -rf ~`
        found.append(rule["behavior"])
    return max(found, key=STRICTNESS.index) if found else None


def decide(name: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """allow, ask or deny, and why: hard boundaries, then your rules, then the mode's default."""
    boundary = hard_boundary(name, arguments)
    if boundary is not None:
        return "deny", f"boundary: {boundary}"
    ruled = rule_decision(name, arguments)
    if ruled is not None:
        return ruled, f"{ruled} by a rule in {CONFIG_FILE.name}"
    mode, effect = CONFIG["permission_mode"], EFFECTS.get(name, "read")
    return MODE_DEFAULTS[mode][effect], f"{effect} tools need approval in permission mode {mode!r}"


def ask_user(name: str, arguments: dict[str, Any], reason: str) -> tuple[str, str]:
    """The user's answer on the terminal; without a terminal, ask means deny."""
    if not sys.stdin.isatty():
        mode = "accept-edits" if EFFECTS.get(name) == "write" else "auto"
        return "deny", (
            f"no terminal: {name} needs the user's approval ({reason}), but there is no "
            f"terminal to ask on, so it was denied. The user must re-run with "
            f"--permission-mode {mode} (or add an allow rule) to permit it."
        )
    print(f"{name} wants to run: {subject(arguments)}\nAllow? [y/N] ", end="", file=sys.stderr)
    yes = sys.stdin.readline().strip().lower() in ("y", "yes")
    return ("allow", "the user said yes") if yes else ("deny", "the user said no")


def matcher_regex(hook: dict[str, Any]) -> str:
    """A hook's matcher must match the whole tool name; "*" or none matches every tool."""
    matcher = str(hook.get("matcher", "*"))
    return ".*" if matcher == "*" else matcher


def run_pre_tool_hooks(name: str, arguments: dict[str, Any]) -> None:
    """Run each `[[hooks.PreToolUse]]` command whose matcher fits the tool. The hook reads the
    call as JSON on stdin; exit 0 lets it go on, exit 2 blocks it (stderr is the reason)."""
    event: dict[str, Any] = {"event": "PreToolUse", "workspace": str(WORKSPACE)}
    event |= {"tool_name": name, "tool_input": arguments}
    for hook in CONFIG.get("hooks", {}).get("PreToolUse", []):
        if not re.fullmatch(matcher_regex(hook), name):
            continue
        try:
            done = subprocess.run(
                ["bash", "-c", hook["command"]],
                input=json.dumps(event),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=hook.get("timeout_s", HOOK_TIMEOUT_S),
            )
        except subprocess.TimeoutExpired as error:
            raise ToolError(
                "hook_execution_error", f"the hook ran over {error.timeout} s"
            ) from error
        reason = done.stderr.strip()[:2_000]
        print(f"⚓ PreToolUse {hook['command'][:60]} → exit {done.returncode}", file=sys.stderr)
        if done.returncode == 2:
            raise ToolError("hook_blocked", f"blocked by a PreToolUse hook: {reason}")
        if done.returncode != 0:  # a broken hook never lets a call through
            raise ToolError("hook_execution_error", f"exit {done.returncode}: {reason}")


def authorize(name: str, arguments: dict[str, Any]) -> None:
    """Let the call run, or raise `permission_denied` with the reason the model will read."""
    decision, reason = decide(name, arguments)
    if decision == "ask":
        decision, reason = ask_user(name, arguments, reason)
    if decision != "allow":
        print(f"⚖ deny {name} {subject(arguments)[:80]}  ({reason})", file=sys.stderr)
        raise ToolError("permission_denied", reason)


def call_tool(name: str, arguments: str) -> str:
    """The tool's result text; a bad call becomes an error the model can read, never a crash."""
    if name not in TOOLS:
        return f"Error [unknown_tool]: no tool named {name!r}; available: {', '.join(TOOLS)}"
    spec, handler = TOOLS[name]
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as error:
        return f"Error [invalid_json]: {error}"
    try:
        checked = check_arguments(spec, parsed)
        run_pre_tool_hooks(name, checked)  # your code first; it can only add a "no"
        authorize(name, checked)
        return handler(checked)
    except ToolError as error:
        return f"Error [{error.code}]: {error}"
    except OSError as error:  # missing file, permission denied, disk full, ...
        return f"Error [io_error]: {error}"


def call_written_as_text(text: str) -> dict[str, Any] | None:
    """Small local models often write a call as text, `{"name": "glob", "arguments": {...}}`,
    alone or in a ```json fence: that is the call it means, if it names one of the tools."""
    match = TEXT_CALL.fullmatch(text)
    try:
        call = json.loads(match[1] or match[2]) if match else None
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("arguments"), dict):
        return None
    if str(call.get("name")) not in TOOLS:  # text that names no tool offered stays an answer
        return None
    print(f"⚙ read a tool call written as text: {call['name']}", file=sys.stderr)
    function = {"name": call["name"], "arguments": json.dumps(call["arguments"])}
    return {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": function}


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
    specs = [spec for spec, _ in TOOLS.values()]
    request |= {"tools": specs, "tool_choice": "auto", **OUTPUT_CAP}
    response: ChatCompletion = client.chat.completions.create(**request)
    choice = response.choices[0]
    if choice.finish_reason == "length":
        raise AgentError(f"the reply was cut off at {OUTPUT_CAP['max_tokens']} output tokens")
    calls = [call.model_dump(include=CALL_FIELDS) for call in choice.message.tool_calls or []]
    message: Message = {"role": "assistant", "content": choice.message.content or ""}  # not null
    if not calls and (call := call_written_as_text(message["content"])):
        calls, message["content"] = [call], ""  # the history records the call, not its text
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
            result = call_tool(name, arguments)
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


def load_config(mode: str | None) -> None:
    """Read `.agent_tutorial/config.toml` (rules, hooks); `--permission-mode` beats its mode."""
    if CONFIG_FILE.is_file():
        try:
            CONFIG.update(tomllib.loads(CONFIG_FILE.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise AgentError(f"cannot read {CONFIG_FILE}: {error}") from error
    CONFIG["permission_mode"] = mode or CONFIG.get("permission_mode", "ask")
    if CONFIG["permission_mode"] not in MODE_DEFAULTS:
        raise AgentError(f"permission_mode must be one of {list(MODE_DEFAULTS)}")
    for hook in CONFIG.get("hooks", {}).get("PreToolUse", []):
        if not isinstance(hook.get("command"), str):
            raise AgentError(f"a PreToolUse hook needs a command: {hook}")
        try:
            re.compile(matcher_regex(hook))
        except re.error as error:
            raise AgentError(f"bad hook matcher {hook['matcher']!r}: {error}") from error
    for rule in CONFIG.get("permissions", {}).get("rules", []):
        if rule.get("behavior") not in STRICTNESS or not isinstance(rule.get("pattern"), str):
            raise AgentError(f"a permission rule needs a pattern and allow/ask/deny: {rule}")
        try:
            re.compile(rule["pattern"])
        except re.error as error:
            raise AgentError(f"bad rule pattern {rule['pattern']!r}: {error}") from error


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=f"Lesson {CHAPTER}: {__doc__}")
    parser.add_argument("-p", "--prompt", required=True, help="what to ask the agent")
    parser.add_argument("--trace", action="store_true", help="one line per request on stderr")
    parser.add_argument("--max-tokens", type=int, default=os.getenv("LESSON_MAX_TOKENS", "2048"))
    parser.add_argument("--permission-mode", choices=list(MODE_DEFAULTS))
    parser.add_argument("-y", "--yes", action="store_const", const="auto", dest="permission_mode")
    options = parser.parse_args(argv)
    OUTPUT_CAP["max_tokens"] = options.max_tokens  # every request carries this output cap
    model, base_url, api_key = endpoint()
    if not model or not (base_url or api_key):
        print("error: no model or endpoint: set OPENAI_MODEL and OPENAI_API_KEY", file=sys.stderr)
        return 2
    http = openai.DefaultHttpxClient(event_hooks={"request": [trace] if options.trace else []})
    client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", http_client=http)
    try:
        load_config(options.permission_mode)
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
