"""`make lesson N=k`: every lesson runs offline against the scripted server and shows its
chapter's idea; the server speaks the chat-completions wire format to the real openai SDK;
and each lesson is the one before plus one idea, within the diff budgets."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import openai
import pytest

from tests.lesson_support import (
    CHAPTERS,
    LESSONS,
    changed_lines,
    lesson_path,
    load_offline_server,
)

REPOSITORY = LESSONS.parent
NOT_A_MODEL = "a fixed script, not a model; any prompt gets the same steps.)"


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str
    seconds: float


def make_environment() -> dict[str, str]:
    """Ours without a parent make's flags (`make test` runs pytest), plus a key that must not
    reach the scripted server."""
    environment = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    return environment | {"OPENAI_API_KEY": "sk-users-own-key-must-stay-home"}


HANG_GUARD_S = 600
"""Only for a lesson that hangs: eight lessons take seconds each, but all eight start at once
and a busy 2-core machine has slowed them past two minutes."""


def make_lessons(*variables: str, chapters: range = CHAPTERS) -> dict[int, Run]:
    """`make lesson N=k` for each chapter, all at once (each in its own temporary folder)."""
    started = time.monotonic()
    processes = {
        chapter: subprocess.Popen(
            ["make", "-s", "--no-print-directory", "lesson", f"N={chapter}", *variables],
            cwd=REPOSITORY,
            env=make_environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for chapter in chapters
    }
    runs = {}
    try:
        for chapter, process in processes.items():
            stdout, stderr = process.communicate(timeout=HANG_GUARD_S)
            runs[chapter] = Run(process.returncode, stdout, stderr, time.monotonic() - started)
    finally:  # a hung lesson must not outlive the test and haunt the next one
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    return runs


@pytest.fixture(scope="module")
def offline_runs() -> dict[int, Run]:
    return make_lessons()


EVIDENCE = {
    1: ["4 Python files", "[exit code 0]"],
    2: ["tests/test_greet.py:5:", "Wrote 80 bytes to NOTES.md", "plain text (a ```json block"],
    3: [
        "Error [permission_denied]: no terminal: write_file needs the user's approval",
        "Error [permission_denied]: boundary: .git/hooks/pre-commit is in .git/",
    ],
    4: ["Error [hook_blocked]: blocked by a PreToolUse hook: guard.py: no rm in this project"],
    5: ["Plan updated (1/3 completed)", "Reminder: you have made 3 tool rounds without"],
    6: [
        "4 Python files; app/greet.py, app/shout.py, tests/test_greet.py define functions.",
        "no task, no todo_write",
    ],
    7: [
        "- release-notes: How this team writes release notes now (your private copy)",
        "Group entries under Added, Changed and Fixed",
    ],
    8: ["1 persist: 1 result(s)", "4 summary: 1 request(s) began with the compacted summary"],
    9: ["Model Context Protocol: how an agent finds and calls tools"],
}
ACTIVITY = {
    1: "• bash ",
    2: "⚙ read a tool call written as text: grep",
    3: "⚖ deny write_file .git/hooks/pre-commit",
    4: "⚓ PreToolUse",
    5: "Plan:\n[x] Find the functions in app/",
    6: "↳ subagent: Survey the Python files",
    7: "• load_skill ",
    8: "Σ summarised",
    9: "• mcp__glossary__define ",
}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_make_lesson_runs_offline_and_shows_the_chapters_idea(
    offline_runs: dict[int, Run], chapter: int
) -> None:
    run = offline_runs[chapter]

    assert run.exit_code == 0, run.stderr
    assert all(evidence in run.stdout for evidence in EVIDENCE[chapter]), run.stdout
    assert ACTIVITY[chapter] in run.stderr
    assert run.stdout.rstrip().endswith(NOT_A_MODEL)
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_make_lesson_works_in_a_fresh_folder_it_then_removes(
    offline_runs: dict[int, Run], chapter: int
) -> None:
    first = offline_runs[chapter].stderr.splitlines()[0]
    found = re.fullmatch(
        rf"lesson {chapter} in (\S+), against http://127\.0\.0\.1:\d+/v1: "
        "a scripted server, not a model",
        first,
    )

    assert found, first
    assert Path(found[1]).name.startswith(f"lesson{chapter:02d}-")
    assert not Path(found[1]).exists()
    assert offline_runs[chapter].stderr.splitlines()[-1] == (
        f"the workspace {found[1]} is deleted; `make lesson N={chapter} ARGS=--keep` keeps it, "
        "with the files the paths above name"
    )


def test_chapter_8_offline_shows_all_four_layers_at_work(offline_runs: dict[int, Run]) -> None:
    stdout = offline_runs[8].stdout
    report = dict(re.findall(r"^\s+\d (persist|snip|micro|summary): (.*)$", stdout, re.M))

    assert list(report) == ["persist", "snip", "micro", "summary"], stdout
    assert report["persist"].startswith("1 result(s) arrived as a preview of a saved file")
    assert report["snip"].split()[0] != "0" and report["snip"].endswith("groups omitted")
    assert report["micro"].split()[2] != "0"  # "up to N old results cleared"
    assert report["summary"].startswith("1 request(s)")
    stderr = offline_runs[8].stderr
    assert stderr.count("⚙ micro:") == 1 and stderr.count("⚙ snip:") == 1  # then one count
    assert re.search(r"⚙ later requests cut further: snip \d+, micro \d+", stderr)


def test_make_lesson_passes_the_prompt_and_lesson_options_through_unchanged() -> None:
    """--keep is the server's own option; --trace goes on to the lesson."""
    prompt = """Say "hi", it's $HOME `date` $(x)"""

    (run,) = make_lessons(f"PROMPT={prompt}", "ARGS=--trace --keep", chapters=range(1, 2)).values()

    kept = re.fullmatch(
        r"the workspace is kept: (\S+) \(the paths above are inside it\)",
        run.stderr.splitlines()[-1],
    )
    assert kept and Path(kept[1], "app").is_dir(), run.stderr
    shutil.rmtree(kept[1])
    assert run.exit_code == 0, run.stderr
    assert f"wrote this answer to {prompt!r}" in run.stdout
    traced = [line for line in run.stderr.splitlines() if line.startswith("⇢ ")]
    assert [line.split(": ", 1)[1] for line in traced] == [
        "system user; tools: bash",
        "system user assistant tool; tools: bash",
    ]


