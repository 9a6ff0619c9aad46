"""The standalone lessons `chapters/chNN.py`, each run as a real process against the loopback
server (real openai SDK, real HTTP), asserting the behaviour its chapter teaches, and the
same request-body contracts the package's end-to-end tests assert (`tests/contracts.py`)."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_tutorial.features.compaction import (
    COMPACTED_TOOL_RESULT,
    CONTINUE_AFTER_SUMMARY,
    SUMMARY_SYSTEM_PROMPT,
    CompactionSettings,
)
from agent_tutorial.features.compaction.summary import SUMMARY_FIELDS, SUMMARY_INSTRUCTION
from agent_tutorial.features.todos import REMINDER_AFTER_TOOL_ROUNDS
from tests.conftest import (
    TEST_API_KEY,
    WAIT_S,
    CliRun,
    processes_with_marker,
    sleeping,
    wait_until,
    write_state,
)
from tests.contracts import (
    ANY_PATH,
    ARTIFACTS,
    BLOCKING_HOOK,
    CHILD_PROMPT,
    CIRCUIT_OPENING_KINDS,
    LARGE_READ_COUNT,
    PLAN,
    SKILL,
    STRICT_SERVER,
    SUMMARY,
    THIRD_BAD_SUMMARY,
    Body,
    artifact_files,
    assert_child_starts_fresh,
    assert_every_request_fits_strict_servers,
    assert_first_two_of_five_reads_cleared,
    assert_plan_reminder_only_in_the_fourth_request,
    overflow,
    persisted_block,
    queue_large_reads,
    queue_three_failed_summaries,
    read_call,
    request_kinds,
    summary_reply,
    tool_contents,
    tool_names,
    tool_reply_for,
    wire_summary,
    write_text_file,
)
from tests.launcher import as_text, run_to_end, start
from tests.lesson_support import CHAPTERS, LESSONS, lesson_path, load_lesson
from tests.loopback import (
    LoopbackServer,
    Reply,
    conversation,
    error_reply,
    reminder_text,
    system_notes,
    text_stream,
    tool_stream,
)
from tests.terminal import Terminal

RunLesson = Callable[..., CliRun]


def lesson_environment(
    loopback: LoopbackServer, env: dict[str, str] | None = None
) -> dict[str, str]:
    """Our environment plus the loopback endpoint and model a lesson reads, then `env`."""
    return {
        **os.environ,
        "OPENAI_BASE_URL": loopback.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "AGENT_TUTORIAL_MODEL": "loopback-model",
        **(env or {}),
    }


def lesson_terminal(
    chapter: int, workspace: Path, loopback: LoopbackServer, *args: str
) -> Terminal:
    """`python chapters/chNN.py ARGS` on a real pty in `workspace`, against the loopback."""
    return Terminal(
        list(args),
        program=[str(lesson_path(chapter))],
        cwd=workspace,
        env=lesson_environment(loopback),
    )


@pytest.fixture
def run_lesson(workspace: Path, loopback: LoopbackServer) -> Iterator[RunLesson]:
    """Runs `python chapters/chNN.py --prompt PROMPT ARGS` in `workspace` against a loopback
    server as strict as llama-cpp-python's, then checks issue 9's wire rules on every request
    the run sent."""
    loopback.quirks = STRICT_SERVER

    def run(
        chapter: int, *args: str, prompt: str = "go", env: dict[str, str] | None = None
    ) -> CliRun:
        done = run_to_end(
            [str(lesson_path(chapter)), "--prompt", prompt, *args],
            cwd=workspace,
            env=lesson_environment(loopback, env),
            timeout_s=120,
        )
        assert_every_request_fits_strict_servers(loopback)  # every run, every lesson
        return CliRun(done.returncode, done.stdout, done.stderr)

    yield run


def auto(chapter: int) -> tuple[str, ...]:
    """`-y` where the lesson has permissions (chapter 3 on), so only the lesson's idea acts."""
    return ("-y",) if chapter >= 3 else ()


