"""What a chapter's contract looks like in the request bodies the loopback server records.

The package's end-to-end tests (`agent-tutorial run --chapter N`) and the standalone lessons
(`chapters/chNN.py`) state the same contracts, so both assert them through these helpers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from agent_tutorial.features.compaction import COMPACTED_TOOL_RESULT, SUMMARY_SYSTEM_PROMPT
from tests.loopback import (
    LoopbackServer,
    Reply,
    error_reply,
    exchanged,
    reminder_text,
    system_notes,
    text_stream,
    tool_stream,
)
from tests.loopback_quirks import Quirks
from tests.test_error_classification import OVERFLOW_REPLIES

Body = dict[str, Any]

# --- every chapter: the wire rules of issue 9 ---------------------------------------------

STRICT_SERVER = Quirks(
    null_content_rejected=True, tools_need_tool_choice=True, system_only_first=True
)
"""A server that refuses `content: null` and a system message after the first, and hides
the tools from a request without `tool_choice` (llama-cpp-python with a Gemma template)."""


def assert_every_request_fits_strict_servers(loopback: LoopbackServer) -> None:
    """Issue 9's wire rules, over every request the session sent."""
    assert not loopback.refused
    for body in loopback.requests:
        assert isinstance(body.get("max_tokens"), int)
        assert all(message["role"] != "system" for message in body["messages"][1:])
        assert all(message.get("content") is not None for message in body["messages"])
        assert body.get("tool_choice") == ("auto" if body.get("tools") else None)


# --- chapters 3 to 7 -----------------------------------------------------------------------


def tool_reply_for(loopback: LoopbackServer, request_index: int, call_id: str) -> str:
    """The content of the tool message answering `call_id` in one recorded request."""
    messages = loopback.requests[request_index]["messages"]
    replies = [m["content"] for m in messages if m.get("tool_call_id") == call_id]
    assert len(replies) == 1, messages
    return str(replies[0])


def tool_names(body: Body) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def reminders(body: Body) -> list[str]:
    return [text for text in system_notes(body) if text.startswith("Reminder:")]


def assert_plan_reminder_only_in_the_fourth_request(requests: list[Body]) -> None:
    """Three glob rounds, todo_write, one more glob, then an answer: the fourth request (and
    no other) ends with the reminder, and it never enters the history the fifth extends."""
    assert len(requests) == 6
    assert [len(reminders(body)) for body in requests] == [0, 0, 0, 1, 0, 0]
    fourth = requests[3]["messages"]
    assert "todo_write" in str(reminder_text(fourth[-1]))
    fifth = requests[4]["messages"]
    assert fifth[: len(fourth) - 1] == fourth[:-1]
    for body in requests[4:]:
        assert not any("Reminder:" in str(m["content"]) for m in body["messages"])


def assert_child_starts_fresh(
    parent_first: Body, child_requests: list[Body], child_prompt: str, parent_secret: str
) -> None:
    """A subagent's requests hold only its own prompt and work: nothing of the parent's
    conversation, and neither `task` nor `todo_write` among its tools."""
    assert child_requests[0]["messages"][0]["role"] == "system"
    assert exchanged(child_requests[0]) == [{"role": "user", "content": child_prompt}]
    for body in child_requests:
        assert parent_secret not in str(body["messages"])
        assert "task" not in tool_names(body)
        assert "todo_write" not in tool_names(body)
    assert "task" in tool_names(parent_first)


BLOCKING_HOOK = """\
import json, sys
event = json.load(sys.stdin)
if "touch" in event["tool_input"]["command"]:
    print("no new files today: touch is blocked by guard.py", file=sys.stderr)
    sys.exit(2)
"""

PLAN = {"todos": [{"content": "Look around", "status": "in_progress"}]}

CHILD_PROMPT = "Count the Python files in this project and report the number."

SKILL = """\
---
name: release-notes
description: How this team writes release notes. Use it before editing CHANGELOG.md.
---

# Release notes

Group entries under Added, Changed and Fixed; BODY-MARKER-42.
"""


# --- chapter 8 -------------------------------------------------------------------------------

ARTIFACTS = Path(".agent_tutorial/artifacts")
SUMMARY = {
    "current_goal": "Read the project files and report on them.",
    "key_findings": ["The files hold numbered filler lines."],
    "files_read_or_changed": ["big.txt"],
    "remaining_work": ["Write the report."],
    "user_constraints": ["Do not change any file."],
}
LARGE_READ_COUNT = 3
"""Reads of about 20 KB: three of them exceed the 50,000-byte summary threshold."""


# --- the workspace and the expected tool output ------------------------------------------


