"""`run --continue`, `run --resume ID` and `sessions list|show` through the real CLI, against
the loopback server; damaged session files (torn line, NUL bytes, a crash mid-tool-call)
resume cleanly."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_tutorial.commands.process import command_as_invoked
from agent_tutorial.core.messages import (
    ChatMessage,
    assistant_message,
    from_wire,
    to_wire,
    tool_call,
    user_message,
    validate_tool_pairing,
)
from agent_tutorial.features.sessions import (
    INTERRUPTED_RESULT,
    SessionInfo,
    SessionLog,
    SessionMeta,
    list_sessions,
    load_session,
)
from agent_tutorial.render import format_bytes
from tests.conftest import CliRun, run_process
from tests.loopback import LoopbackServer, exchanged, text_stream
from tests.terminal import Terminal

CTRL_D = "\x04"

RunCli = Any


def run_once(run_cli: RunCli, loopback: LoopbackServer, prompt: str, answer: str) -> CliRun:
    loopback.queue(text_stream(answer))
    result: CliRun = run_cli("run", "--chapter", "2", "--prompt", prompt)
    assert result.exit_code == 0, result.stderr
    return result


def only_session_id(workspace: Path) -> str:
    [info] = list_sessions(workspace)
    return info.session_id


def session_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [orjson.loads(line) for line in data.splitlines()]


def test_continue_sends_the_earlier_turns_again(run_cli: RunCli, loopback: LoopbackServer) -> None:
    run_once(run_cli, loopback, "What is in the repo?", "A tutorial agent.")
    loopback.queue(text_stream("Eight chapters."))

    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "How many chapters?")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Eight chapters."
    assert exchanged(loopback.requests[1]) == [
        {"role": "user", "content": "What is in the repo?"},
        {"role": "assistant", "content": "A tutorial agent."},
        {"role": "user", "content": "How many chapters?"},
    ]


def two_turns_in_one_session(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> SessionInfo:
    """A session where 'first' was answered 'one', then, continued, 'second' 'two'."""
    run_once(run_cli, loopback, "first", "one")
    loopback.queue(text_stream("two"))
    run_cli("run", "--chapter", "2", "--continue", "--prompt", "second")
    [info] = list_sessions(workspace)
    return info


def test_continue_appends_to_the_same_session(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    info = two_turns_in_one_session(run_cli, loopback, workspace)

    assert len(list_sessions(workspace)) == 1
    assert load_session(info.path, repair=False).turns == 2
    assert info.first_prompt == "first"


def test_resume_picks_the_named_session_not_the_latest(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "about apples", "apples are red")
    apples = only_session_id(workspace)
    run_once(run_cli, loopback, "about pears", "pears are green")
    loopback.queue(text_stream("still red"))

    result = run_cli("run", "--chapter", "2", "--resume", apples[:5], "--prompt", "and now?")

    assert result.exit_code == 0, result.stderr
    assert exchanged(loopback.requests[2]) == [
        {"role": "user", "content": "about apples"},
        {"role": "assistant", "content": "apples are red"},
        {"role": "user", "content": "and now?"},
    ]


def test_continue_without_a_saved_session_is_a_usage_error(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "hello")

    assert result.exit_code == 2
    assert "no saved session to continue" in result.stderr
    assert loopback.requests == []


def test_continue_and_resume_together_is_a_usage_error(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "hello", "hi")
    session_id = only_session_id(workspace)

    result = run_cli("run", "--continue", "--resume", session_id, "--prompt", "again")

    assert result.exit_code == 2
    assert "--continue and --resume each choose a session; pass one" in result.stderr
    assert len(loopback.requests) == 1


def test_resume_with_an_unknown_id_is_a_usage_error(
    run_cli: RunCli, loopback: LoopbackServer
) -> None:
    run_once(run_cli, loopback, "hello", "hi")

    result = run_cli("run", "--chapter", "2", "--resume", "ffffffff", "--prompt", "again")

    assert result.exit_code == 2
    assert "no session id starts with 'ffffffff'" in result.stderr
    assert len(loopback.requests) == 1


def test_sessions_list_shows_id_chapter_size_and_first_prompt(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "Explain the loop", "It is a paragraph.")
    [info] = list_sessions(workspace)

    result = run_cli("sessions", "list")

    assert result.exit_code == 0
    [header, row] = result.stdout.strip().splitlines()
    assert header.split() == ["id", "started", "chapter", "size", "first", "prompt"]
    cells = row.split()
    assert cells[0] == info.session_id
    assert cells[3:] == ["2", *format_bytes(info.size_bytes).split(), "Explain", "the", "loop"]


def damage_line(path: Path, number: int) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[number - 1] = b"{not json"
    path.write_bytes(b"\n".join(lines))


def two_sessions_the_newer_damaged(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, line: int = 3
) -> tuple[SessionInfo, SessionInfo]:
    """Two sessions, the newer damaged on `line`: 3 is the answer, 2 the prompt the
    listing shows (a header line, so listing it finds the damage)."""
    run_once(run_cli, loopback, "older", "one")
    run_once(run_cli, loopback, "newer", "two")
    newer, older = list_sessions(workspace)
    damage_line(newer.path, line)
    return newer, older


def test_sessions_list_shows_a_damaged_file_and_check_names_its_bad_line(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    newer, older = two_sessions_the_newer_damaged(run_cli, loopback, workspace)

    listed = run_cli("sessions", "list")
    checked = run_cli("sessions", "list", "--check")

    assert listed.exit_code == 0
    assert newer.session_id in listed.stdout and older.session_id in listed.stdout
    assert checked.exit_code == 1
    assert f"{newer.path.name}:3: line is not JSON" in " ".join(checked.stdout.split())
    assert "1 of 2 session(s) cannot be resumed" in checked.stderr


@pytest.mark.parametrize(
    "damaged", [2, 3], ids=["the prompt, right after the meta line", "the answer"]
)
def test_continue_says_which_session_it_skipped_and_which_it_resumed(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, damaged: int
) -> None:
    newer, older = two_sessions_the_newer_damaged(run_cli, loopback, workspace, damaged)
    loopback.queue(text_stream("three"))

    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "again")

    assert result.exit_code == 0, result.stderr
    stderr = " ".join(result.stderr.split())
    assert f"warning: skipped session {newer.session_id}: " in stderr
    assert f"{newer.path.name}:{damaged}: line is not JSON" in stderr
    assert f"resumed {older.session_id} (2 messages, chapter 2)" in stderr
    assert [m["content"] for m in exchanged(loopback.requests[-1])] == ["older", "one", "again"]


DAMAGED_SESSION_COMMANDS = {
    "run --resume": ("run", "--chapter", "2", "--prompt", "again", "--resume"),
    "sessions show": ("sessions", "show"),
    "bench --session": ("bench", "--session"),
    "sessions list --check": ("sessions", "list", "--check"),
}
"""Every command that reads a session whole; those ending in an option take the id."""


@pytest.mark.parametrize(
    "command", DAMAGED_SESSION_COMMANDS.values(), ids=list(DAMAGED_SESSION_COMMANDS)
)
def test_every_command_that_meets_a_damaged_session_exits_1(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, command: tuple[str, ...]
) -> None:
    newer, _ = two_sessions_the_newer_damaged(run_cli, loopback, workspace)
    arguments = command if command[-1] == "--check" else (*command, newer.session_id)

    result = run_cli(*arguments)

    assert result.exit_code == 1, result.stderr
    shown = " ".join((result.stdout + result.stderr).split())
    assert f"{newer.path.name}:3: line is not JSON" in shown
    assert len(loopback.requests) == 2  # only the two runs that recorded the sessions


def test_sessions_show_prints_the_lines_that_read_and_marks_the_damaged_one(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    info = two_turns_in_one_session(run_cli, loopback, workspace)
    damage_line(info.path, 4)  # the first answer (after the prompt and its usage record)

    result = run_cli("sessions", "show", info.session_id, env={"COLUMNS": "200"})

    assert result.exit_code == 1
    rows = re.findall(r"^│ +(\d) │ (\w+)\s+│ (.+?)\s+│$", result.stdout, re.MULTILINE)
    assert [row[:2] for row in rows] == [
        ("1", "user"),
        ("2", "damaged"),
        ("3", "user"),
        ("4", "assistant"),
    ]
    assert rows[1][2].startswith(f"{info.path.name}:4: line is not JSON")
    assert [row[2] for row in rows[2:]] == ["second", "two"]
    assert result.stderr.startswith("error: ")
    assert f"{info.path.name}:4: line is not JSON" in " ".join(result.stderr.split())


def test_continue_with_only_damaged_sessions_fails_naming_them(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "only", "one")
    [info] = list_sessions(workspace)
    damage_line(info.path, 3)

    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "again")

    assert result.exit_code == 2
    assert f"skipped session {info.session_id}" in result.stderr
    assert "every session with a prompt is damaged (1)" in result.stderr


def test_resume_prints_what_it_resumed(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "first", "one")
    session_id = only_session_id(workspace)
    loopback.queue(text_stream("two"))

    result = run_cli("run", "--chapter", "2", "--resume", session_id, "--prompt", "second")

    assert result.exit_code == 0, result.stderr
    assert f"resumed {session_id} (2 messages, chapter 2)" in result.stderr


def resume_a_chapter_2_session(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, *chapter: str
) -> tuple[str, str, set[str]]:
    """Record a chapter 2 session, continue it with `chapter` flags; the session id, the
    flattened stderr and the tool names of the resumed request."""
    run_once(run_cli, loopback, "first", "one")
    session_id = only_session_id(workspace)
    loopback.queue(text_stream("two"))
    result = run_cli("run", *chapter, "--continue", "--prompt", "second")
    assert result.exit_code == 0, result.stderr
    tools = {tool["function"]["name"] for tool in loopback.requests[-1]["tools"]}
    return session_id, " ".join(result.stderr.split()), tools


@pytest.mark.parametrize("chapter", [(), ("--chapter", "2")], ids=["recorded", "named"])
def test_resuming_under_the_recorded_chapter_names_it_without_a_warning(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, chapter: tuple[str, ...]
) -> None:
    session_id, stderr, tools = resume_a_chapter_2_session(run_cli, loopback, workspace, *chapter)

    assert stderr == f"resumed {session_id} (2 messages, chapter 2)"
    assert "todo_write" not in tools  # chapter 2's tools, not chapter 8's


def test_resuming_under_an_explicit_other_chapter_warns_that_tools_differ(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    session_id, stderr, tools = resume_a_chapter_2_session(
        run_cli, loopback, workspace, "--chapter", "5"
    )

    expected = f"session {session_id} was recorded with chapter 2 and continues under chapter 5"
    assert expected in stderr
    assert f"resumed {session_id} (2 messages, chapter 5)" in stderr
    assert "todo_write" in tools


def test_sessions_prune_is_a_dry_run_without_yes(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "old", "one")
    [info] = list_sessions(workspace)
    month_ago = time.time() - 31 * 86_400
    os.utime(info.path, (month_ago, month_ago))
    run_once(run_cli, loopback, "new", "two")

    dry = run_cli("sessions", "prune", "--older-than", "30d")
    assert dry.exit_code == 0
    assert info.path.name in dry.stdout and "1 session(s) older than 30d; dry run" in dry.stdout
    assert info.path.exists()

    done = run_cli("sessions", "prune", "--older-than", "30d", "--yes")
    assert done.exit_code == 0
    assert "deleted 1 session(s)" in done.stdout
    assert not info.path.exists()
    assert [remaining.first_prompt for remaining in list_sessions(workspace)] == ["new"]


def test_sessions_prune_keeps_a_session_that_is_open(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "old", "one")
    [info] = list_sessions(workspace)
    os.utime(info.path, (0, 0))

    with SessionLog.open_existing(info.path):
        result = run_cli("sessions", "prune", "--older-than", "1d", "--yes")

    assert "in use by a running session; kept" in result.stderr
    assert "deleted 0 session(s)" in result.stdout
    assert info.path.exists()


def test_sessions_list_without_sessions_says_so(run_cli: RunCli) -> None:
    result = run_cli("sessions", "list")

    assert result.exit_code == 0
    assert result.stdout.strip() == "no saved sessions in this workspace"


def test_sessions_show_prints_every_message(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "Explain the loop", "It is a paragraph.")
    session_id = only_session_id(workspace)

    result = run_cli("sessions", "show", session_id)

    assert result.exit_code == 0
    rows = re.findall(r"^│ (\d) │ (\w+)\s+│ (.+?)\s+│$", result.stdout, re.MULTILINE)
    assert rows == [("1", "user", "Explain the loop"), ("2", "assistant", "It is a paragraph.")]


def test_sessions_show_with_an_unknown_id_is_a_usage_error(run_cli: RunCli) -> None:
    result = run_cli("sessions", "show", "abc")

    assert result.exit_code == 2
    assert "no session id starts with 'abc'" in result.stderr


def test_session_cut_in_the_middle_of_its_last_line_resumes_cleanly(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "first", "one")
    [info] = list_sessions(workspace)
    with info.path.open("ab") as file:
        file.write(b'{"type": "message", "message": {"role": "user", "cont')
    loopback.queue(text_stream("two"))

    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "second")

    assert result.exit_code == 0, result.stderr
    assert "session repaired: cut a torn last line" in result.stderr
    assert [m["content"] for m in exchanged(loopback.requests[1])] == ["first", "one", "second"]
    assert session_lines(info.path)[-1]["message"] == {"role": "assistant", "content": "two"}


def test_session_ending_in_nul_bytes_resumes_cleanly(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "first", "one")
    [info] = list_sessions(workspace)
    with info.path.open("ab") as file:
        file.write(b"\0" * 4096)
    loopback.queue(text_stream("two"))

    result = run_cli("run", "--chapter", "2", "--continue", "--prompt", "second")

    assert result.exit_code == 0, result.stderr
    assert "session repaired: removed 4096 NUL bytes" in result.stderr
    assert [m["content"] for m in exchanged(loopback.requests[1])] == ["first", "one", "second"]
    assert b"\0" not in info.path.read_bytes()
    assert session_lines(info.path)[-1]["message"] == {"role": "assistant", "content": "two"}


def write_crashed_session(workspace: Path, base_url: str) -> Path:
    """A session as a crash leaves it: the model asked for a tool, no result was written."""
    meta = SessionMeta.new(2, "loopback-model", base_url, session_id="0badc0de")
    messages: list[ChatMessage] = [
        user_message("list the files"),
        assistant_message(None, (tool_call("call-ls", "bash", json.dumps({"command": "ls"})),)),
    ]
    directory = workspace / ".agent_tutorial" / "sessions"
    directory.mkdir(parents=True)
    path = directory / meta.file_name()
    records = [meta.to_record(), *({"type": "message", "message": to_wire(m)} for m in messages)]
    path.write_bytes(b"".join(orjson.dumps(record) + b"\n" for record in records))
    return path


def test_crash_between_tool_call_and_result_resumes_with_a_paired_interrupted_result(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    path = write_crashed_session(workspace, loopback.base_url)
    loopback.queue(text_stream("the listing was interrupted"))

    result = run_cli("run", "--chapter", "2", "--resume", "0badc0de", "--prompt", "try again")

    assert result.exit_code == 0, result.stderr
    assert "added an interrupted result for tool call 'call-ls'" in result.stderr
    sent = exchanged(loopback.requests[0])
    validate_tool_pairing([from_wire(message) for message in sent])
    assert sent[2] == {"role": "tool", "tool_call_id": "call-ls", "content": INTERRUPTED_RESULT}
    assert sent[3] == {"role": "user", "content": "try again"}
    assert session_lines(path)[3]["message"]["content"] == INTERRUPTED_RESULT


def test_resuming_reports_start_up_warnings_once(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "skills" / "broken").mkdir(parents=True)
    (workspace / "skills" / "broken" / "SKILL.md").write_text("no front matter here\n")
    loopback.queue(text_stream("one"), text_stream("two"))
    run_cli("run", "--chapter", "7", "--prompt", "first")

    result = run_cli("run", "--chapter", "7", "--continue", "--prompt", "second")

    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("skill skipped") == 1


def test_an_unreadable_summary_record_resumes_with_the_whole_history(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "first", "one")
    [info] = list_sessions(workspace)
    damaged = {
        "type": "compaction",
        "layer": "summary",
        "text": "summarised 2 messages",
        "details": {"summary_content": "not a summary", "covered_messages": 2},
    }
    with info.path.open("ab") as file:
        file.write(orjson.dumps(damaged) + b"\n")
    loopback.queue(text_stream("two"))

    result = run_cli("run", "--chapter", "8", "--continue", "--prompt", "second")

    assert result.exit_code == 0, result.stderr
    assert "summary not restored" in result.stderr
    assert [m["content"] for m in exchanged(loopback.requests[1])] == ["first", "one", "second"]


# The command the REPL's farewell offers


@pytest.fixture
def programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`bin/agent-tutorial` on PATH, and another `venv/bin/agent-tutorial` off it."""
    for directory in ("bin", "venv/bin"):
        program = tmp_path / directory / "agent-tutorial"
        program.parent.mkdir(parents=True)
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_program_that_path_finds_is_named_bare(
    programs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", [str(programs / "bin" / "agent-tutorial"), "run"])

    assert command_as_invoked() == "agent-tutorial"


def test_a_program_path_would_not_find_is_named_by_the_path_typed(
    programs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "argv", ["venv/bin/agent-tutorial", "run"])

    assert command_as_invoked() == "venv/bin/agent-tutorial"  # not bin/'s namesake


def test_a_program_path_is_quoted_for_the_shell(
    programs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spaced = programs / "my tools" / "agent-tutorial"
    spaced.parent.mkdir()
    spaced.write_bytes((programs / "bin" / "agent-tutorial").read_bytes())
    monkeypatch.setattr(sys, "argv", [str(spaced), "run"])

    assert shlex.split(command_as_invoked()) == [str(spaced)]


def test_a_module_run_is_named_with_its_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/somewhere/agent_tutorial/__main__.py", "run"])
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-m", "agent_tutorial", "run"])

    assert command_as_invoked() == "python3 -m agent_tutorial"


def test_following_the_farewell_of_a_demo_repl_resumes_its_session(
    make_terminal: Callable[..., Terminal], workspace: Path
) -> None:
    terminal = make_terminal("run", "--model", "demo", "-c", "2", columns=200)
    terminal.wait_for_prompt()
    terminal.enter("hello")
    terminal.wait_for_text("Tour finished")
    terminal.wait_for_prompt()
    terminal.type(CTRL_D)
    assert terminal.wait_for_exit() == 0
    [farewell] = [line for line in terminal.lines() if line.startswith("resume with: ")]
    [info] = list_sessions(workspace)
    command = shlex.split(farewell.removeprefix("resume with: "))
    assert command[-4:] == ["-c", "2", "--resume", info.session_id]
    assert command[-6:-4] == ["--model", "demo"]

    environment = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_TUTORIAL_")}
    done = run_process([*command, "-p", "again"], workspace, environment)

    assert done.returncode == 0, done.stderr
    assert f"resumed {info.session_id} (" in done.stderr
