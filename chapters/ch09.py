"""This lesson: tools from MCP servers, spoken to over stdio in JSON-RPC lines.
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
Tools = dict[str, tuple[dict[str, Any], Handler]]  # name -> (spec for the model, handler)
CALL_FIELDS = {"id", "type", "function"}  # a tool call, as the endpoint wants it back

CHAPTER = 9
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
JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool, "array": list}
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
TODO_STATUSES = ("pending", "in_progress", "completed")
MAX_TODO_ITEMS = 50
MAX_TODO_CONTENT_CHARS = 500
REMINDER_AFTER_TOOL_ROUNDS = 3
PLAN: list[dict[str, str]] = []  # the current plan; each todo_write replaces all of it
SKILL_DIRS = (STATE_DIR / "skills", WORKSPACE / "skills")  # your private ones first
SKILLS: dict[str, tuple[str, Path, str]] = {}  # name -> (description, SKILL.md, body)
# Chapter 8's numbers, the same as agent_tutorial/features/compaction/settings.py; every size
# is in UTF-8 bytes of the messages as compact JSON lines.
ARTIFACTS = STATE_DIR / "artifacts"
PERSIST_THRESHOLD_BYTES = 30_000  # layer 1: a larger tool result goes to a file...
BATCH_BUDGET_BYTES = 200_000  # ...and then the largest, until one batch adds at most this
PREVIEW_HEAD_BYTES = PREVIEW_TAIL_BYTES = 2_000  # what the model still sees of it
SNIP_MAX_GROUPS = 50  # layer 2: past this many message groups...
SNIP_KEEP_HEAD_GROUPS = 3  # ...keep the first 3, one marker, and the latest 46
KEEP_RECENT_TOOL_GROUPS = 3  # layer 3: older tool groups keep their calls, not their results
SUMMARY_THRESHOLD_BYTES = 50_000  # layer 4: a request still larger than this is summarised
REACTIVE_TAIL_GROUPS = 5  # after an overflow reply: the recent groups kept after the summary
MAX_SUMMARY_FAILURES = 3  # the breaker: no more automatic summaries after 3 failures in a row
COMPACTED_TOOL_RESULT = "[Earlier tool result compacted. Re-run if needed.]"
SUMMARY_FIELDS = (
    "current_goal",
    "key_findings",
    "files_read_or_changed",
    "remaining_work",
    "user_constraints",
)
SUMMARY_SYSTEM_PROMPT = """\
You are compacting the conversation of a coding agent so that it can carry on with a much \
shorter context. Read the conversation and reply with one JSON object and nothing else (no \
Markdown fences, no prose), with exactly these five keys:
- "current_goal": a non-empty string, what the user wants accomplished now;
- "key_findings": an array of non-empty strings, facts learned that the remaining work \
depends on;
- "files_read_or_changed": an array of non-empty strings, paths of files read or changed;
- "remaining_work": an array of non-empty strings, the steps still to do;
- "user_constraints": an array of non-empty strings, instructions and preferences the user \
stated.
Be specific and concise. Do not call tools."""
SUMMARY_INSTRUCTION = "Summarise the conversation above now: reply with the JSON object only."
CONTINUE_AFTER_SUMMARY = (
    "[The conversation so far was compacted into the summary above. Continue with the current "
    "goal; re-read files or re-run commands if you need their full output.]"
)
FENCE = re.compile(r"\s*```(?:json)?[ \t]*\n(?P<body>.*)\n[ \t]*```\s*", re.DOTALL | re.IGNORECASE)
OVERFLOW = re.compile(  # how providers say "too long"; the package knows a few more
    r"context_length_exceeded|maximum context length|exceeds? the context window"
    r"|exceeds? the available context size|prompt is too long|context length of only",
    re.IGNORECASE,
)

SYSTEM_PROMPT = """\
You are a coding agent working in the user's project at {workspace}.
Use the tools to inspect the project before you answer; never guess file contents.
Keep answers short and concrete. When you are done, answer without calling a tool.
Large tool results are saved to .agent_tutorial/artifacts and shown as previews; read the file \
with read_file if you need more of it."""

TOOLS: Tools = {}  # every tool of the main agent


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
    if resolved.is_relative_to(state) and not any(
        resolved.is_relative_to(state / part) for part in ("artifacts", "skills")
    ):
        raise ToolError("protected_path", f"{path}: tools see only artifacts/ and skills/ here")
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


TODO_ITEM = {
    "type": "object",
    "properties": {"content": {"type": "string"}, "status": {"enum": list(TODO_STATUSES)}},
    "required": ["content", "status"],
}


@tool(
    "todo_write",
    "Write your plan for the current task as a checklist. Send the COMPLETE list every "
    "time: it replaces the previous plan. Use it for work with three or more steps; keep "
    "exactly one item in_progress while you work and mark items completed as soon as they "
    f"are done. At most {MAX_TODO_ITEMS} items.",
    {"todos": {"type": "array", "items": TODO_ITEM}},
    ["todos"],
)
def todo_write(arguments: dict[str, Any]) -> str:
    """Check the whole snapshot first; an invalid one changes nothing."""
    items = arguments["todos"]
    if len(items) > MAX_TODO_ITEMS:
        raise ToolError("invalid_arguments", f"a plan holds at most {MAX_TODO_ITEMS} items")
    for item in items:
        if not isinstance(item, dict) or item.get("status") not in TODO_STATUSES:
            raise ToolError("invalid_arguments", f"each item needs a status in {TODO_STATUSES}")
        content = item.get("content")
        if not isinstance(content, str) or not 0 < len(content.strip()) <= MAX_TODO_CONTENT_CHARS:
            raise ToolError(
                "invalid_arguments", f"content must be 1-{MAX_TODO_CONTENT_CHARS} chars"
            )
    if sum(item["status"] == "in_progress" for item in items) > 1:
        raise ToolError("invalid_arguments", "at most one item may be in_progress")
    PLAN[:] = [{"content": item["content"].strip(), "status": item["status"]} for item in items]
    marks = {"completed": "[x]", "in_progress": "[~]", "pending": "[ ]"}
    plan = "\n".join(f"{marks[item['status']]} {item['content']}" for item in PLAN)
    print(f"Plan:\n{plan or '(cleared)'}", file=sys.stderr)
    done = sum(item["status"] == "completed" for item in PLAN)
    return f"Plan updated ({done}/{len(PLAN)} completed):\n{plan}" if PLAN else "Plan cleared."


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
    shown = subject(arguments) or json.dumps(arguments)  # an MCP tool has neither
    print(f"{name} wants to run: {shown}\nAllow? [y/N] ", end="", file=sys.stderr)
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


def call_tool(name: str, arguments: str, tools: Tools) -> str:
    """The tool's result text; a bad call becomes an error the model can read, never a crash."""
    if name not in tools:
        return f"Error [unknown_tool]: no tool named {name!r}; available: {', '.join(tools)}"
    spec, handler = tools[name]
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