# --- every lesson ----------------------------------------------------------------------------


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_lesson_imports_only_the_standard_library_and_openai(chapter: int) -> None:
    tree = ast.parse(lesson_path(chapter).read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    assert "agent_tutorial" not in imported
    assert imported - set(sys.stdlib_module_names) == {"openai"}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_lesson_answers_on_stdout_and_logs_each_tool_call_on_stderr_within_the_wire_rules(
    run_lesson: RunLesson, loopback: LoopbackServer, chapter: int
) -> None:
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "echo one"}), ("b2", "bash", {"command": "true"})]),
        text_stream("All done."),
    )

    result = run_lesson(chapter, *auto(chapter))

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "All done.\n"
    assert [line.split()[:2] for line in result.stderr.splitlines() if line.startswith("•")] == [
        ["•", "bash"],
        ["•", "bash"],
    ]
    assistant = loopback.requests[1]["messages"][2]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
    assert all(body["max_tokens"] == 2_048 for body in loopback.requests)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_lessons_first_request_and_its_default_output_cap_fit_an_8k_window(
    run_lesson: RunLesson, loopback: LoopbackServer, chapter: int
) -> None:
    """Counted at 3 bytes a token, more tokens than any tokenizer makes of English and JSON."""
    loopback.queue(text_stream("Hello."))

    result = run_lesson(chapter, *auto(chapter))

    assert result.exit_code == 0, result.stderr
    (body,) = loopback.requests
    assert len(json.dumps(body)) // 3 + body["max_tokens"] <= 8_192


@pytest.mark.parametrize("chapter", [1, 8])
@pytest.mark.parametrize(
    ("args", "env", "cap"),
    [
        (("--max-tokens", "512"), {}, 512),
        ((), {"LESSON_MAX_TOKENS": "1000"}, 1_000),
        (("--max-tokens", "512"), {"LESSON_MAX_TOKENS": "1000"}, 512),
    ],
)
def test_a_lessons_output_cap_comes_from_max_tokens_or_lesson_max_tokens(
    run_lesson: RunLesson,
    loopback: LoopbackServer,
    chapter: int,
    args: tuple[str, ...],
    env: dict[str, str],
    cap: int,
) -> None:
    loopback.queue(text_stream("Hello."))

    result = run_lesson(chapter, *auto(chapter), *args, env=env)

    assert result.exit_code == 0, result.stderr
    assert [body["max_tokens"] for body in loopback.requests] == [cap]


@pytest.mark.parametrize("chapter", [1, 8])
def test_a_lesson_output_cap_that_is_not_a_number_is_a_usage_error(
    run_lesson: RunLesson, loopback: LoopbackServer, chapter: int
) -> None:
    result = run_lesson(chapter, env={"LESSON_MAX_TOKENS": "lots"})

    assert result.exit_code == 2
    assert "--max-tokens: invalid int value: 'lots'" in result.stderr
    assert "Traceback" not in result.stderr
    assert loopback.requests == []


@pytest.mark.parametrize("chapter", [1, 8])
def test_lesson_turns_a_provider_error_into_one_line_without_a_traceback(
    run_lesson: RunLesson, loopback: LoopbackServer, chapter: int
) -> None:
    loopback.queue(error_reply(404, {"error": {"message": "The model `x` does not exist"}}))

    result = run_lesson(chapter)

    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert line == "error: Error code: 404 - The model `x` does not exist"
    assert result.stdout == ""


@pytest.mark.usefixtures("sigint_raises_keyboard_interrupt")
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_ctrl_c_while_bash_runs_ends_the_lesson_with_130_and_one_line_leaving_nothing(
    workspace: Path, loopback: LoopbackServer, marker: str, chapter: int
) -> None:
    loopback.quirks = STRICT_SERVER
    loopback.queue(tool_stream([("b1", "bash", {"command": "sleep 60"})]))

    with start(
        [str(lesson_path(chapter)), "--prompt", "wait", *auto(chapter)],
        cwd=workspace,
        env=lesson_environment(loopback),
        new_session=True,  # its own process group, as a terminal's foreground job
    ) as lesson:
        assert wait_until(lambda: sleeping(marker)), "bash never started sleeping"
        # Ctrl-C on a terminal signals the whole foreground group, lesson and bash alike
        # (signalling the lesson alone raced with subprocess start-up under load).
        os.killpg(lesson.pid, signal.SIGINT)
        stdout, stderr = map(as_text, lesson.communicate(timeout=WAIT_S))

    assert lesson.returncode == 130, stderr
    assert stderr.splitlines()[-1:] == ["error: interrupted"]
    assert "Traceback" not in stderr
    assert stdout == ""
    assert wait_until(lambda: processes_with_marker(marker) == []), "bash was left running"


# --- chapter 1: the loop and bash ----------------------------------------------------------


