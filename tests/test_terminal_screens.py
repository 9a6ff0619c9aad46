"""The REPL's screens on a real pseudo-terminal at 80 and 40 columns, read back from a pyte
screen: a large paste collapsed to a placeholder, tables that keep a number with its unit
and break no word, a plain prompt and toolbar with --no-color, /compact on one line,
/resume's picker and a resumed session's last turns."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli
from tests.loopback import LoopbackServer, conversation, text_stream, tool_stream
from tests.terminal import Terminal, run_on_two_terminals
from tests.test_artifact_origins import call_line, persisted, tool_line, write_session
from tests.test_artifacts_cli import artifacts, transcript_bytes, write_aged
from tests.test_demo_model import large_project

MakeTerminal = Callable[..., Terminal]
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
UP = "\x1b[A"
LONG_PROMPT = "fix the failing test in the repository and explain what you changed."
UNIT = re.compile(r"^\s*(B|KB|MB|tok|tokens|messages|item\(s\)|file\(s\)|prompt|completion)\b")
TOOL_LINE = re.compile(
    r"(  │ )*[•✗] \w+( .+)?  (\d+(\.\d)? [KM]?B|Error \[\w+\])"
    r"(  \d+ secrets? redacted)?(  sandboxed)?(  \d+\.\d\ds)?"
)
WRAPPED_TAIL = re.compile(
    r"(\S+ )?(B|KB|MB)?(  )?(\d+ secrets? redacted  )?(sandboxed  )?\d+\.\d\ds"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LOG = "".join(f"line {n} of the pasted log with some detail in it, enough\n" for n in range(800))


def user_contents(body: dict[str, Any]) -> list[object]:
    return [message["content"] for message in conversation(body) if message["role"] == "user"]


@pytest.mark.parametrize("columns", [80, 40])
def test_a_large_paste_shows_as_one_placeholder_line_and_is_sent_whole(
    make_terminal: MakeTerminal, loopback: LoopbackServer, columns: int
) -> None:
    loopback.queue(text_stream("read it"), text_stream("read it again"))
    terminal = make_terminal("run", "--chapter", "2", columns=columns)
    terminal.wait_for_prompt()

    terminal.type("see " + PASTE_START + LOG + PASTE_END)
    terminal.wait_for_text("[pasted 800 lines, 45.2 KB]")
    terminal.enter("")
    terminal.wait_for_text("read it")
    terminal.wait_for_prompt()
    terminal.type(UP)  # the sent prompt comes back collapsed
    terminal.wait_for(lambda: "[pasted" in terminal.cursor_line(), "the recalled placeholder")
    terminal.enter("")
    terminal.wait_for_text("read it again")

    assert "line 1 of" not in terminal.text()  # the pasted lines never reach the screen
    assert user_contents(loopback.requests[0]) == [f"see {LOG}".strip()]
    assert user_contents(loopback.requests[1])[-1] == f"see {LOG}".strip()


def colours_of(terminal: Terminal, row: int, text: str) -> set[str]:
    """The foreground colours the screen shows `text` in, on `row` (-1: the last)."""
    line = terminal.screen.buffer[row % terminal.screen.lines]
    shown = "".join(line[x].data for x in range(terminal.screen.columns))
    start = shown.index(text)
    return {line[x].fg for x in range(start, start + len(text))}


@pytest.mark.parametrize(
    ("flags", "env", "plain"),
    [
        ((), {}, False),
        (("--no-color",), {}, True),
        ((), {"NO_COLOR": "1"}, True),
    ],
)
@pytest.mark.parametrize("columns", [80, 40])
def test_no_color_makes_the_prompt_and_the_toolbar_plain(
    make_terminal: MakeTerminal,
    flags: tuple[str, ...],
    env: dict[str, str],
    plain: bool,
    columns: int,
) -> None:
    terminal = make_terminal("run", "--chapter", "8", *flags, env=env, columns=columns)
    terminal.wait_for_prompt()
    terminal.wait_for(lambda: "of summary" in terminal.toolbar(), "the toolbar")

    prompt = colours_of(terminal, terminal.screen.cursor.y, "›")
    share = colours_of(terminal, terminal.screen.cursor.y + 1, "0% of summary")

    assert (prompt, share) == (({"default"}, {"default"}) if plain else ({"cyan"}, {"green"}))


def units_split(lines: Sequence[str]) -> list[tuple[str, str]]:
    """Pairs of lines where a number ends one line and its unit starts the next."""
    return [
        (line, after)
        for line, after in itertools.pairwise(lines)
        if re.search(r"\d$", line) and UNIT.match(after)
    ]


def broken_words(shown: str, whole: str) -> list[str]:
    """Words on the screen that are not words of the whole text (`ch2 ·` aside, the narrow
    layout's chapter): cut by a wrap. A word shortened with an ellipsis must be a whole
    word before it."""
    words = {*whole.split(), "·", *(f"ch{chapter}" for chapter in range(1, 9))}
    return [word for word in shown.split() if word.removesuffix("…") not in words]


def ask_for_the_tour(terminal: Terminal) -> None:
    terminal.wait_for_prompt()
    terminal.enter("Give me a tour of this repository.")
    terminal.wait_for_text("This was a fixed script", timeout_s=60)
    terminal.wait_for_prompt()


def test_tool_lines_of_the_demo_tour_and_its_subagent_fit_40_columns(
    make_terminal: MakeTerminal, workspace: Path
) -> None:
    nested = workspace / "packages" / "example"  # paths long enough to be shortened
    nested.mkdir(parents=True)
    large_project(nested)
    terminal = make_terminal("run", "-c", "8", "--model", "demo", "-y", columns=40)

    ask_for_the_tour(terminal)

    tool_lines = [line for line in terminal.lines() if re.match(r"(  │ )*[•✗] ", line)]
    assert any(line.startswith("  │ • read_file") for line in tool_lines)  # the subagent's
    assert len(tool_lines) > 50
    assert [line for line in tool_lines if not TOOL_LINE.fullmatch(line)] == []
    assert [line for line in terminal.lines() if WRAPPED_TAIL.fullmatch(line)] == []


def test_context_at_40_columns_lists_the_layers_in_order_under_a_heading(
    make_terminal: MakeTerminal, workspace: Path
) -> None:
    large_project(workspace)
    terminal = make_terminal("run", "-c", "8", "--model", "demo", "-y", columns=40)
    ask_for_the_tour(terminal)

    terminal.enter("/context")
    terminal.wait_for_text("tokens so far")
    terminal.wait_for_prompt()

    lines = terminal.lines()
    shown = lines[lines.index("› /context") :]
    layers = [line.split()[0] for line in shown if re.match(r"   \w+ +[\d,]+ \w+ in \d", line)]
    assert layers == ["persist", "snip", "micro", "summary"]
    assert any(re.match(r" compaction +by layer, in the order", line) for line in shown)
    assert units_split(shown) == []


@pytest.mark.parametrize("columns", [80, 40])
def test_sessions_list_on_a_terminal_breaks_no_word(
    make_terminal: MakeTerminal,
    run_cli: RunCli,
    loopback: LoopbackServer,
    columns: int,
) -> None:
    for prompt in (LONG_PROMPT, "Give me a tour of this repository."):
        loopback.queue(text_stream("done"))
        assert run_cli("run", "--chapter", "2", "--prompt", prompt).exit_code == 0
    whole = run_cli("sessions", "list").stdout  # a pipe: one whole line per session

    terminal = make_terminal("sessions", "list", columns=columns)
    assert terminal.wait_for_exit() == 0

    assert LONG_PROMPT in whole
    listed = [line for line in terminal.lines() if line]
    assert len(listed) == (3 if columns == 80 else 4)  # a line each, or two, and no more
    assert broken_words(terminal.text(), whole) == []
    assert units_split(terminal.lines()) == []
    assert max(len(line) for line in terminal.lines()) <= columns


def test_sessions_in_the_repl_at_40_columns_keep_sizes_whole(
    make_terminal: MakeTerminal, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("done"))
    assert run_cli("run", "--chapter", "2", "--prompt", LONG_PROMPT).exit_code == 0
    terminal = make_terminal("run", "--chapter", "2", columns=40)
    terminal.wait_for_prompt()

    terminal.enter("/sessions")
    terminal.wait_for_text(" · fix the failing")
    terminal.wait_for_prompt()
    whole = run_cli("sessions", "list").stdout  # the REPL's own session too

    lines = terminal.lines()
    start = lines.index("› /sessions") + 1
    listed = lines[start : start + lines[start:].index("›")]  # up to the next prompt
    assert len(listed) == 4  # two sessions, two lines each
    assert units_split(listed) == []
    assert broken_words("\n".join(listed), whole) == []


@pytest.mark.parametrize("columns", [80, 40])
def test_artifacts_list_on_a_terminal_fits_and_ends_no_line_in_spaces(
    workspace: Path, columns: int
) -> None:
    directory = artifacts(workspace)
    write_aged(directory / "tool-result-call-abc123.txt", b"x" * 45_000, age_days=1)
    write_aged(directory / "transcript-0a1b2c3d4e5f.jsonl", transcript_bytes(), age_days=0)
    write_session(
        workspace,
        call_line("c1", "read_file", {"path": "logs/big1.log"}),
        tool_line("c1", persisted("tool-result-call-abc123.txt")),
    )

    run = run_on_two_terminals(["artifacts", "list"], cwd=workspace, env={"COLUMNS": str(columns)})

    lines = ANSI.sub("", run.stdout.decode()).splitlines()
    assert run.exit_code == 0
    assert [line for line in lines if line != line.rstrip()] == []
    assert max(len(line) for line in lines) <= columns
    assert "call-abc123" in " ".join(lines) and "0a1b2c3d4e5f" in " ".join(lines)
    assert "  read_file logs/big1.log" in lines  # what made it, under its row


def test_artifacts_list_in_a_pipe_ends_no_line_in_spaces(run_cli: RunCli, workspace: Path) -> None:
    write_aged(artifacts(workspace) / "tool-result-short.txt", b"x", age_days=0)
    write_aged(artifacts(workspace) / "transcript-a-much-longer-id.jsonl", b"{}\n", age_days=1)

    stdout = run_cli("artifacts", "list").stdout

    assert [line for line in stdout.splitlines() if line != line.rstrip()] == []
    assert re.search(r"^tool-result +short +1 B  \d{4}-", stdout, re.MULTILINE)


@pytest.mark.parametrize("columns", [80, 40])
def test_bench_in_a_pipe_fits_the_columns_it_is_given(run_cli: RunCli, columns: int) -> None:
    result = run_cli("bench", "--turns", "20", env={"COLUMNS": str(columns)})

    lines = result.stdout.splitlines()
    assert result.exit_code == 0
    assert max(len(line) for line in lines) <= columns
    assert [line for line in lines if line != line.rstrip()] == []
    assert units_split(lines) == []
    assert re.search(r"^sent [\d.]+ MB  ·  cache hit \d+%", result.stdout, re.MULTILINE)


def test_bench_in_a_pipe_without_columns_prints_the_whole_table(run_cli: RunCli) -> None:
    result = run_cli("bench", "--turns", "20", env={"COLUMNS": ""})

    assert "┃ strategy" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) > 80


ESC, DOWN = "\x1b", "\x1b[B"


def two_saved_sessions(run_cli: RunCli, loopback: LoopbackServer) -> None:
    for prompt, answer in ((LONG_PROMPT, "Fixed it: the test compared bytes."), ("hello", "hi")):
        loopback.queue(text_stream(answer))
        assert run_cli("run", "--chapter", "2", "--prompt", prompt).exit_code == 0


@pytest.mark.parametrize("columns", [80, 40])
def test_resume_without_an_id_offers_a_list_and_shows_the_picked_conversation(
    make_terminal: MakeTerminal, run_cli: RunCli, loopback: LoopbackServer, columns: int
) -> None:
    two_saved_sessions(run_cli, loopback)
    whole = run_cli("sessions", "list").stdout
    terminal = make_terminal("run", "--chapter", "2", columns=columns)
    terminal.wait_for_prompt()

    terminal.enter("/resume")
    terminal.wait_for_text("Resume which session?")
    terminal.type(DOWN)  # the newest comes first; the long prompt's session is second
    terminal.enter("")
    terminal.wait_for_text("Fixed it: the test compared bytes.")
    terminal.wait_for_prompt()

    lines = terminal.lines()
    options = [line for line in lines if re.match(r"\s+>?\s+\d\. [0-9a-f]{8}  ", line)]
    assert len(options) == 2
    assert broken_words("\n".join(options), whole + " > 1. 2. ch2") == []
    assert "resumed " in terminal.text()
    assert "› fix the failing test" in terminal.text()  # the recap's prompt line


def test_esc_leaves_the_picker_without_resuming(
    make_terminal: MakeTerminal, run_cli: RunCli, loopback: LoopbackServer
) -> None:
    two_saved_sessions(run_cli, loopback)
    terminal = make_terminal("run", "--chapter", "2")
    terminal.wait_for_prompt()

    terminal.enter("/resume")
    terminal.wait_for_text("Resume which session?")
    terminal.type(ESC)
    terminal.wait_for_text("not resumed")
    terminal.wait_for_prompt()

    assert "resumed " not in terminal.text().replace("not resumed", "")


@pytest.mark.parametrize("columns", [80, 40])
def test_a_continued_repl_shows_the_last_turns_before_the_prompt(
    make_terminal: MakeTerminal, run_cli: RunCli, loopback: LoopbackServer, columns: int
) -> None:
    loopback.queue(text_stream("Fixed it: the test compared bytes."))
    assert run_cli("run", "--chapter", "2", "--prompt", LONG_PROMPT).exit_code == 0

    terminal = make_terminal("run", "--continue", columns=columns)
    terminal.wait_for_prompt()

    shown = terminal.flat_text()
    assert "earlier in this session: › fix the failing test" in shown
    assert "Fixed it: the test compared bytes. ›" in shown  # then the prompt


# --- an approval for a long command (issue 27) ------------------------------------------------

LONG_COMMAND = "\n".join(f"echo step{n} with words enough to wrap at forty" for n in range(120))


@pytest.mark.parametrize("columns", [80, 40])
def test_a_120_line_command_keeps_its_first_line_on_screen_with_the_question(
    make_terminal: MakeTerminal, loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    loopback.queue(tool_stream([("c1", "bash", {"command": LONG_COMMAND})]), text_stream("not run"))
    terminal = make_terminal("run", "-c", "3", "-p", "go", columns=columns, lines=30)
    terminal.wait_for_question()

    screen = "\n".join(terminal.screen.display)
    assert "echo step0 " in screen and "bash wants permission" in screen
    assert "(120 lines, " in " ".join(screen.replace("│", " ").split())
    assert "echo step119" not in terminal.text()

    terminal.type("v")  # one key, no Enter
    terminal.wait_for_question(times=2)
    assert "echo step119 " in terminal.text()  # shown whole, above
    screen = "\n".join(terminal.screen.display)
    assert "echo step0 " in screen and "(Esc = no)" in screen

    terminal.type("n")
    assert terminal.wait_for_exit() == 0
    (result,) = [m for m in conversation(loopback.requests[1]) if m["role"] == "tool"]
    assert "the user declined this bash call" in result["content"]