def call_written_as_text(text: str, tools: Tools) -> dict[str, Any] | None:
    """Small local models often write a call as text, `{"name": "glob", "arguments": {...}}`,
    alone or in a ```json fence: that is the call it means, if it names one of the tools."""
    match = TEXT_CALL.fullmatch(text)
    try:
        call = json.loads(match[1] or match[2]) if match else None
    except json.JSONDecodeError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("arguments"), dict):
        return None
    if str(call.get("name")) not in tools:  # text that names no tool offered stays an answer
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


def ask_model(client: openai.OpenAI, model: str, messages: list[Message], tools: Tools) -> Message:
    """One request; returns the assistant message as it goes into the history."""
    request: dict[str, Any] = {"model": model, "messages": messages}
    # Send tool_choice with the tools (some servers hide tools without it) and an output cap.
    specs = [spec for spec, _ in tools.values()]
    request |= {"tools": specs, "tool_choice": "auto", **OUTPUT_CAP}
    response: ChatCompletion = client.chat.completions.create(**request)
    choice = response.choices[0]
    if choice.finish_reason == "length":
        raise AgentError(f"the reply was cut off at {OUTPUT_CAP['max_tokens']} output tokens")
    calls = [call.model_dump(include=CALL_FIELDS) for call in choice.message.tool_calls or []]
    message: Message = {"role": "assistant", "content": choice.message.content or ""}  # not null
    if not calls and (call := call_written_as_text(message["content"], tools)):
        calls, message["content"] = [call], ""  # the history records the call, not its text
    return {**message, "tool_calls": calls} if calls else message  # never an empty list