def test_ch1_bash_output_and_exit_code_reach_the_model(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    loopback.queue(
        tool_stream([("b1", "bash", {"command": "cat a.txt; exit 3"})]),
        text_stream("It says alpha."),
    )

    result = run_lesson(1)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "It says alpha."
    reply = tool_reply_for(loopback, 1, "b1")
    assert reply.startswith("alpha\n") and reply.endswith("[exit code 3]")
    assert tool_names(loopback.requests[0]) == ["bash"]


def test_ch1_env_in_bash_never_shows_the_lessons_api_key(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    loopback.queue(tool_stream([("b1", "bash", {"command": "env"})]), text_stream("Seen."))

    result = run_lesson(1)

    assert result.exit_code == 0, result.stderr
    assert "AGENT_TUTORIAL_MODEL=loopback-model" in tool_reply_for(loopback, 1, "b1")
    assert TEST_API_KEY not in json.dumps(loopback.requests)


@pytest.mark.parametrize("chapter", [1, 8])
def test_trace_prints_one_line_per_request_with_its_bytes_roles_and_tools(
    run_lesson: RunLesson, loopback: LoopbackServer, chapter: int
) -> None:
    loopback.queue(tool_stream([("b1", "bash", {"command": "true"})]), text_stream("Done."))

    result = run_lesson(chapter, "--trace", *auto(chapter))

    assert result.exit_code == 0, result.stderr
    traced = [line for line in result.stderr.splitlines() if line.startswith("⇢ ")]
    tools = " ".join(tool_names(loopback.requests[0]))
    assert [line.split(" B: ")[1] for line in traced] == [
        f"system user; tools: {tools}",
        f"system user assistant tool; tools: {tools}",
    ]
    sizes = [int(line.split()[1].replace(",", "")) for line in traced]
    assert sizes[0] < sizes[1] and sizes[0] > len(json.dumps(loopback.requests[0]["messages"]))


def test_a_lesson_reads_its_endpoint_from_the_env_file_when_the_environment_has_none(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / ".env").write_text(
        f"OPENAI_BASE_URL={loopback.base_url}\nOPENAI_API_KEY={TEST_API_KEY}\nOPENAI_MODEL=from-file\n"
    )
    loopback.queue(text_stream("Found it."))
    unset = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "AGENT_TUTORIAL_MODEL": ""}

    result = run_lesson(2, env=unset)

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Found it.\n"
    assert loopback.requests[0]["model"] == "from-file"
    assert loopback.headers[0]["authorization"] == f"Bearer {TEST_API_KEY}"


# --- chapter 2: the registry and the workspace boundary ------------------------------------


@pytest.mark.parametrize("chapter", [2, 8])
def test_a_tool_call_written_as_text_runs_and_the_history_records_a_real_call(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path, chapter: int
) -> None:
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "deep.py").write_text("x = 1\n")
    call_text = '```json\n{"name": "glob", "arguments": {"pattern": "**/*.py"}}\n```'
    loopback.queue(text_stream(call_text), text_stream("One file."))

    result = run_lesson(chapter)

    assert result.exit_code == 0, result.stderr
    assert result.stdout == "One file.\n"
    assistant, tool = loopback.requests[1]["messages"][2:4]
    assert assistant["content"] == "" and "glob" not in assistant["content"]
    (call,) = assistant["tool_calls"]
    assert call["function"] == {"name": "glob", "arguments": '{"pattern": "**/*.py"}'}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": "pkg/deep.py"}
    assert "⚙ read a tool call written as text: glob" in result.stderr