# --- the scripted server speaks the wire format ---------------------------------------------


@pytest.fixture
def lesson_server() -> ModuleType:
    return load_offline_server()


@pytest.fixture
def served(lesson_server: ModuleType) -> Iterator[tuple[ModuleType, openai.OpenAI]]:
    scripts = lesson_server.SCRIPTS
    with lesson_server.LessonServer(scripts[1]()) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        yield server, client


BASH_TOOL: Any = {
    "type": "function",
    "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}},
}


def test_the_real_sdk_reads_the_scripted_tool_call_and_answer(
    served: tuple[ModuleType, openai.OpenAI],
) -> None:
    server, client = served
    messages: list[Any] = [{"role": "user", "content": "count them"}]

    first = client.chat.completions.create(model="any", messages=messages, tools=[BASH_TOOL])

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and first.usage is not None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.function.name == "bash"
    assert "find . -name '*.py'" in json.loads(call.function.arguments)["command"]
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "2 Python files"},
    ]
    second = client.chat.completions.create(model="any", messages=messages, tools=[BASH_TOOL])
    answer = second.choices[0]
    assert answer.finish_reason == "stop" and answer.message.tool_calls is None
    assert "2 Python files" in (answer.message.content or "")
    assert (answer.message.content or "").endswith(NOT_A_MODEL)
    assert server.answered == 2


def test_the_scripted_server_refuses_a_stream_and_lists_its_model(
    served: tuple[ModuleType, openai.OpenAI],
) -> None:
    server, client = served

    with pytest.raises(openai.BadRequestError, match="does not stream"):
        client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    assert [model.id for model in client.models.list()] == ["scripted-lesson"]
    assert server.answered == 0


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/chat/completions", b"{not json", 400),
        ("/v1/chat/completions", b'{"model": "m"}', 400),
        ("/v1/completions", b"{}", 404),
    ],
)
def test_a_bad_request_gets_an_openai_shaped_error(
    served: tuple[ModuleType, openai.OpenAI], path: str, body: bytes, status: int
) -> None:
    server, _ = served
    url = server.base_url.removesuffix("/v1") + path

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=10)

    assert refused.value.code == status
    assert set(json.loads(refused.value.read())["error"]) >= {"message", "type"}


def test_the_lesson_gets_the_scripted_server_and_none_of_the_users_endpoint(
    lesson_server: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-users-own")
    monkeypatch.setenv("OPENAI_MODEL", "gpt-users")
    monkeypatch.setenv("PATH_LIKE_SETTING", "kept")

    environment = lesson_server.lesson_environment("http://127.0.0.1:9/v1")

    assert "OPENAI_API_KEY" not in environment and "OPENAI_MODEL" not in environment
    assert environment["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert environment["AGENT_TUTORIAL_MODEL"] == "scripted-lesson"
    assert environment["PATH_LIKE_SETTING"] == "kept"


# --- each lesson is the previous plus one idea --------------------------------------------------

STEP_BUDGET = {step: 320 for step in range(1, 7)} | {7: 600, 8: 250}


def step_lines(chapter: int) -> list[str]:
    """The lines `diff` adds or removes from lesson `chapter` to the next."""
    return changed_lines(lesson_path(chapter).read_text(), lesson_path(chapter + 1).read_text())


def test_lesson_1_stays_within_150_lines() -> None:
    assert len(lesson_path(1).read_text().splitlines()) <= 150


@pytest.mark.parametrize("chapter", range(1, 9))
def test_each_step_stays_within_its_diff_budget(chapter: int) -> None:
    assert len(step_lines(chapter)) <= STEP_BUDGET[chapter]


@pytest.mark.parametrize("chapter", range(1, 9))
def test_a_step_changes_one_header_line_and_the_chapter_number(chapter: int) -> None:
    before = lesson_path(chapter).read_text().splitlines()
    after = lesson_path(chapter + 1).read_text().splitlines()
    header = before.index("from __future__ import annotations")

    assert after.index("from __future__ import annotations") == header
    changed = [n for n in range(header) if before[n] != after[n]]
    assert changed == [0]  # the line that names this lesson's idea
    assert f"CHAPTER = {chapter}" in before and f"CHAPTER = {chapter + 1}" in after
    numbered = re.compile(r"Chapter \d+ lesson|Lesson \d+ of|lesson-diff A=\d")
    assert not [line for line in step_lines(chapter) if numbered.search(line)]
