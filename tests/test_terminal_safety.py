"""A model's reply, a tool's name and a server's error reach the terminal inert: escape
sequences that would write the clipboard (OSC 52), set the title (OSC 0), open a link
(OSC 8) or clear the screen, and the C1 byte 0x9b (CSI), are shown as text. The only
escape sequences on the terminal are the renderer's own: colours, and rich's cursor
controls for its spinner and live display. JSON output stays exact JSON, every control
character escaped."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_tutorial.core.text import printable
from tests.conftest import LOOPBACK_MODEL, TEST_API_KEY, RunCli
from tests.loopback import LoopbackServer, error_reply, text_stream, tool_stream
from tests.terminal import Terminal, run_on_two_terminals

MakeTerminal = Callable[..., Terminal]

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
CLEAR = "\x1b[2J"
CSI_C1 = "\x9b31m"
HOSTILE_ANSWER = f"clip {CLIPBOARD} title {TITLE} link {LINK} clear {CLEAR} c1 {CSI_C1} answerend"
WIDE = 200
"""Columns enough for the whole answer on one line: these tests read the exact bytes, and on
a narrower terminal the answer is broken between words."""
SHOWN_ANSWER = (
    r"clip \x1b]52;c;cm0gLXJmIH4=\x07 title \x1b]0;pwned\x07 link "
    r"\x1b]8;;http://evil.example/\x1b\click\x1b]8;;\x1b\ clear \x1b[2J c1 \x9b31m answerend"
)
CONCEAL = "\x1b[8m"
HOSTILE_TOOL = f"{TITLE}{CONCEAL}tool"
SHOWN_TOOL = r"\x1b]0;pwned\x07\x1b[8mtool"

# What may be left once the renderer's own sequences are taken out: newline and tab.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SGR = re.compile(r"\x1b\[[0-9;]*m")
# rich's spinner and live display: hide/show the cursor, carriage return, cursor up, erase line
_RICH_CURSOR = re.compile(r"\x1b\[\?25[lh]|\r|\x1b\[\d*[AK]")


def controls(text: str) -> list[str]:
    return _CONTROL.findall(text)


def hostile_run(loopback: LoopbackServer, *, pieces: int = 17) -> None:
    """A call to a tool named with a title sequence, then the answer in pieces, so most
    sequences arrive split across two deltas."""
    loopback.queue(
        tool_stream([("c1", HOSTILE_TOOL, {})]), text_stream(HOSTILE_ANSWER, pieces=pieces)
    )


def loopback_env(loopback: LoopbackServer, workspace: Path) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": loopback.base_url,
        "OPENAI_API_KEY": TEST_API_KEY,
        "AGENT_TUTORIAL_MODEL": LOOPBACK_MODEL,
        "HOME": str(workspace.parent / "home"),
    }


# --- -p, piped ----------------------------------------------------------------------------


def test_a_piped_answer_shows_escape_sequences_as_text(
    run_cli_process: RunCli, loopback: LoopbackServer
) -> None:
    hostile_run(loopback)

    result = run_cli_process("run", "-c", "2", "-p", "go")

    assert result.exit_code == 0
    assert result.stdout == SHOWN_ANSWER + "\n"
    assert controls(result.stderr) == []
    assert SHOWN_TOOL in result.stderr


def test_a_server_error_with_escape_sequences_is_shown_as_text(
    run_cli_process: RunCli, loopback: LoopbackServer
) -> None:
    loopback.queue(error_reply(400, {"error": {"message": f"bad {CLEAR}{TITLE} request"}}))

    result = run_cli_process("run", "-c", "1", "-p", "go")

    assert result.exit_code == 1
    assert controls(result.stderr) == []
    assert r"bad \x1b[2J\x1b]0;pwned\x07 request" in result.stderr


# --- -p, on a terminal --------------------------------------------------------------------


def test_a_streamed_answer_on_a_terminal_without_colour_carries_no_escape_byte(
    workspace: Path, loopback: LoopbackServer
) -> None:
    hostile_run(loopback)

    run = run_on_two_terminals(
        ["run", "-c", "2", "-p", "go", "--no-color"],
        cwd=workspace,
        env=loopback_env(loopback, workspace),
        columns=WIDE,
    )

    assert run.exit_code == 0
    assert run.stdout.decode() == SHOWN_ANSWER + "\n"
    activity = run.stderr.decode()
    assert controls(_RICH_CURSOR.sub("", _SGR.sub("", activity))) == []
    assert SHOWN_TOOL in activity


def test_on_a_colour_terminal_the_only_escapes_are_the_renderers_own(
    workspace: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    hostile_run(loopback)

    run = run_on_two_terminals(
        ["run", "-c", "2", "-p", "go"],
        cwd=workspace,
        env=loopback_env(loopback, workspace),
        columns=WIDE,
    )

    assert run.exit_code == 0
    assert run.stdout.decode() == SHOWN_ANSWER + "\n"
    activity = run.stderr.decode()
    assert "\x1b[31m" in _SGR.findall(activity)  # the failed call's red cross: colour is on
    assert CONCEAL not in activity  # the model's own SGR sequence is text
    assert controls(_RICH_CURSOR.sub("", _SGR.sub("", activity))) == []


def test_with_no_color_the_terminal_gets_no_colour_and_no_escape_from_the_model(
    workspace: Path, loopback: LoopbackServer
) -> None:
    hostile_run(loopback)

    run = run_on_two_terminals(
        ["run", "-c", "2", "-p", "go"],
        cwd=workspace,
        env={**loopback_env(loopback, workspace), "NO_COLOR": "1"},
        columns=WIDE,
    )

    assert run.exit_code == 0
    assert run.stdout.decode() == SHOWN_ANSWER + "\n"
    activity = run.stderr.decode()
    assert set(_SGR.findall(activity)) <= {"\x1b[0m", "\x1b[1m", "\x1b[2m"}  # bold, dim
    assert controls(_RICH_CURSOR.sub("", _SGR.sub("", activity))) == []


# --- the REPL ------------------------------------------------------------------------------


def ask_in_repl(terminal: Terminal, prompt: str, until: str) -> str:
    """Send one prompt and wait for `until` and the next prompt; what the REPL wrote."""
    written = terminal.record()
    terminal.wait_for_prompt()
    terminal.enter(prompt)
    terminal.wait_for_text(until)
    terminal.wait_for_prompt()
    return written.getvalue()


def test_the_repl_shows_a_hostile_answer_and_tool_name_as_text(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    hostile_run(loopback)
    terminal = make_terminal("run", "--chapter", "2", columns=200)

    output = ask_in_repl(terminal, "go", until="answerend")

    for sequence in (CLIPBOARD, TITLE, CONCEAL, CLEAR, "\x9b", "\x07"):
        assert sequence not in output
    assert "\x1b]" not in output  # no OSC at all: neither the model's nor a hyperlink
    assert SHOWN_ANSWER in terminal.unwrapped_text()
    assert SHOWN_TOOL in terminal.text()


def test_the_repl_shows_a_markdown_link_with_its_address_not_as_a_hyperlink(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("see [the docs](http://evil.example/x) linkend"))
    terminal = make_terminal("run", "--chapter", "2")

    output = ask_in_repl(terminal, "go", until="linkend")

    assert "\x1b]8;" not in output
    assert "see the docs (http://evil.example/x) linkend" in terminal.flat_text()


def test_the_repl_shows_a_hostile_server_error_as_text(
    make_terminal: MakeTerminal, loopback: LoopbackServer
) -> None:
    loopback.queue(error_reply(400, {"error": {"message": f"bad {CLEAR}{TITLE} request"}}))
    terminal = make_terminal("run", "--chapter", "1", columns=200)

    output = ask_in_repl(terminal, "go", until="request")

    assert CLEAR not in output and TITLE not in output
    assert r"bad \x1b[2J\x1b]0;pwned\x07 request" in terminal.text()


# --- JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize("output_format", ["json", "stream-json"])
def test_json_output_escapes_every_control_and_parses_to_the_same_answer(
    run_cli_process: RunCli, loopback: LoopbackServer, output_format: str
) -> None:
    hostile_run(loopback)

    result = run_cli_process("run", "-c", "2", "-p", "go", "--output-format", output_format)

    assert result.exit_code == 0
    assert controls(result.stdout.replace("\n", "")) == []
    assert "\\u009b31m" in result.stdout  # C1 too, which orjson alone leaves raw
    last = json.loads(result.stdout) if output_format == "json" else None
    if last is None:
        last = json.loads(result.stdout.splitlines()[-1])
    assert last["result"] == HOSTILE_ANSWER


# --- invisible and direction characters (issue 27) ------------------------------------------

HIDDEN = {
    "\u200b": r"\u200b",  # zero-width space
    "\u200e": r"\u200e",  # left-to-right mark
    "\u200f": r"\u200f",  # right-to-left mark
    "\u061c": r"\u061c",  # Arabic letter mark
    "\u2028": r"\u2028",  # line separator
    "\u2029": r"\u2029",  # paragraph separator
    "\u202a": r"\u202a",  # the embeddings and overrides, first and last
    "\u202e": r"\u202e",
    "\u2066": r"\u2066",  # the isolates, first and last
    "\u2069": r"\u2069",
    "\U000e0000": r"\U000e0000",  # the tag characters, first, a letter and last
    "\U000e0041": r"\U000e0041",
    "\U000e007f": r"\U000e007f",
}
# The characters either side of each range, and the joiners: real text needs them.
KEPT = [
    "\u200a",  # hair space
    "\u200c",  # zero-width non-joiner (Persian)
    "\u200d",  # zero-width joiner (emoji, Indic scripts)
    "\u2010",  # hyphen
    "\u061b",  # Arabic semicolon
    "\u061d",
    "\u2027",  # hyphenation point
    "\u202f",  # narrow no-break space
    "\u2065",
    "\u206a",
    "\U000e0080",
    "\U000e0100",  # a variation selector
]
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # one emoji joined by ZWJs
PERSIAN = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # "I want", with a ZWNJ
HIDDEN_ANSWER = "pay " + "".join(HIDDEN) + f" to {FAMILY} {PERSIAN} end"
SHOWN_HIDDEN_ANSWER = "pay " + "".join(HIDDEN.values()) + f" to {FAMILY} {PERSIAN} end"


@pytest.mark.parametrize("character", HIDDEN)
def test_an_invisible_or_direction_character_is_shown_as_its_escape(character: str) -> None:
    assert printable(f"a{character}b") == f"a{HIDDEN[character]}b"


@pytest.mark.parametrize("character", KEPT)
def test_a_character_beside_those_ranges_or_a_joiner_is_kept(character: str) -> None:
    assert printable(f"a{character}b") == f"a{character}b"


def test_emoji_and_persian_joiners_pass_through_unchanged() -> None:
    assert printable(f"{FAMILY} {PERSIAN}") == f"{FAMILY} {PERSIAN}"


def hidden_run(loopback: LoopbackServer) -> None:
    """A call to a tool whose name hides a mark, then the answer in pieces."""
    loopback.queue(
        tool_stream([("c1", "glob\u200b\u202e", {})]),
        text_stream(HIDDEN_ANSWER, pieces=11),
    )


def test_a_piped_answer_and_activity_show_invisible_characters_as_escapes(
    run_cli_process: RunCli, loopback: LoopbackServer
) -> None:
    hidden_run(loopback)

    result = run_cli_process("run", "-c", "2", "-p", "go")

    assert result.exit_code == 0, result.stderr
    assert result.stdout == SHOWN_HIDDEN_ANSWER + "\n"
    assert r"glob\u200b\u202e" in result.stderr
    assert not set(HIDDEN) & set(result.stdout + result.stderr)


def test_on_a_terminal_invisible_characters_are_shown_as_escapes(
    workspace: Path, loopback: LoopbackServer
) -> None:
    hidden_run(loopback)

    run = run_on_two_terminals(
        ["run", "-c", "2", "-p", "go", "--no-color"],
        cwd=workspace,
        env=loopback_env(loopback, workspace),
        columns=WIDE,
    )

    assert run.exit_code == 0
    assert run.stdout.decode() == SHOWN_HIDDEN_ANSWER + "\n"
    activity = run.stderr.decode()
    assert r"glob\u200b\u202e" in activity
    assert not set(HIDDEN) & set(activity)