def test_ch1_does_not_read_calls_written_as_text_yet(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    call_text = '{"name": "bash", "arguments": {"command": "touch made.txt"}}'
    loopback.queue(text_stream(call_text))

    result = run_lesson(1)

    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{call_text}\n"
    assert len(loopback.requests) == 1


def test_ch2_paths_that_escape_the_workspace_are_refused(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    secret = workspace.parent / "secret.txt"
    secret.write_text("OUTSIDE-SECRET")
    (workspace / "link.txt").symlink_to(secret)
    loopback.queue(
        tool_stream(
            [
                ("r1", "read_file", {"path": "../secret.txt"}),
                ("r2", "read_file", {"path": "link.txt"}),
                ("w1", "write_file", {"path": "../made.txt", "content": "x"}),
                ("g1", "grep", {"pattern": "SECRET"}),
            ]
        ),
        text_stream("Refused."),
    )

    result = run_lesson(2)

    assert result.exit_code == 0, result.stderr
    for call_id in ("r1", "r2", "w1"):
        assert tool_reply_for(loopback, 1, call_id).startswith("Error [path_outside_workspace]")
    assert tool_reply_for(loopback, 1, "g1") == "No matches."
    assert "OUTSIDE-SECRET" not in json.dumps(loopback.requests)
    assert not (workspace.parent / "made.txt").exists()


def test_ch2_the_agents_own_folder_is_closed_to_the_tools_whatever_the_name(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / ".agent_tutorial" / "artifacts").mkdir(parents=True)
    (workspace / ".agent_tutorial" / ".env").write_text("OPENAI_API_KEY=sk-in-the-env-file\n")
    (workspace / ".agent_tutorial" / "artifacts" / "kept.txt").write_text("ARTIFACT-TEXT\n")
    (workspace / "door").symlink_to(".agent_tutorial")
    loopback.queue(
        tool_stream(
            [
                ("e1", "read_file", {"path": ".agent_tutorial/.env"}),
                ("e2", "read_file", {"path": "door/.env"}),
                ("e3", "grep", {"pattern": "sk-", "path": ".agent_tutorial"}),
                ("e4", "grep", {"pattern": "sk-in", "glob": "door/*"}),
                ("a1", "read_file", {"path": ".agent_tutorial/artifacts/kept.txt"}),
            ]
        ),
        text_stream("Kept out."),
    )

    result = run_lesson(2)

    assert result.exit_code == 0, result.stderr
    for call_id in ("e1", "e2", "e3", "a1"):  # artifacts/ opens in chapter 8
        assert tool_reply_for(loopback, 1, call_id).startswith("Error [protected_path]")
    assert tool_reply_for(loopback, 1, "e4") == "No matches."
    assert "sk-in-the-env-file" not in json.dumps(loopback.requests)
    assert "ARTIFACT-TEXT" not in json.dumps(loopback.requests)


def test_ch2_a_bad_call_becomes_an_error_the_model_reads(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    loopback.queue(
        tool_stream(
            [
                ("u1", "nope", {}),
                ("j1", "read_file", "{not json"),
                ("a1", "read_file", {"offset": 2}),
            ]
        ),
        text_stream("Sorry."),
    )

    result = run_lesson(2)

    assert result.exit_code == 0, result.stderr
    assert tool_reply_for(loopback, 1, "u1").startswith("Error [unknown_tool]")
    assert tool_reply_for(loopback, 1, "j1").startswith("Error [invalid_json]")
    assert tool_reply_for(loopback, 1, "a1") == "Error [invalid_arguments]: path: Field required"


# --- chapter 3: permissions ---------------------------------------------------------------


def test_ch3_without_a_terminal_a_write_is_denied_and_the_model_reads_why(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "notes.txt", "content": "hello"}),
                ("r1", "glob", {"pattern": "*"}),
            ]
        ),
        text_stream("I could not write it."),
    )

    result = run_lesson(3)

    assert result.exit_code == 0, result.stderr
    assert not (workspace / "notes.txt").exists()
    reply = tool_reply_for(loopback, 1, "w1")
    assert reply.startswith("Error [permission_denied]")
    assert "no terminal" in reply and "--permission-mode accept-edits" in reply
    assert not tool_reply_for(loopback, 1, "r1").startswith("Error [")  # reads are allowed
    assert "⚖ deny write_file notes.txt" in result.stderr


def test_ch3_on_a_terminal_the_user_is_asked_and_the_answer_decides(
    workspace: Path, loopback: LoopbackServer
) -> None:
    loopback.quirks = STRICT_SERVER
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "yes.txt", "content": "approved"}),
                ("w2", "write_file", {"path": "no.txt", "content": "declined"}),
            ]
        ),
        text_stream("One of two."),
    )
    terminal = lesson_terminal(3, workspace, loopback, "--prompt", "write both")
    try:
        for asked, answer in enumerate(("y", "n"), start=1):
            terminal.wait_for_text("Allow? [y/N]", times=asked)
            terminal.enter(answer)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()

    assert (workspace / "yes.txt").read_text() == "approved"
    assert not (workspace / "no.txt").exists()
    assert tool_reply_for(loopback, 1, "w2") == "Error [permission_denied]: the user said no"
    assert_every_request_fits_strict_servers(loopback)


def test_ch3_accept_edits_writes_but_bash_still_asks(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream(
            [
                ("w1", "write_file", {"path": "notes.txt", "content": "hello"}),
                ("b1", "bash", {"command": "touch made.txt"}),
            ]
        ),
        text_stream("Wrote it."),
    )

    result = run_lesson(3, "--permission-mode", "accept-edits")

    assert result.exit_code == 0, result.stderr
    assert (workspace / "notes.txt").read_text() == "hello"
    assert "--permission-mode auto" in tool_reply_for(loopback, 1, "b1")
    assert not (workspace / "made.txt").exists()


def test_ch3_auto_mode_never_writes_into_git_or_the_agents_own_folder(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / ".git").mkdir()
    (workspace / "cfgdir").mkdir()
    (workspace / ".agent_tutorial").symlink_to("cfgdir")
    loopback.queue(
        tool_stream(
            [
                ("c1", "write_file", {"path": ".git/config", "content": "x"}),
                ("c2", "write_file", {"path": "cfgdir/config.toml", "content": "x"}),
            ]
        ),
        text_stream("Both refused."),
    )

    result = run_lesson(3, "-y")

    assert result.exit_code == 0, result.stderr
    for call_id in ("c1", "c2"):
        assert tool_reply_for(loopback, 1, call_id).startswith(
            "Error [permission_denied]: boundary"
        )
    assert not (workspace / ".git" / "config").exists()
    assert not (workspace / "cfgdir" / "config.toml").exists()