def system_reminder(text: str) -> Message:
    """Guidance from the agent, not the user: one user turn in <system-reminder> tags, since
    many servers accept only one system message, and only first."""
    return {"role": "user", "content": f"<system-reminder>\n{text}\n</system-reminder>"}


def tool_rounds_since_plan_update(history: list[Message]) -> int:
    """Tool rounds at the end of the history with no todo_write among them; counted from the
    history every time, so there is no counter to keep right."""
    rounds = 0
    for message in reversed(history):
        if message["role"] == "tool":
            continue
        if message["role"] != "assistant" or "tool_calls" not in message:
            break
        if any(call["function"]["name"] == "todo_write" for call in message["tool_calls"]):
            break
        rounds += 1
    return rounds


def plan_reminder(history: list[Message]) -> list[Message]:
    """The request-only reminder after three tool rounds without todo_write (or none)."""
    rounds = tool_rounds_since_plan_update(history)
    if rounds < REMINDER_AFTER_TOOL_ROUNDS:
        return []
    advice = (
        "use todo_write to mark finished items completed and the current one in_progress"
        if PLAN
        else "if this task has several steps, use todo_write to write a plan"
    )
    return [
        system_reminder(
            f"Reminder: you have made {rounds} tool rounds without updating your plan; "
            f"{advice}. Do not mention this reminder to the user."
        )
    ]


def parse_skill(manifest: Path) -> tuple[str, str, str] | None:
    """(name, description, body) from a SKILL.md with `---` front matter, or None."""
    text = manifest.read_text(errors="replace")
    if not text.startswith("---\n") or "\n---" not in text[4:]:
        return None
    header, body = text[4:].split("\n---", 1)
    fields = dict(line.split(":", 1) for line in header.splitlines() if ":" in line)
    name = fields.get("name", "").strip()
    description = fields.get("description", "").strip()
    return (name, description, body.lstrip("-").strip()) if name and description else None


def discover_skills() -> None:
    """Every `.agent_tutorial/skills/<name>/SKILL.md`, then `skills/<name>/SKILL.md`: a private
    skill shadows a committed one of the same name."""
    for folder in SKILL_DIRS:
        for manifest in sorted(folder.glob("*/SKILL.md")) if folder.is_dir() else []:
            if not manifest.resolve().is_relative_to(WORKSPACE):
                continue  # a symlink out of the project is not a skill
            try:
                skill = parse_skill(manifest)
            except OSError as error:  # unreadable: skip it, say why
                print(f"skipped {manifest}: {error}", file=sys.stderr)
                continue
            if skill is None:
                print(f"skipped {manifest}: no name/description front matter", file=sys.stderr)
            elif skill[0] not in SKILLS:
                SKILLS[skill[0]] = (skill[1], manifest.relative_to(WORKSPACE), skill[2])


def system_prompt() -> str:
    """The base prompt, then one line per skill: names and descriptions, never bodies."""
    prompt = SYSTEM_PROMPT.format(workspace=Path.cwd())
    if not SKILLS:
        return prompt
    lines = [f"- {name}: {description}" for name, (description, _, _) in sorted(SKILLS.items())]
    header = (
        "Skills (instructions for particular kinds of work). When a task matches one, call "
        "load_skill with its name and follow what it says:"
    )
    return "\n\n".join([prompt, "\n".join([header, *lines])])


@tool(
    "load_skill",
    "Load the full instructions of a skill listed in the system prompt. Call it before "
    "starting work that matches the skill's description.",
    {"name": {"type": "string"}},
    ["name"],
)
def load_skill(arguments: dict[str, Any]) -> str:
    if arguments["name"] not in SKILLS:
        known = ", ".join(sorted(SKILLS)) or "none"
        raise ToolError("unknown_skill", f"no skill named {arguments['name']!r}; known: {known}")
    _, manifest, body = SKILLS[arguments["name"]]
    return f"# Skill: {arguments['name']}\nDirectory: {manifest.parent.as_posix()}\n\n{body}"


