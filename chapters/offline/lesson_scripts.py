"""What the scripted lesson server answers, chapter by chapter, and the sample project each
lesson runs in. A script is a fixed list of steps, not a model: each step looks at the request
it answers (the results the lesson sent back) and replies with tool calls or a final text that
quotes those results, so the answer shows what the lesson really did."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOT_A_MODEL = (
    "(The scripted lesson server wrote this answer to {prompt!r}: a fixed script, not a model; "
    "any prompt gets the same steps.)"
)
PERSISTED_PATH = re.compile(r"<persisted-tool-result>\npath: (\S+)")
SNIP_MARKER = re.compile(r"\[Compacted: (\d+) message groups omitted\]")
CLEARED = "[Earlier tool result compacted. Re-run if needed.]"


@dataclass
class Reply:
    """An assistant message: text, native tool calls, or both."""

    content: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    final: bool = False
    """The script's last answer, which says that a script wrote it."""


def call(tool: str, /, **arguments: Any) -> Reply:
    return Reply(calls=[(tool, arguments)])


def say(*paragraphs: str) -> Reply:
    return Reply(content="\n\n".join(paragraphs), final=True)


@dataclass
class Request:
    """One chat-completions request body, with the views a script step needs."""

    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def tool_names(self) -> list[str]:
        return [spec["function"]["name"] for spec in self.body.get("tools") or []]

    @property
    def prompt(self) -> str:
        """The first user message: the prompt the lesson was run with."""
        users = [m for m in self.messages if m.get("role") == "user"]
        return str(users[0].get("content", "")) if users else ""

    @property
    def system(self) -> str:
        first = self.messages[0] if self.messages else {}
        return str(first.get("content", "")) if first.get("role") == "system" else ""

    def results(self) -> list[str]:
        """The tool results that answer the latest assistant message, in order."""
        found: list[str] = []
        for message in reversed(self.messages):
            if message.get("role") == "assistant":
                break
            if message.get("role") == "tool":
                found.insert(0, str(message.get("content", "")))
        return found

    def result(self) -> str:
        return "\n".join(self.results())

    def calls(self) -> list[tuple[str, str]]:
        """(tool name, result) for every answered call in the conversation, in order."""
        names = {
            call["id"]: call["function"]["name"]
            for message in self.messages
            for call in message.get("tool_calls") or []
        }
        return [
            (names.get(message.get("tool_call_id"), "?"), str(message.get("content", "")))
            for message in self.messages
            if message.get("role") == "tool"
        ]

    def result_of(self, name: str) -> str:
        """The latest result of a call to `name`, or a note that there is none."""
        found = [result for called, result in self.calls() if called == name]
        return found[-1] if found else f"(no {name} result in this request)"


Step = Reply | Callable[[Request], Reply]  # a fixed reply, or one made from the request


def quoted(text: str, limit: int = 1_200) -> str:
    """`text` as an indented block, cut at `limit` characters."""
    cut = text if len(text) <= limit else f"{text[:limit]}\n[… {len(text) - limit} more]"
    return "\n".join(f"    {line}" for line in cut.splitlines() or [""])