def write_text_file(workspace: Path, name: str, size: int) -> str:
    """An ASCII file of `size` bytes (rounded down to whole 100-byte lines, each naming the
    file and its number); returns its name."""
    lines = [f"{name} {number:05d} ".ljust(99, "x") + "\n" for number in range(size // 100)]
    (workspace / name).write_text("".join(lines))
    return name


def read_call(call_id: str, path: str) -> Reply:
    return tool_stream([(call_id, "read_file", {"path": path})])


def summary_reply(summary: dict[str, Any] | None = None) -> Reply:
    return text_stream(json.dumps(summary or SUMMARY))


# --- what the loopback server saw --------------------------------------------------------


def is_summary_request(body: Body) -> bool:
    return not body.get("tools") and body["messages"][0]["content"].startswith(
        SUMMARY_SYSTEM_PROMPT
    )


def wire_summary(body: Body) -> dict[str, Any]:
    """The summary a request carries: the package sends it as a `<system-reminder>` user
    turn after the project context, so the leading system message stays the system prompt;
    the ch08 lesson merges it into that system message, as its last paragraph."""
    messages = body["messages"]
    assert messages[0]["role"] == "system"
    places = [messages[0]["content"].rpartition("\n\n")[2]]
    places += [text for text in map(reminder_text, messages) if text is not None]
    summaries = [json.loads(text) for text in places if '"kind":"compacted_history"' in text]
    assert len(summaries) == 1, messages
    return cast(dict[str, Any], summaries[0])


def request_kinds(loopback: LoopbackServer) -> list[str]:
    return ["summary" if is_summary_request(body) else "agent" for body in loopback.requests]


def tool_contents(body: Body) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


def artifact_files(workspace: Path, kind: str) -> list[Path]:
    return sorted((workspace / ARTIFACTS).glob(f"{kind}-*"))


def artifact_id(path: Path) -> str:
    """`tool-result-<id>.txt` or `transcript-<id>.jsonl` → `<id>`."""
    return path.stem.removeprefix("tool-result-").removeprefix("transcript-")


def persisted_block(relative_path: str, full: str) -> str:
    """The exact message layer 1 leaves for an ASCII result (bytes and characters agree)."""
    return (
        "<persisted-tool-result>\n"
        f"path: {relative_path}\n"
        f"original_bytes: {len(full.encode())}\n"
        "head_preview:\n"
        f"{full[:2_000]}\n"
        "tail_preview:\n"
        f"{full[-2_000:]}\n"
        "</persisted-tool-result>"
    )


def queue_large_reads(loopback: LoopbackServer, workspace: Path, count: int) -> None:
    path = write_text_file(workspace, "large.txt", 20_000)
    loopback.queue(*(read_call(f"large-{n}", path) for n in range(1, count + 1)))


class _AnyPath:
    """Equal to any artifacts-relative transcript path (the id is random)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and other.startswith(f"{ARTIFACTS.as_posix()}/transcript-")

    def __repr__(self) -> str:
        return "<a transcript path>"


ANY_PATH = _AnyPath()


def overflow(provider: str) -> Reply:
    status, body = OVERFLOW_REPLIES[provider]
    return error_reply(status, body)


MISSING_KEY = {name: value for name, value in SUMMARY.items() if name != "user_constraints"}
THIRD_BAD_SUMMARY: dict[str, Callable[[], Reply]] = {
    "length": lambda: text_stream(json.dumps(SUMMARY), finish_reason="length"),
    "tool-calls": lambda: tool_stream([("summary-call", "read_file", {"path": "large.txt"})]),
}
CIRCUIT_OPENING_KINDS = ["agent"] * 3 + ["summary", "agent"] * 3
"""Reads 3, 4 and 5 each leave the history over the threshold and get one summary attempt."""


def queue_three_failed_summaries(
    loopback: LoopbackServer, workspace: Path, third: str
) -> list[str]:
    """Six ~20 KB reads, each of its own file (the same read again would be a stuck call);
    the summaries after reads 3, 4 and 5 fail (not JSON, a key missing, then `third`), so
    the request after read 6 gets no attempt. Returns the files read, in order."""
    paths = [write_text_file(workspace, f"large-{n}.txt", 20_000) for n in range(1, 7)]
    loopback.queue(*(read_call(f"large-{n}", paths[n - 1]) for n in range(1, 4)))
    bad = [text_stream("Here is my summary of the work."), summary_reply(MISSING_KEY)]
    for n, reply in enumerate([*bad, THIRD_BAD_SUMMARY[third]()], start=4):
        loopback.queue(reply, read_call(f"large-{n}", paths[n - 1]))
    return paths


def assert_first_two_of_five_reads_cleared(
    loopback: LoopbackServer, outputs: dict[str, str]
) -> None:
    """Five reads of 4,000 B then an answer: the sixth request keeps the results of the three
    latest reads and clears the first two (micro), with no summary on the way."""
    assert request_kinds(loopback) == ["agent"] * 6
    assert tool_contents(loopback.requests[5]) == {
        "read-1": COMPACTED_TOOL_RESULT,
        "read-2": COMPACTED_TOOL_RESULT,
        "read-3": outputs["read-3"],
        "read-4": outputs["read-4"],
        "read-5": outputs["read-5"],
    }