def message_bytes(messages: list[Message]) -> int:
    """What chapter 8 measures: the UTF-8 bytes of one compact JSON line per message."""
    return sum(len(transcript_line(message)) for message in messages)


def transcript_line(message: Message) -> bytes:
    line = json.dumps(message, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return line.encode(errors="replace") + b"\n"


def write_artifact(name: str, data: bytes) -> str:
    """A new file under .agent_tutorial/artifacts, there whole or not at all (`replace_file`:
    a temporary file, flushed to disk, then renamed); its workspace-relative path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    if not ARTIFACTS.resolve().is_relative_to(WORKSPACE):
        raise OSError(f"{ARTIFACTS} leads outside the workspace")
    replace_file(ARTIFACTS / name, data.decode())
    return (ARTIFACTS / name).relative_to(WORKSPACE).as_posix()


def persisted_block(content: str) -> str:
    """Layer 1: the whole result goes to a file; the model sees where, and its two ends."""
    data = content.encode(errors="replace")
    path = write_artifact(f"tool-result-{uuid.uuid4().hex}.txt", data)
    head = data[:PREVIEW_HEAD_BYTES].decode(errors="ignore")  # no character cut in half
    tail = data[-PREVIEW_TAIL_BYTES:].decode(errors="ignore")
    return (
        f"<persisted-tool-result>\npath: {path}\noriginal_bytes: {len(data)}\n"
        f"head_preview:\n{head}\ntail_preview:\n{tail}\n</persisted-tool-result>"
    )


def persist_large_results(results: list[str]) -> list[str]:
    """Every result over 30,000 B goes to a file, then the largest of the rest until the
    batch adds at most 200,000 B to the history."""
    sizes = [len(result.encode(errors="replace")) for result in results]
    chosen = {index for index, size in enumerate(sizes) if size > PERSIST_THRESHOLD_BYTES}
    inline = sum(size for index, size in enumerate(sizes) if index not in chosen)
    for index in sorted(set(range(len(sizes))) - chosen, key=lambda i: (-sizes[i], i)):
        if inline <= BATCH_BUDGET_BYTES:
            break
        chosen.add(index)
        inline -= sizes[index]
    try:
        persisted = [persisted_block(r) if i in chosen else r for i, r in enumerate(results)]
    except OSError as error:  # a full disk: every call of the batch says so, none goes inline
        print(f"⚠ could not persist tool results: {error}", file=sys.stderr)
        return [f"Error [tool_result_processing_error]: {error}" for _ in results]
    if chosen:
        print(f"⇣ persisted {len(chosen)} result(s) to {ARTIFACTS.name}/", file=sys.stderr)
    return persisted


def message_groups(messages: list[Message]) -> list[list[Message]]:
    """A group is one message plus the tool results that answer it; layers cut whole groups."""
    groups: list[list[Message]] = []
    for message in messages:
        if message["role"] == "tool" and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    return groups


def snip(groups: list[list[Message]]) -> list[list[Message]]:
    """Layer 2: past 50 groups, keep the first 3, one marker, and the latest 46."""
    if len(groups) <= SNIP_MAX_GROUPS:
        return groups
    keep_tail = SNIP_MAX_GROUPS - SNIP_KEEP_HEAD_GROUPS - 1
    omitted = len(groups) - SNIP_KEEP_HEAD_GROUPS - keep_tail
    marker = system_reminder(f"[Compacted: {omitted} message groups omitted]")
    return [*groups[:SNIP_KEEP_HEAD_GROUPS], [marker], *groups[-keep_tail:]]


def micro(groups: list[list[Message]]) -> list[list[Message]]:
    """Layer 3: results of all but the 3 latest tool groups become a placeholder; the calls
    and their ids stay, so every call still has its answer."""
    tool_groups = [index for index, group in enumerate(groups) if "tool_calls" in group[0]]
    old = set(tool_groups[: max(0, len(tool_groups) - KEEP_RECENT_TOOL_GROUPS)])
    return [
        [group[0], *({**result, "content": COMPACTED_TOOL_RESULT} for result in group[1:])]
        if index in old
        else group
        for index, group in enumerate(groups)
    ]


def with_system(prompt: str, base: list[Message]) -> list[Message]:
    """One system message, first: a summary at the front of the base joins the prompt."""
    if base and base[0]["role"] == "system":
        return [{"role": "system", "content": f"{prompt}\n\n{base[0]['content']}"}, *base[1:]]
    return [{"role": "system", "content": prompt}, *base]


def summarize(client: openai.OpenAI, model: str, messages: list[Message]) -> dict[str, Any]:
    """Layer 4's summary: one tool-free request; nothing but the five-field JSON object."""
    request = [*with_system(SUMMARY_SYSTEM_PROMPT, messages)]
    request.append({"role": "user", "content": SUMMARY_INSTRUCTION})
    body: dict[str, Any] = {"model": model, "messages": request, **OUTPUT_CAP}
    response: ChatCompletion = client.chat.completions.create(**body)
    choice = response.choices[0]
    if choice.finish_reason != "stop" or choice.message.tool_calls:
        raise ValueError(f"the summary reply ended with {choice.finish_reason!r}")
    text = choice.message.content or ""
    fenced = FENCE.fullmatch(text)  # small models add one fence despite the prompt
    data = json.loads(fenced["body"] if fenced and "```" not in fenced["body"] else text)
    if not isinstance(data, dict) or sorted(data) != sorted(SUMMARY_FIELDS):
        raise ValueError(f"the summary reply must have exactly the keys {list(SUMMARY_FIELDS)}")
    if not isinstance(data["current_goal"], str) or not data["current_goal"].strip():
        raise ValueError("current_goal must be a non-empty string")
    for name in SUMMARY_FIELDS[1:]:
        if not isinstance(data[name], list) or not all(
            isinstance(item, str) and item.strip() for item in data[name]
        ):
            raise ValueError(f"{name} must be an array of non-empty strings")
    return data


def compact(
    client: openai.OpenAI, model: str, history: list[Message], base: list[Message]
) -> Message:
    """The transcript of the whole history goes to disk first, then the summary of `base`
    becomes one system message that points at it. Raises on any failure."""
    transcript = b"".join(transcript_line(message) for message in history)
    path = write_artifact(f"transcript-{uuid.uuid4().hex}.jsonl", transcript)
    fields = summarize(client, model, base)
    content = {"kind": "compacted_history", "transcript_path": path, **fields}
    text = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    print(f"Σ summarised {len(history)} messages; transcript at {path}", file=sys.stderr)
    return {"role": "system", "content": text}


def cheap_layers(history: list[Message], state: dict[str, Any]) -> list[Message]:
    """Layers 2 and 3 over the summary (if any) plus what came after it."""
    base = [state["summary"], *history[state["covered"] :]] if state["summary"] else history
    return [message for group in micro(snip(message_groups(base))) for message in group]


def report_layers(request: list[Message], state: dict[str, Any]) -> None:
    """A stderr line the first time snip or micro cuts more than for the request before; later
    cuts are only counted, for `report_later_cuts` at the end."""
    marker = re.search(r"\[Compacted: (\d+) message groups omitted\]", json.dumps(request))
    omitted = int(marker.group(1)) if marker else 0
    cleared = sum(message["content"] == COMPACTED_TOOL_RESULT for message in request)
    if omitted > state["omitted"] and not state["snips"]:
        print(f"⚙ snip: {omitted} groups omitted", file=sys.stderr)
    if cleared > state["cleared"] and not state["micros"]:
        print(f"⚙ micro: {cleared} results cleared", file=sys.stderr)
    state["snips"] += omitted > state["omitted"]
    state["micros"] += cleared > state["cleared"]
    state["omitted"], state["cleared"] = omitted, cleared


def report_later_cuts(state: dict[str, Any]) -> None:
    """One line for the cuts after the first of each layer, rather than one line per request."""
    later = {"snip": state["snips"] - 1, "micro": state["micros"] - 1}
    if any(count > 0 for count in later.values()):
        counts = ", ".join(f"{layer} {count}" for layer, count in later.items() if count > 0)
        print(f"⚙ later requests cut further: {counts}", file=sys.stderr)


def prepare(
    client: openai.OpenAI, model: str, history: list[Message], state: dict[str, Any]
) -> list[Message]:
    """The request's messages from the history, cheapest layer first; the history itself is
    never changed. A summary failure sends the request as it is and counts for the breaker."""
    request = cheap_layers(history, state)
    report_layers(request, state)
    too_large = message_bytes(request) > SUMMARY_THRESHOLD_BYTES
    if not too_large or state["failures"] >= MAX_SUMMARY_FAILURES:
        return request
    try:
        state["summary"] = compact(client, model, history, request)
    except (ValueError, OSError, openai.APIError) as error:
        state["failures"] += 1
        print(f"⚠ automatic summary failed: {error}; the request goes as it is", file=sys.stderr)
        if state["failures"] == MAX_SUMMARY_FAILURES:
            off = f"automatic summaries are off after {MAX_SUMMARY_FAILURES} failures in a row"
            print(f"⚠ {off}", file=sys.stderr)
        return request
    state["failures"], state["covered"] = 0, len(history)
    return cheap_layers(history, state)


def recover_from_overflow(
    client: openai.OpenAI, model: str, history: list[Message], state: dict[str, Any]
) -> None:
    """The endpoint said the request is too long: summarise it and keep the last 5 groups."""
    groups = message_groups(history)
    tail_start = len(history) - sum(len(g) for g in groups[-REACTIVE_TAIL_GROUPS:])
    try:
        summary = compact(client, model, history, cheap_layers(history, state))
    except (ValueError, OSError, openai.APIError) as error:
        reason = f"the conversation no longer fits and could not be compacted: {error}"
        raise AgentError(reason) from error
    state["summary"], state["covered"] = summary, max(tail_start, state["covered"])


def build_request(
    client: openai.OpenAI, model: str, history: list[Message], state: dict[str, Any], tools: Tools
) -> list[Message]:
    """System prompt (with any summary), the compacted history, then request-only reminders."""
    base = prepare(client, model, history, state)
    extra = plan_reminder(history) if "todo_write" in tools else []
    if state["summary"] and not any(message["role"] == "user" for message in base):
        extra.append({"role": "user", "content": CONTINUE_AFTER_SUMMARY})  # servers want one
    return [*with_system(system_prompt(), base), *extra]


def run_agent(client: openai.OpenAI, model: str, prompt: str, tools: Tools = TOOLS) -> str:
    """The loop: every tool call is answered by one tool message before the next request."""
    history: list[Message] = [{"role": "user", "content": prompt}]
    state: dict[str, Any] = {"summary": None, "covered": 0, "failures": 0}
    state |= {"omitted": 0, "cleared": 0}  # what snip and micro did to the last request
    state |= {"snips": 0, "micros": 0}  # the requests they cut further
    for _ in range(MAX_TURNS):
        try:
            reply = ask_model(
                client, model, build_request(client, model, history, state, tools), tools
            )
        except openai.APIStatusError as error:
            if not OVERFLOW.search(str(error.body) + str(error)):
                raise
            print("⚠ reactive: prompt too long; compacting and retrying once", file=sys.stderr)
            recover_from_overflow(client, model, history, state)
            reply = ask_model(
                client, model, build_request(client, model, history, state, tools), tools
            )
        history.append(reply)
        if "tool_calls" not in reply:
            report_later_cuts(state)
            return str(reply["content"])
        results = []
        for call in reply["tool_calls"]:
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            results.append(call_tool(name, arguments, tools))
            print(f"• {name} {arguments[:80]}  ({len(results[-1])} chars)", file=sys.stderr)
        for call, result in zip(reply["tool_calls"], persist_large_results(results), strict=True):
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


MCP_PROTOCOL_VERSION = "2025-06-18"  # the protocol revision this client speaks
MCP_SERVERS: list[subprocess.Popen[str]] = []  # every server started; main stops them all


class McpServer:
    """One MCP server over stdio: a JSON-RPC 2.0 message per line, each way."""

    def __init__(self, name: str, entry: dict[str, Any]) -> None:
        self.name, self.last_id = name, 0
        self.process = subprocess.Popen(
            [entry["command"], *entry.get("args", [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=WORKSPACE,
            env={**os.environ, **entry.get("env", {})},
            start_new_session=True,  # Ctrl-C reaches us; main stops the server
        )
        MCP_SERVERS.append(self.process)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read lines until its answer (skipping the server's notices)."""
        self.last_id += 1
        try:
            self.send({"id": self.last_id, "method": method, "params": params})
        except OSError as error:  # the pipe is closed: the server has gone
            raise ToolError("mcp_server_gone", f"MCP server {self.name} exited") from error
        assert self.process.stdout is not None
        for line in self.process.stdout:
            message = json.loads(line)
            if message.get("id") != self.last_id:
                continue  # a notification or a log line meant for no request of ours
            if "error" in message:
                raise ToolError("mcp_error", message["error"].get("message", str(message)))
            result: dict[str, Any] = message["result"]
            return result
        raise ToolError("mcp_server_gone", f"MCP server {self.name} exited")

    def handler(self, tool_name: str) -> Handler:
        """A handler that calls `tool_name` on this server; its text blocks are the result."""

        def call(arguments: dict[str, Any]) -> str:
            result = self.request("tools/call", {"name": tool_name, "arguments": arguments})
            texts = [block.get("text", "") for block in result.get("content", [])]
            if result.get("isError"):
                raise ToolError("mcp_tool_error", "\n".join(texts))
            return "\n".join(texts)

        return call


def start_mcp_servers() -> None:
    """Start each `[mcp_servers.NAME]` of the config: initialize, list its tools, register
    them as `mcp__NAME__TOOL` with the server's schema; they need approval, as bash does."""
    for name, entry in CONFIG.get("mcp_servers", {}).items():
        try:
            server = McpServer(name, entry)
            server.request(
                "initialize",
                {
                    "protocolVersion": MCP_PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": f"lesson-{CHAPTER}", "version": "1"},
                },
            )
            server.send({"method": "notifications/initialized"})
            listed = server.request("tools/list", {})["tools"]
        except (OSError, ToolError, ValueError, KeyError) as error:
            print(f"warning: MCP server {name} did not start: {error}", file=sys.stderr)
            continue
        for listed_tool in listed:
            full_name = re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{name}__{listed_tool['name']}")[:64]
            schema = {"properties": {}, "required": [], **listed_tool.get("inputSchema", {})}
            function = {"name": full_name, "description": listed_tool.get("description", "")}
            spec = {"type": "function", "function": {**function, "parameters": schema}}
            TOOLS[full_name] = (spec, server.handler(listed_tool["name"]))
            EFFECTS[full_name] = "execute"


def stop_mcp_servers() -> None:
    for process in MCP_SERVERS:
        process.terminate()  # closing stdin would do for a polite server; this for any
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def add_task_tool(client: openai.OpenAI, model: str) -> None:
    """The task tool: a fresh agent loop with its own history, the same model, permissions and
    hooks, and every tool but task (no helpers of its own) and todo_write (the parent's plan)."""

    @tool(
        "task",
        "Hand a self-contained job (research across many files, a focused change) to a "
        "subagent with a fresh context and your tools except task and todo_write. It cannot "
        "see this conversation, so the prompt must say everything it needs. Only its final "
        "answer comes back to you.",
        {"description": {"type": "string"}, "prompt": {"type": "string"}},
        ["description", "prompt"],
    )
    def task(arguments: dict[str, Any]) -> str:
        child_tools = {name: t for name, t in TOOLS.items() if name not in ("task", "todo_write")}
        print(f"↳ subagent: {arguments['description']}", file=sys.stderr)
        try:
            answer = run_agent(client, model, arguments["prompt"], child_tools)
        except (AgentError, openai.APIError) as error:
            raise ToolError("subagent_failed", f"the subagent stopped: {error}") from error
        return answer or "(the subagent finished without a final answer)"


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
        start_mcp_servers()
        add_task_tool(client, model)
        discover_skills()
        print(run_agent(client, model, options.prompt))
    except (openai.APIError, AgentError) as error:  # the endpoint's or the loop's: one line
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's code for SIGINT, no traceback
        print("error: interrupted", file=sys.stderr)
        return 130
    finally:
        stop_mcp_servers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