class Script:
    """A chapter's steps: one list for the agent's own conversation, one for a subagent's
    (chapter 6 on: a request without the task tool) and the reply to a summary request (a
    request without tools, chapter 8). Past the last step it says so instead of calling."""

    def __init__(
        self,
        steps: list[Step],
        child_steps: list[Step] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        self.queues = {"agent": list(steps), "subagent": list(child_steps or [])}
        self.summary = summary
        self.seen: list[Request] = []

    def kind(self, request: Request) -> str:
        if not request.tool_names:
            return "summary"
        offers_task = "task" in request.tool_names
        return "subagent" if self.queues["subagent"] and not offers_task else "agent"

    def reply(self, body: dict[str, Any]) -> Reply:
        request = Request(body)
        self.seen.append(request)
        kind = self.kind(request)
        if kind == "summary":
            return Reply(content=json.dumps(self.summary or {}))
        queue = self.queues[kind]
        if not queue:
            return say("The script has no step left for this request, so it stops here.")
        step = queue.pop(0)
        reply = step(request) if callable(step) else step
        if reply.final:
            note = NOT_A_MODEL.format(prompt=self.seen[0].prompt)
            reply = Reply(content=f"{reply.content}\n\n{note}", calls=reply.calls)
        return reply


# --- the sample project -----------------------------------------------------------------------

SAMPLE_PROJECT = {
    "README.md": "# greeter\n\nA tiny sample project for the offline lessons.\n",
    "app/__init__.py": "",
    "app/greet.py": 'def greet(name):\n    return f"Hello, {name}!"\n',
    "app/shout.py": "from app.greet import greet\n\n\ndef shout(name):\n"
    "    return greet(name).upper()\n",
    "tests/test_greet.py": "from app.greet import greet\n\n\ndef test_greet():\n"
    '    assert greet("Ada") == "Hello, Ada!"\n',
}

GUARD_HOOK = """\
import json
import sys

call = json.load(sys.stdin)
command = call["tool_input"].get("command", "")
if command.startswith("rm "):
    print(f"guard.py: no rm in this project ({command!r})", file=sys.stderr)
    sys.exit(2)
"""

SKILLS = {
    "skills/release-notes/SKILL.md": "---\nname: release-notes\ndescription: How release "
    "notes were written in 2019 (the committed copy).\n---\n\nWrite one long paragraph.\n",
    ".agent_tutorial/skills/release-notes/SKILL.md": "---\nname: release-notes\n"
    "description: How this team writes release notes now (your private copy).\n---\n\n"
    "# Release notes\n\nGroup entries under Added, Changed and Fixed; one line each.\n",
    "skills/python-tests/SKILL.md": "---\nname: python-tests\ndescription: How to run "
    "and write the pytest tests here.\n---\n\nRun `python -m pytest -q` first.\n",
}

NOTES_COUNT = 50  # with the prompt, the log and its artifact: 53 groups, past snip's 50
CHAPTER_LINES = 260  # three read_file results of 17 KB each pass the 50,000 B summary


def filler(label: str, lines: int) -> str:
    return "".join(
        f"{label} line {n:04d}: the quick brown fox jumps over the dog\n" for n in range(lines)
    )


def compaction_project() -> dict[str, str]:
    files = {"logs/build.log": filler("build", 700)}  # about 45 KB: more than 30,000 B
    files |= {
        f"notes/part-{n:02d}.txt": f"Note {n}: nothing urgent.\n" for n in range(1, NOTES_COUNT + 1)
    }
    files |= {f"data/chapter-{n}.txt": filler(f"chapter {n}", CHAPTER_LINES) for n in (1, 2, 3)}
    return files


def seed(chapter: int, workspace: Path) -> None:
    """Write the sample project, and what this chapter's script needs, into `workspace`."""
    files = dict(SAMPLE_PROJECT)
    if chapter == 4:
        hook = f"{shlex.quote(sys.executable)} hooks/guard.py"
        files["hooks/guard.py"] = GUARD_HOOK
        files[".agent_tutorial/config.toml"] = (
            f'[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = {json.dumps(hook)}\n'
        )
    if chapter == 7:
        files |= SKILLS
    if chapter == 8:
        files |= compaction_project()
    if chapter == 9:
        files[".agent_tutorial/config.toml"] = GLOSSARY_CONFIG
    for name, text in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# --- the scripts --------------------------------------------------------------------------------

PROMPTS = {
    1: "How many Python files are in this project?",
    2: "Where is greet defined, and what calls it? Leave a note in NOTES.md.",
    3: "List the Python files in NOTES.md, and install a git pre-commit hook.",
    4: "Clean up: delete the app folder.",
    5: "Add a docstring to every function in app/.",
    6: "Which Python files define functions? Ask a helper.",
    7: "Write the release notes for this version.",
    8: "Read the build log, every note and the three chapters, then say what they hold.",
    9: "What is MCP? Ask the glossary server.",
}
COUNT_PYTHON = "find . -name '*.py' | sort; echo \"$(find . -name '*.py' | wc -l) Python files\""
GREP_AS_TEXT = (
    '```json\n{"name": "grep", "arguments": {"pattern": "greet\\\\(", "glob": "*.py"}}\n```'
)
NOTE = "greet is defined in app/greet.py; app/shout.py and tests/test_greet.py call it.\n"
PLAN = ["Find the functions in app/", "Write a docstring for each", "Run the tests"]
SUMMARY = {
    "current_goal": "Read the build log, the notes and the chapters, then report.",
    "key_findings": ["The build log and the chapters hold numbered filler lines."],
    "files_read_or_changed": ["logs/build.log", "notes/", "data/"],
    "remaining_work": ["Say what the files hold."],
    "user_constraints": ["Change no file."],
}


def plan(*statuses: str) -> Reply:
    todos = [
        {"content": item, "status": status} for item, status in zip(PLAN, statuses, strict=True)
    ]
    return call("todo_write", todos=todos)


def chapter_1() -> Script:
    def answer(request: Request) -> Reply:
        return say(
            "I asked for one bash command; the lesson ran it and sent back:",
            quoted(request.result()),
            "That is the loop: a request, a tool call, its result in the next request, and "
            "this reply without a call, which ends the run.",
        )

    return Script([call("bash", command=COUNT_PYTHON), answer])


def chapter_2() -> Script:
    def answer(request: Request) -> Reply:
        return say(
            f"glob found:\n{quoted(request.result_of('glob'))}",
            "grep I wrote as plain text (a ```json block, no tool call); the lesson read it as "
            'a call, and its glob "*.py" searched app/ and tests/ too:\n'
            + quoted(request.result_of("grep")),
            f"read_file app/greet.py:\n{quoted(request.result_of('read_file'))}",
            f"write_file: {request.result_of('write_file')}",
        )

    return Script(
        [
            call("glob", pattern="**/*.py"),
            Reply(content=GREP_AS_TEXT),
            call("read_file", path="app/greet.py"),
            call("write_file", path="NOTES.md", content=NOTE),
            answer,
        ]
    )


def chapter_3() -> Script:
    def answer(request: Request) -> Reply:
        notes, hook = request.results()
        return say(
            f"Writing NOTES.md came back as:\n{quoted(notes)}",
            f"Writing .git/hooks/pre-commit came back as:\n{quoted(hook)}",
            "Reads ran without a question; a write needs your approval (denied when there is "
            "no terminal to ask on), and no mode, rule or answer opens .git/.",
        )

    writes = Reply(
        calls=[
            ("write_file", {"path": "NOTES.md", "content": "app/greet.py\napp/shout.py\n"}),
            ("write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\nexit 0\n"}),
        ]
    )
    return Script([call("glob", pattern="**/*.py"), writes, answer])


