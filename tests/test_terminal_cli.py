"""The command line's answers replayed on a real pseudo-terminal, at 80 and 40 columns where
the screen matters: an interrupted tool's finished line, one-line JSON and JSON usage errors,
the warning for chapter 8's flags, damaged sessions, Ctrl-C twice at an empty prompt, the
farewell's resume command and the line that names a resumed session.

`make_terminal` runs the program on one pty read back from a pyte screen (what a user
sees); `run_on_two_terminals` gives stdout and stderr a raw pty each, read as the exact
bytes written (what a script reading a terminal's output gets)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_tutorial.features.sessions import SessionInfo, list_sessions
from tests.conftest import (
    LOOPBACK_MODEL,
    OUTPUT_SIZE,
    RunCli,
    cli_environment,
    sleeping,
    wait_until,
)
from tests.loopback import LoopbackServer, error_reply, text_stream, tool_stream
from tests.terminal import PtyRun, Terminal, run_on_two_terminals
from tests.test_repl import SUMMARY
from tests.test_resume_cli import DAMAGED_SESSION_COMMANDS, damage_line, run_once

MakeTerminal = Callable[..., Terminal]
CTRL_C, CTRL_D = "\x03", "\x04"
COLUMNS = [80, 40]
INTERRUPTED_LINE = re.compile(
    r"✗ bash( sleep 30)?  Error \[interrupted\](  sandboxed)?(  \d+\.\d\ds)?"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LONG_ANSWER = "A long answer that a terminal of forty or eighty columns would have to wrap. " * 3


def flat(text: str) -> str:
    """`text` with every run of whitespace, line ends too, as one space."""
    return " ".join(text.split())


def endpoint(loopback: LoopbackServer) -> dict[str, str]:
    """The loopback endpoint's variables, with no COLUMNS: the pty's width is the width."""
    return {k: v for k, v in cli_environment(loopback).items() if k not in OUTPUT_SIZE}


def on_terminals(
    loopback: LoopbackServer, workspace: Path, columns: int, *args: str
) -> tuple[PtyRun, str, str]:
    """`agent-tutorial ARGS` with stdout and stderr on ptys `columns` wide; the run and
    its two outputs as text."""
    run = run_on_two_terminals(args, cwd=workspace, env=endpoint(loopback), columns=columns)
    return run, plain(run.stdout), plain(run.stderr)


def plain(written: bytes) -> str:
    """What a terminal shows of `written`, near enough to read: no colour or cursor moves."""
    return ANSI.sub("", written.decode()).replace("\r", "")


# -- interrupts are results -------------------------------------------------------------


@pytest.mark.parametrize("columns", COLUMNS)
def test_ctrl_c_in_a_one_shot_run_leaves_the_tool_finished_on_the_screen(
    make_terminal: MakeTerminal, loopback: LoopbackServer, marker: str, columns: int
) -> None:
    loopback.queue(tool_stream([("call-sleep", "bash", {"command": "sleep 30"})]))
    terminal = make_terminal("run", "-c", "2", "-p", "wait", columns=columns)
    assert wait_until(lambda: sleeping(marker)), "bash never started sleeping"

    terminal.type(CTRL_C)

    assert terminal.wait_for_exit() == 130
    lines = terminal.lines()
    [finished] = [line for line in lines if line.startswith("✗ bash ")]
    assert INTERRUPTED_LINE.fullmatch(finished), finished
    assert len(finished) <= columns  # too narrow, the time gives way, then the command
    assert "sleep 30" in finished or columns == 40
    assert lines[lines.index(finished) + 1] == "error: interrupted"
    assert len(loopback.requests) == 1


# -- JSON -------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", COLUMNS)
def test_a_json_result_on_a_narrow_terminal_is_one_line(
    loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    loopback.queue(text_stream(LONG_ANSWER))

    run, stdout, _ = on_terminals(
        loopback, workspace, columns, "run", "-c", "2", "-p", "hi", "--output-format", "json"
    )

    assert run.exit_code == 0
    assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout
    record = json.loads(stdout)
    assert record["type"] == "result" and record["result"] == LONG_ANSWER


@pytest.mark.parametrize("output_format", ["json", "text"])
def test_a_refused_command_line_on_a_terminal_is_one_json_error_only_in_json(
    loopback: LoopbackServer, workspace: Path, output_format: str
) -> None:
    args = ("run", "-p", "go", "-c", "10", "--output-format", output_format)

    run, stdout, stderr = on_terminals(loopback, workspace, 40, *args)

    assert run.exit_code == 2
    assert "error: Invalid value for '--chapter' / '-c'" in flat(stderr)
    if output_format == "text":
        assert stdout == ""
    else:
        assert stdout.count("\n") == 1
        record = json.loads(stdout)
        assert (record["type"], record["is_error"]) == ("result", True)
        assert record["error"].startswith("Invalid value for '--chapter' / '-c'")
    assert loopback.requests == []


# -- chapter 8's flags --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chapter", "warned"), [("3", True), ("7", True), ("8", False)], ids=["ch3", "ch7", "ch8"]
)
def test_chapter_8_flags_warn_on_the_terminal_only_outside_chapter_8(
    loopback: LoopbackServer, workspace: Path, chapter: str, warned: bool
) -> None:
    loopback.queue(text_stream("ok"))
    args = ("run", "-c", chapter, "--compaction", "cache-aware", "--context-window", "64000")

    run, stdout, stderr = on_terminals(loopback, workspace, 40, *args, "-p", "hi")

    assert run.exit_code == 0, stderr
    assert stdout == "ok\n"
    warnings = [
        f"warning: --compaction is for chapter 8; chapter {chapter} does not compact, so it "
        "does nothing here",
        f"warning: --context-window is for chapter 8, which keeps requests within the "
        f"window; chapter {chapter} only caps each reply at a quarter of it",
    ]
    assert [warning in flat(stderr) for warning in warnings] == [warned, warned]
    assert ("is for chapter 8" in stderr) == warned


# -- damaged sessions -------------------------------------------------------------------


def one_session_damaged_on_its_first_answer(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> SessionInfo:
    """A session where 'first' was answered 'one', then 'second' 'two'; its line 4 (the
    first answer, after the prompt and its usage record) cut."""
    run_once(run_cli, loopback, "first", "one")
    loopback.queue(text_stream("two"))
    assert run_cli("run", "-c", "2", "--continue", "-p", "second").exit_code == 0
    [info] = list_sessions(workspace)
    damage_line(info.path, 4)
    return info


@pytest.mark.parametrize("columns", COLUMNS)
def test_sessions_show_on_a_terminal_shows_the_intact_lines_and_marks_the_damaged_one(
    make_terminal: MakeTerminal,
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    columns: int,
) -> None:
    info = one_session_damaged_on_its_first_answer(run_cli, loopback, workspace)

    terminal = make_terminal("sessions", "show", info.session_id, columns=columns)

    assert terminal.wait_for_exit() == 1
    rows = [line.split("│")[1:3] for line in terminal.lines() if line.startswith("│ ")]
    kinds = [kind.strip() for number, kind in rows if number.strip().isdigit()]
    assert kinds == ["user", "damaged", "user", "assistant"]
    assert max(len(line) for line in terminal.lines()) <= columns
    assert any(line.startswith("error:") for line in terminal.lines())  # on stderr
    assert f"{info.path.name}:4: line is not JSON" in terminal.unwrapped_text()
    for intact in ("first", "second", "two"):
        assert any(line.split("│")[3].strip() == intact for line in terminal.lines() if "│" in line)


@pytest.mark.parametrize(
    "command", DAMAGED_SESSION_COMMANDS.values(), ids=list(DAMAGED_SESSION_COMMANDS)
)
def test_every_command_that_meets_a_damaged_session_on_a_terminal_exits_1(
    make_terminal: MakeTerminal,
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    command: tuple[str, ...],
) -> None:
    info = one_session_damaged_on_its_first_answer(run_cli, loopback, workspace)
    arguments = command if command[-1] == "--check" else (*command, info.session_id)

    terminal = make_terminal(*arguments)

    assert terminal.wait_for_exit() == 1
    assert f"{info.path.name}:4: line is not JSON" in terminal.unwrapped_text()
    assert len(loopback.requests) == 2  # only the runs that recorded the session


@pytest.mark.parametrize("columns", COLUMNS)
def test_continue_on_a_terminal_names_the_damaged_session_it_skipped(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    run_once(run_cli, loopback, "older", "one")
    run_once(run_cli, loopback, "newer", "two")
    newer, older = list_sessions(workspace)
    damage_line(newer.path, 3)
    loopback.queue(text_stream("three"))

    run, stdout, stderr = on_terminals(
        loopback, workspace, columns, "run", "-c", "2", "--continue", "-p", "again"
    )

    assert run.exit_code == 0, stderr
    assert stdout == "three\n"
    assert f"warning: skipped session {newer.session_id}: " in flat(stderr)
    assert f"resumed {older.session_id} (2 messages, chapter 2)" in flat(stderr)


def test_continue_on_a_terminal_stops_when_every_session_is_damaged(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    run_once(run_cli, loopback, "only", "one")
    [info] = list_sessions(workspace)
    damage_line(info.path, 3)

    run, stdout, stderr = on_terminals(
        loopback, workspace, 40, "run", "-c", "2", "--continue", "-p", "again"
    )

    assert run.exit_code == 2
    assert stdout == ""
    assert f"skipped session {info.session_id}" in flat(stderr)
    assert "every session with a prompt is damaged (1)" in flat(stderr)
    assert len(loopback.requests) == 1


# -- resuming: the line that names the session, and the warning ------------------------


@pytest.mark.parametrize(
    ("chapter", "warned"),
    [((), False), (("-c", "2"), False), (("-c", "3"), True)],
    ids=["recorded", "named the same", "another"],
)
def test_a_resumed_session_is_named_and_warned_of_only_under_another_chapter(
    run_cli: RunCli,
    loopback: LoopbackServer,
    workspace: Path,
    chapter: tuple[str, ...],
    warned: bool,
) -> None:
    run_once(run_cli, loopback, "hello", "hi")
    [info] = list_sessions(workspace)
    loopback.queue(text_stream("again"))

    run, _, stderr = on_terminals(
        loopback, workspace, 40, "run", *chapter, "--continue", "-p", "more"
    )

    assert run.exit_code == 0, stderr
    now = chapter[1] if chapter else "2"
    assert f"resumed {info.session_id} (2 messages, chapter {now})" in flat(stderr)
    warning = f"session {info.session_id} was recorded with chapter 2 and continues under chapter 3"
    assert (warning in flat(stderr)) == warned
    assert ("recorded with chapter" in flat(stderr)) == warned


# -- leaving the REPL -------------------------------------------------------------------


def test_ctrl_c_twice_at_an_empty_prompt_leaves_with_130(make_terminal: MakeTerminal) -> None:
    terminal = make_terminal("run", "-c", "2")
    terminal.wait_for_prompt()

    terminal.type(CTRL_C)
    terminal.wait_for_text("press Ctrl-C again")
    terminal.type(CTRL_C)

    assert terminal.wait_for_exit() == 130


def test_ctrl_c_then_a_prompt_then_ctrl_c_stays_and_ctrl_d_leaves_with_0(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("answered"))
    terminal = make_terminal("run", "-c", "2")
    terminal.wait_for_prompt()

    terminal.type(CTRL_C)
    terminal.wait_for_text("press Ctrl-C again")
    terminal.enter("hello")
    terminal.wait_for_text("answered")
    terminal.wait_for_prompt()
    terminal.type(CTRL_C)  # one Ctrl-C since the last prompt: it asks again
    terminal.wait_for(
        lambda: (
            terminal.text().count("press Ctrl-C again") == 2
            and terminal.cursor_line().startswith("›")
        ),
        "the second ask and the prompt after it",
    )
    terminal.type(CTRL_D)  # once the prompt reads keys: a ^D typed ahead is the tty's EOF

    assert terminal.wait_for_exit() == 0
    assert len(loopback.requests) == 1


def farewell(terminal: Terminal) -> str:
    """The `resume with:` command as the screen shows it: the last thing printed, its rows
    joined as the terminal wrapped them. A row that does not fill the width wrapped after a
    space, which the screen cannot tell from an empty cell, so a space goes back there (a
    path one character longer put the session id alone on the next row)."""
    lines = terminal.lines()
    start = max(index for index, line in enumerate(lines) if line.startswith("resume with: "))
    rows = [line for line in lines[start:] if line]
    joined = "".join(row + " " * (len(row) < terminal.screen.columns) for row in rows)
    return joined.removeprefix("resume with: ")


@pytest.mark.parametrize("columns", COLUMNS)
@pytest.mark.parametrize(
    ("flags", "repeated"),
    [((), []), (("--model", LOOPBACK_MODEL), ["--model", LOOPBACK_MODEL])],
    ids=["model from the environment", "model flag"],
)
def test_the_farewell_is_one_command_that_repeats_the_model_flag_only_when_given(
    make_terminal: MakeTerminal,
    loopback: LoopbackServer,
    workspace: Path,
    columns: int,
    flags: tuple[str, ...],
    repeated: list[str],
) -> None:
    loopback.queue(text_stream("hi"))
    terminal = make_terminal("run", *flags, "-c", "2", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("hello")
    terminal.wait_for_text("hi")
    terminal.wait_for_prompt()
    terminal.type(CTRL_D)

    assert terminal.wait_for_exit() == 0
    [info] = list_sessions(workspace)
    command = shlex.split(farewell(terminal))  # the terminal wrapped it, not the program
    assert command[1:3] == ["-m", "agent_tutorial"]  # as these tests invoke it
    assert command[3:] == ["run", *repeated, "-c", "2", "--resume", info.session_id]


# -- wording: one casing, flags as typed, -h ----------------------------------------------

UNAUTHORIZED = {"error": {"message": "Incorrect API key provided"}}


def test_a_failed_turn_says_error_in_one_casing_in_the_repl_and_in_a_one_shot_run(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path
) -> None:
    loopback.queue(error_reply(401, UNAUTHORIZED), error_reply(401, UNAUTHORIZED))
    repl = make_terminal("run", "-c", "2", columns=40)
    repl.wait_for_prompt()
    repl.enter("hello")
    repl.wait_for_text("Incorrect API key")
    repl.wait_for_prompt()

    run, _, stderr = on_terminals(loopback, workspace, 40, "run", "-c", "2", "-p", "hello")

    assert run.exit_code != 0
    for shown in (repl.text(), stderr):
        failures = [line for line in shown.splitlines() if "rror" in line]
        assert failures and all(line.startswith("error: ") for line in failures), failures


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (("--base-url", "notaurl"), {}, "--base-url 'notaurl'"),
        ((), {"OPENAI_BASE_URL": "notaurl"}, "OPENAI_BASE_URL 'notaurl'"),
    ],
    ids=["flag", "variable"],
)
def test_a_bad_base_url_on_a_terminal_is_named_as_it_was_given(
    loopback: LoopbackServer,
    workspace: Path,
    flags: tuple[str, ...],
    env: dict[str, str],
    named: str,
) -> None:
    run = run_on_two_terminals(
        ["run", "-c", "2", *flags, "-p", "hi"],
        cwd=workspace,
        env={**endpoint(loopback), **env},
        columns=40,
    )

    stderr = flat(plain(run.stderr))
    assert run.exit_code == 2
    assert stderr.startswith(f"error: {named} must start with http:// or https://")
    assert loopback.requests == []


@pytest.mark.parametrize(
    ("flag", "exit_code"), [("-h", 0), ("--help", 0), ("-x", 2)], ids=["-h", "--help", "-x"]
)
def test_dash_h_on_a_terminal_is_help_and_an_unknown_short_flag_is_refused(
    loopback: LoopbackServer, workspace: Path, flag: str, exit_code: int
) -> None:
    run, stdout, stderr = on_terminals(loopback, workspace, 40, "run", flag)

    assert run.exit_code == exit_code
    assert ("Usage:" in stdout) == (exit_code == 0)
    assert ("error: No such option: -x" in flat(stderr)) == (exit_code == 2)


# -- /compact ---------------------------------------------------------------------------


@pytest.mark.parametrize("columns", COLUMNS)
def test_compact_on_a_terminal_prints_one_line(
    make_terminal: MakeTerminal, loopback: LoopbackServer, columns: int
) -> None:
    loopback.queue(text_stream("earlier answer"), text_stream(json.dumps(SUMMARY)))
    terminal = make_terminal("run", "-c", "8", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("earlier question")
    terminal.wait_for_text("earlier answer")
    terminal.wait_for_prompt()

    terminal.enter("/compact")
    terminal.wait_for_text(".jsonl")
    terminal.wait_for_prompt()

    lines = terminal.lines()
    start = len(lines) - 1 - lines[::-1].index("› /compact")
    shown = [line for line in lines[start + 1 : -1] if line and not line.startswith("›")]
    shown = shown[: next(i for i, line in enumerate(shown) if line.endswith(".jsonl")) + 1]
    assert shown[0].startswith("⚙ summary: ")
    assert "".join(shown).count("transcript") == 2  # the word and the file's name, once
    assert max(len(line) for line in shown) <= columns
    assert "compaction this run" not in terminal.text()


@pytest.mark.parametrize("columns", COLUMNS)
def test_ctrl_c_during_a_tool_in_the_repl_leaves_a_finished_line_that_fits(
    make_terminal: MakeTerminal, loopback: LoopbackServer, marker: str, columns: int
) -> None:
    loopback.queue(tool_stream([("call-sleep", "bash", {"command": "sleep 30"})]))
    terminal = make_terminal("run", "-c", "2", columns=columns)
    terminal.wait_for_prompt()
    terminal.enter("wait")
    assert wait_until(lambda: sleeping(marker)), "bash never started sleeping"

    terminal.type(CTRL_C)

    terminal.wait_for_text("interrupted; the conversation goes on")
    terminal.wait_for_prompt()
    lines = terminal.lines()
    finished = lines[lines.index("interrupted; the conversation goes on") - 1]
    assert INTERRUPTED_LINE.fullmatch(finished), finished
    assert len(finished) <= columns
    assert "sleep 30" in finished or columns == 40