def test_ch3_a_deny_rule_holds_in_auto_mode_and_an_allow_rule_never_covers_a_chain(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    write_state(
        workspace,
        "config.toml",
        '[[permissions.rules]]\ntool = "bash"\npattern = "^rm "\nbehavior = "deny"\n'
        '[[permissions.rules]]\ntool = "bash"\npattern = "^echo "\nbehavior = "allow"\n',
    )
    (workspace / "keep.txt").write_text("precious")
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": "rm keep.txt"}),
                ("b2", "bash", {"command": "echo hi"}),
                ("b3", "bash", {"command": "echo hi; touch made.txt"}),
            ]
        ),
        text_stream("Kept it."),
    )

    auto_result = run_lesson(3, "-y")
    assert auto_result.exit_code == 0, auto_result.stderr
    assert "deny by a rule" in tool_reply_for(loopback, 1, "b1")

    loopback.queue(tool_stream([("b3", "bash", {"command": "echo hi; touch made.txt"})]))
    loopback.queue(text_stream("Denied."))
    asked = run_lesson(3)
    assert asked.exit_code == 0, asked.stderr
    assert "hi" in tool_reply_for(loopback, 1, "b2")
    assert "no terminal" in tool_reply_for(loopback, 3, "b3")
    assert (workspace / "keep.txt").read_text() == "precious"


# --- chapter 4: hooks ------------------------------------------------------------------------


def write_hook(workspace: Path, source: str, matcher: str = "bash") -> None:
    (workspace / "guard.py").write_text(source)
    write_state(
        workspace,
        "config.toml",
        f"[[hooks.PreToolUse]]\nmatcher = \"{matcher}\"\ncommand = '{sys.executable} guard.py'\n",
    )