def chapter_4() -> Script:
    def answer(request: Request) -> Reply:
        return say(
            f"bash rm -rf app came back as:\n{quoted(request.result())}",
            "The PreToolUse hook in .agent_tutorial/config.toml ran hooks/guard.py first; it "
            "exited 2, so the call was blocked in every permission mode and its stderr became "
            "the reason I read.",
        )

    return Script([call("bash", command="rm -rf app"), answer])


def chapter_5() -> Script:
    reminders: list[str] = []

    def update(request: Request) -> Reply:
        last = request.messages[-1] if request.messages else {}
        if "<system-reminder>" in str(last.get("content", "")):
            reminders.append(str(last["content"]))
        return plan("completed", "in_progress", "pending")

    def answer(request: Request) -> Reply:
        seen = quoted(reminders[0]) if reminders else "    (none arrived)"
        return say(
            f"My plan, as todo_write last answered:\n{quoted(request.result())}",
            f"After three tool rounds without a plan update, the request carried:\n{seen}",
            "(A script cannot write docstrings: the plan is this lesson's point.)",
        )

    return Script(
        [
            plan("in_progress", "pending", "pending"),
            call("glob", pattern="app/*.py"),
            call("read_file", path="app/greet.py"),
            call("read_file", path="app/shout.py"),
            update,
            answer,
        ]
    )