def test_ch4_a_pre_tool_use_hook_exiting_2_blocks_the_call_and_its_stderr_reaches_the_model(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    write_hook(workspace, BLOCKING_HOOK)
    loopback.queue(
        tool_stream(
            [
                ("b1", "bash", {"command": "touch made.txt"}),
                ("b2", "bash", {"command": "echo still-allowed"}),
            ]
        ),
        text_stream("The hook blocked it."),
    )

    result = run_lesson(4, "-y")

    assert result.exit_code == 0, result.stderr
    assert not (workspace / "made.txt").exists()
    blocked = tool_reply_for(loopback, 1, "b1")
    assert blocked == (
        "Error [hook_blocked]: blocked by a PreToolUse hook: "
        "no new files today: touch is blocked by guard.py"
    )
    assert "still-allowed" in tool_reply_for(loopback, 1, "b2")


def test_ch4_a_broken_hook_stops_the_call_but_not_the_run(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    write_hook(workspace, "import sys\nprint('oops', file=sys.stderr)\nsys.exit(1)\n")
    loopback.queue(tool_stream([("b1", "bash", {"command": "touch made.txt"})]), text_stream("ok"))

    result = run_lesson(4, "-y")

    assert result.exit_code == 0, result.stderr
    assert tool_reply_for(loopback, 1, "b1") == "Error [hook_execution_error]: exit 1: oops"
    assert not (workspace / "made.txt").exists()


# --- chapter 5: todo planning -------------------------------------------------------------


def test_ch5_reminder_comes_after_three_tool_rounds_only_in_that_request(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    loopback.queue(
        *(tool_stream([(f"g{n}", "glob", {"pattern": "*.py"})]) for n in (1, 2, 3)),
        tool_stream([("t1", "todo_write", PLAN)]),
        tool_stream([("g4", "glob", {"pattern": "*.md"})]),
        text_stream("Planned."),
    )

    result = run_lesson(5)

    assert result.exit_code == 0, result.stderr
    assert_plan_reminder_only_in_the_fourth_request(loopback.requests)
    assert "Plan:\n[~] Look around" in result.stderr


def test_ch5_an_invalid_plan_is_rejected_whole(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    two_at_once = {"todos": [{"content": c, "status": "in_progress"} for c in ("a", "b")]}
    loopback.queue(tool_stream([("t1", "todo_write", two_at_once)]), text_stream("ok"))

    result = run_lesson(5)

    assert tool_reply_for(loopback, 1, "t1") == (
        "Error [invalid_arguments]: at most one item may be in_progress"
    )
    assert "Plan:" not in result.stderr


# --- chapter 6: subagents -------------------------------------------------------------------


def test_ch6_the_child_starts_fresh_without_the_task_tool_and_the_parent_gets_its_answer(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    loopback.queue(
        tool_stream([("task1", "task", {"description": "Count files", "prompt": CHILD_PROMPT})]),
        tool_stream([("child-g1", "glob", {"pattern": "**/*.py"})]),  # the child
        text_stream("There is 1 Python file: a.py."),  # the child's answer
        text_stream("The helper found one Python file."),  # the parent
    )

    result = run_lesson(6, prompt="PARENT-SECRET how many files?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "The helper found one Python file."
    parent_first, child_first, child_second, parent_last = loopback.requests
    assert_child_starts_fresh(
        parent_first, [child_first, child_second], CHILD_PROMPT, "PARENT-SECRET"
    )
    assert "a.py" in tool_reply_for(loopback, 2, "child-g1")
    assert tool_reply_for(loopback, 3, "task1") == "There is 1 Python file: a.py."
    assert "PARENT-SECRET" in str(parent_last["messages"])


def test_ch6_a_child_calling_task_gets_an_unknown_tool_error(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    task = ("task", {"description": "again", "prompt": "nest"})
    loopback.queue(
        tool_stream([("task1", *task)]),
        tool_stream([("task2", *task)]),  # the child tries to nest
        text_stream("child done"),
        text_stream("parent done"),
    )

    result = run_lesson(6)

    assert result.exit_code == 0, result.stderr
    assert tool_reply_for(loopback, 2, "task2").startswith("Error [unknown_tool]")


# --- chapter 7: skills ------------------------------------------------------------------------


def test_ch7_the_catalog_is_in_the_system_prompt_and_load_skill_returns_the_body(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "skills" / "release-notes").mkdir(parents=True)
    (workspace / "skills" / "release-notes" / "SKILL.md").write_text(SKILL)
    loopback.queue(
        tool_stream([("s1", "load_skill", {"name": "release-notes"})]), text_stream("Loaded.")
    )

    result = run_lesson(7)

    assert result.exit_code == 0, result.stderr
    system_prompt = system_notes(loopback.requests[0])[0]
    assert "- release-notes: How this team writes release notes." in system_prompt
    assert "BODY-MARKER-42" not in json.dumps(loopback.requests[0])
    body = tool_reply_for(loopback, 1, "s1")
    assert body.startswith("# Skill: release-notes\nDirectory: skills/release-notes\n\n")
    assert "Group entries under Added, Changed and Fixed; BODY-MARKER-42." in body
    assert "description:" not in body


# --- chapter 8: compaction -----------------------------------------------------------------


def test_ch8_uses_the_packages_numbers_and_strings(workspace: Path) -> None:
    lesson, seed = load_lesson(8), CompactionSettings()
    assert lesson.PERSIST_THRESHOLD_BYTES == seed.persist_threshold_bytes == 30_000
    assert lesson.BATCH_BUDGET_BYTES == seed.batch_budget_bytes == 200_000
    assert lesson.PREVIEW_HEAD_BYTES == seed.preview_head_bytes == 2_000
    assert lesson.PREVIEW_TAIL_BYTES == seed.preview_tail_bytes == 2_000
    assert lesson.SNIP_MAX_GROUPS == seed.snip_max_groups == 50
    assert lesson.SNIP_KEEP_HEAD_GROUPS == seed.snip_keep_head_groups == 3
    assert lesson.KEEP_RECENT_TOOL_GROUPS == seed.keep_recent_tool_groups == 3
    assert lesson.SUMMARY_THRESHOLD_BYTES == seed.proactive_threshold_bytes == 50_000
    assert lesson.REACTIVE_TAIL_GROUPS == seed.reactive_tail_groups == 5
    assert lesson.MAX_SUMMARY_FAILURES == seed.summary_failure_limit == 3
    assert lesson.COMPACTED_TOOL_RESULT == COMPACTED_TOOL_RESULT
    assert lesson.SUMMARY_FIELDS == SUMMARY_FIELDS
    assert lesson.SUMMARY_SYSTEM_PROMPT == SUMMARY_SYSTEM_PROMPT
    assert lesson.SUMMARY_INSTRUCTION == SUMMARY_INSTRUCTION
    assert lesson.CONTINUE_AFTER_SUMMARY == CONTINUE_AFTER_SUMMARY
    assert lesson.REMINDER_AFTER_TOOL_ROUNDS == REMINDER_AFTER_TOOL_ROUNDS


def bash_printing(call_id: str, size: int) -> tuple[str, str, dict[str, Any]]:
    """A bash call whose result (output plus the lesson's exit-code line) is `size` bytes."""
    output = size - len("\n[exit code 0]")
    return (call_id, "bash", {"command": f"head -c {output} /dev/zero | tr '\\0' x"})


def test_ch8_a_result_over_30000_bytes_is_persisted_and_one_of_30000_is_not(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(
        tool_stream([bash_printing("at", 30_000), bash_printing("over", 30_001)]),
        text_stream("done"),
    )

    result = run_lesson(8, "-y")

    assert result.exit_code == 0, result.stderr
    contents = tool_contents(loopback.requests[1])
    assert len(contents["at"].encode()) == 30_000
    (artifact,) = artifact_files(workspace, "tool-result")
    full = artifact.read_text()
    assert full == "x" * (30_001 - len("\n[exit code 0]")) + "\n[exit code 0]"
    assert contents["over"] == persisted_block((ARTIFACTS / artifact.name).as_posix(), full)


def test_ch8_with_the_artifact_folder_unusable_every_call_of_the_batch_gets_a_paired_error(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "artifacts").write_text("not a folder")
    loopback.queue(
        tool_stream([bash_printing("big", 40_007), bash_printing("small", 100)]),
        text_stream("Nothing saved."),
    )

    result = run_lesson(8, "-y")

    assert result.exit_code == 0, result.stderr
    contents = tool_contents(loopback.requests[1])
    assert list(contents) == ["big", "small"]
    assert all(
        text.startswith("Error [tool_result_processing_error]: ") for text in contents.values()
    )
    assert "x" * 100 not in json.dumps(loopback.requests)


def test_ch8_a_batch_over_200000_bytes_persists_its_largest_results_first(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    sizes = [27_000, 29_000, 28_000, 27_000, 29_000, 27_000, 27_000, 27_000]  # 221,000 B
    calls = [bash_printing(f"b{n}", size) for n, size in enumerate(sizes)]
    loopback.queue(tool_stream(calls), summary_reply(), text_stream("done"))

    result = run_lesson(8, "-y")

    assert result.exit_code == 0, result.stderr
    assert request_kinds(loopback) == ["agent", "summary", "agent"]
    contents = tool_contents(loopback.requests[1])  # what the summary request read
    persisted = [c for c, text in contents.items() if text.startswith("<persisted-tool-result>")]
    assert persisted == ["b1"]  # 221,000 - 29,000 fits; ties go in call order
    assert len(artifact_files(workspace, "tool-result")) == 1


def test_ch8_after_five_reads_the_first_two_results_are_cleared(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    paths = [write_text_file(workspace, f"notes{n}.txt", 4_000) for n in range(1, 6)]
    loopback.queue(
        *(read_call(f"read-{n}", path) for n, path in enumerate(paths, 1)), text_stream("done")
    )

    result = run_lesson(8)

    assert result.exit_code == 0, result.stderr
    outputs = {f"read-{n}": tool_contents(loopback.requests[n])[f"read-{n}"] for n in range(1, 6)}
    assert all("notes" in output for output in outputs.values())
    assert_first_two_of_five_reads_cleared(loopback, outputs)
    assert "⚙ micro: 1 results cleared" in result.stderr


def test_ch8_past_50_groups_snip_keeps_3_a_marker_and_the_latest_46(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    loopback.queue(*(tool_stream([(f"g{n}", "glob", {"pattern": "*"})]) for n in range(50)))
    loopback.queue(text_stream("done"))

    result = run_lesson(8)

    assert result.exit_code == 0, result.stderr
    fiftieth, last = loopback.requests[49], loopback.requests[50]
    assert "[Compacted:" not in json.dumps(fiftieth)  # 50 groups: no cut yet
    messages = last["messages"][1:]
    assert messages[0] == {"role": "user", "content": "go"}
    assert [m["tool_call_id"] for m in messages[1:5] if m["role"] == "tool"] == ["g0", "g1"]
    assert reminder_text(messages[5]) == "[Compacted: 2 message groups omitted]"
    kept = [m["tool_call_id"] for m in messages[6:] if m["role"] == "tool"]
    assert kept == [f"g{n}" for n in range(4, 50)]  # 46 groups
    assert "⚙ snip: 2 groups omitted" in result.stderr


def test_ch8_over_50000_bytes_the_transcript_is_written_then_a_five_field_summary_asked(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path
) -> None:
    queue_large_reads(loopback, workspace, LARGE_READ_COUNT)
    transcripts_when_asked: list[list[Path]] = []

    def summary_after_looking(body: Body) -> Reply:
        transcripts_when_asked.append(artifact_files(workspace, "transcript"))
        return summary_reply()

    loopback.queue(summary_after_looking, text_stream("done"))

    result = run_lesson(8)

    assert result.exit_code == 0, result.stderr
    assert request_kinds(loopback) == ["agent", "agent", "agent", "summary", "agent"]
    (transcript,) = transcripts_when_asked[0]
    summary_request = loopback.requests[3]
    assert summary_request["messages"][0] == {"role": "system", "content": SUMMARY_SYSTEM_PROMPT}
    assert summary_request["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}
    assert "tools" not in summary_request
    lines = [json.loads(line) for line in transcript.read_text().splitlines()]
    assert lines == conversation(summary_request)[:-1]  # all 7 messages, nothing cleared
    after = loopback.requests[4]
    assert wire_summary(after) == {
        "kind": "compacted_history",
        "transcript_path": ANY_PATH,
        **SUMMARY,
    }
    assert workspace / wire_summary(after)["transcript_path"] == transcript
    assert after["messages"][-1] == {"role": "user", "content": CONTINUE_AFTER_SUMMARY}
    assert [m for m in conversation(after) if m["role"] == "user"] == [after["messages"][-1]]


def test_ch8_an_overflow_is_summarised_keeping_the_last_5_groups_and_retried_once(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    loopback.queue(*(tool_stream([(f"g{n}", "glob", {"pattern": "*"})]) for n in range(7)))
    loopback.queue(overflow("openai"), summary_reply(), text_stream("done after compacting"))

    result = run_lesson(8)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "done after compacting"
    assert request_kinds(loopback) == ["agent"] * 8 + ["summary", "agent"]
    retried = loopback.requests[9]
    assert wire_summary(retried)["kind"] == "compacted_history"
    calls = [m["tool_call_id"] for m in retried["messages"] if m["role"] == "tool"]
    assert calls == ["g2", "g3", "g4", "g5", "g6"]  # the user prompt was group 1 of 8
    assert "reactive: prompt too long" in result.stderr


def test_ch8_a_second_overflow_in_a_turn_ends_the_run_in_one_line(
    run_lesson: RunLesson, loopback: LoopbackServer
) -> None:
    loopback.queue(overflow("openai"), summary_reply(), overflow("openai"), text_stream("unused"))

    result = run_lesson(8)

    assert result.exit_code == 1
    assert request_kinds(loopback) == ["agent", "summary", "agent"]
    assert loopback.pending == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "maximum context length" in line
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("third", sorted(THIRD_BAD_SUMMARY))
def test_ch8_three_failed_summaries_switch_automatic_summaries_off(
    run_lesson: RunLesson, loopback: LoopbackServer, workspace: Path, third: str
) -> None:
    queue_three_failed_summaries(loopback, workspace, third)
    loopback.queue(text_stream("finished anyway"))

    result = run_lesson(8)

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "finished anyway"
    assert request_kinds(loopback) == [*CIRCUIT_OPENING_KINDS, "agent"]
    whole = tool_contents(loopback.requests[1])["large-1"]  # each file is as long as this one
    after_first_failure = tool_contents(loopback.requests[4])
    assert list(after_first_failure) == ["large-1", "large-2", "large-3"]
    assert after_first_failure["large-1"] == whole
    assert {len(content) for content in after_first_failure.values()} == {len(whole)}
    lines = result.stderr.splitlines()
    assert sum("automatic summary failed" in line for line in lines) == 3
    assert sum("automatic summaries are off" in line for line in lines) == 1


# --- chapter 9 -------------------------------------------------------------------------------


def test_ch9_on_a_terminal_an_mcp_call_is_asked_for_with_its_arguments(
    workspace: Path, loopback: LoopbackServer
) -> None:
    server = LESSONS / "offline" / "lesson_mcp_server.py"
    config = workspace / ".agent_tutorial" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f"[mcp_servers.glossary]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(server))}]\n"
    )
    loopback.quirks = STRICT_SERVER
    call = ("m1", "mcp__glossary__define", {"term": "MCP"})
    loopback.queue(tool_stream([call]), text_stream("Declined."))
    terminal = lesson_terminal(9, workspace, loopback, "--prompt", "define MCP")
    try:
        terminal.wait_for_text("Allow? [y/N]")
        assert 'mcp__glossary__define wants to run: {"term": "MCP"}' in terminal.flat_text()
        terminal.enter("n")
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()

    assert tool_reply_for(loopback, 1, "m1") == "Error [permission_denied]: the user said no"


# --- make lesson-diff ------------------------------------------------------------------------


def test_make_lesson_diff_prints_the_chapter_and_succeeds() -> None:
    done = subprocess.run(
        ["make", "-s", "lesson-diff", "A=3", "B=4"],
        cwd=LESSONS.parent,
        capture_output=True,
        text=True,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("--- chapters/ch03.py")
    assert "+def run_pre_tool_hooks(" in done.stdout