def chapter_6() -> Script:
    child_requests: list[Request] = []

    def child_glob(request: Request) -> Reply:
        child_requests.append(request)
        return call("glob", pattern="**/*.py")

    def child_answer(request: Request) -> Reply:
        files = request.result_of("glob").splitlines()
        defining = sorted({line.split(":")[0] for line in request.result().splitlines()})
        return Reply(content=f"{len(files)} Python files; {', '.join(defining)} define functions.")

    def answer(request: Request) -> Reply:
        first = child_requests[0] if child_requests else Request({})
        roles = " ".join(str(message.get("role")) for message in first.messages)
        return say(
            f"The helper's answer came back as the task result:\n{quoted(request.result())}",
            f"Its first request held only: {roles} (nothing of this conversation), and offered "
            f"the tools {', '.join(first.tool_names)}: no task, no todo_write.",
        )

    task = call(
        "task",
        description="Survey the Python files",
        prompt="List the Python files in this project and say which define a function "
        "(a line starting with `def `).",
    )
    child: list[Step] = [child_glob, call("grep", pattern="^def ", glob="*.py"), child_answer]
    return Script([task, answer], child)


def chapter_7() -> Script:
    def load(request: Request) -> Reply:
        catalog = [line for line in request.system.splitlines() if line.startswith("- ")]
        wanted = next((line for line in catalog if "release" in line), "- release-notes:")
        return call("load_skill", name=wanted[2:].split(":")[0])

    def answer(request: Request) -> Reply:
        catalog = [line for line in request.system.splitlines() if line.startswith("- ")]
        return say(
            "The system prompt listed these skills (names and descriptions only):\n"
            + quoted("\n".join(catalog)),
            f"load_skill returned the body:\n{quoted(request.result())}",
        )

    return Script([load, answer])


def compaction_report(requests: list[Request]) -> Reply:
    """What the requests showed of each layer."""
    persisted = {
        result.splitlines()[1]
        for request in requests
        for _, result in request.calls()
        if result.startswith("<persisted-tool-result>")
    }
    snipped = [int(n) for r in requests for n in SNIP_MARKER.findall(json.dumps(r.messages))]
    cleared = [sum(result == CLEARED for _, result in r.calls()) for r in requests]
    summaries = [r.system for r in requests if '"compacted_history"' in r.system]
    lines = [
        f"1 persist: {len(persisted)} result(s) arrived as a preview of a saved file "
        f"({', '.join(sorted(persisted))})",
        f"2 snip: {len(snipped)} request(s) held the marker; at most {max(snipped, default=0)} "
        "groups omitted",
        f"3 micro: up to {max(cleared, default=0)} old results cleared in one request",
        f"4 summary: {len(summaries)} request(s) began with the compacted summary",
    ]
    return say("What the requests showed of the four layers:\n" + quoted("\n".join(lines)))


def chapter_8() -> Script:
    def read_artifact(request: Request) -> Reply:
        found = PERSISTED_PATH.search(request.result())
        path = found.group(1) if found else "logs/build.log"
        return call("read_file", path=path, offset=350, limit=2)

    script = Script([], summary=SUMMARY)
    reads = [call("read_file", path=f"notes/part-{n:02d}.txt") for n in range(1, NOTES_COUNT + 1)]
    reads += [call("read_file", path=f"data/chapter-{n}.txt") for n in (1, 2, 3)]
    script.queues["agent"] = [
        call("read_file", path="logs/build.log"),
        read_artifact,
        *reads,
        lambda request: compaction_report([r for r in script.seen if r.tool_names]),
    ]
    return script


GLOSSARY_SERVER = Path(__file__).resolve().parent / "lesson_mcp_server.py"
GLOSSARY_CONFIG = f"""\
[mcp_servers.glossary]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(GLOSSARY_SERVER))}]

[[permissions.rules]]
tool = "mcp__glossary__define"
pattern = ""
behavior = "allow"
"""


def chapter_9() -> Script:
    def answer(request: Request) -> Reply:
        return say(
            "The glossary is not one of the lesson's own tools: it lives in another process, "
            "an MCP server the lesson started, asked for its tools (tools/list) and called "
            "(tools/call) with one JSON line each way. It answered:",
            quoted(request.result()),
        )

    return Script([call("mcp__glossary__define", term="MCP"), answer])


SCRIPTS: dict[int, Callable[[], Script]] = {
    1: chapter_1,
    2: chapter_2,
    3: chapter_3,
    4: chapter_4,
    5: chapter_5,
    6: chapter_6,
    7: chapter_7,
    8: chapter_8,
    9: chapter_9,
}
