"""The terminal renderer: one compact activity line per tool call on stderr, and
compaction steps without a line for every routine round."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest
from rich.console import Console, RenderableType

from agent_tutorial.core.events import (
    CompactionApplied,
    Event,
    Notice,
    PermissionDecided,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import tool_error, tool_success
from agent_tutorial.features.sessions import SessionInfo
from agent_tutorial.render import (
    TerminalRenderer,
    WaitingLabel,
    error_line,
    messages_table,
    rendering,
    session_table,
    tool_line,
)
from tests.conftest import SteppedClock


def render(*events: ToolStarted | ToolFinished) -> str:
    err = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=100),
        Console(file=err, width=100),
        stream_answer=False,
    )
    for event in events:
        renderer.emit(event)
    return err.getvalue()


def test_a_finished_call_shows_the_subject_its_tool_declared() -> None:
    call = tool_call("c1", "grep", '{"pattern": "TODO", "path": "src"}')

    shown = render(ToolStarted(call, "TODO"), ToolFinished(call, tool_success("a:1:TODO"), 0.01))

    assert shown.startswith("• grep TODO  8 B  0.01s")


def test_a_failed_call_shows_its_error_code() -> None:
    call = tool_call("c1", "bash", '{"command": "sleep 600"}')
    result = tool_error("timeout", "killed")

    shown = render(ToolStarted(call, "sleep 600"), ToolFinished(call, result, 120.0))

    assert shown.startswith("✗ bash sleep 600  Error [timeout]  120.00s")


def test_a_call_that_did_not_parse_still_names_a_recognisable_argument() -> None:
    call = tool_call("c1", "read_file", '{"path": "notes.md", "limit": "many"}')

    shown = render(
        ToolStarted(call, ""), ToolFinished(call, tool_error("invalid_arguments", "x"), 0)
    )

    assert "read_file notes.md" in shown


@pytest.mark.parametrize(
    ("level", "shown"),
    [("warning", "warning: disk low"), ("error", "error: disk low"), ("info", "disk low")],
)
def test_a_notice_names_its_level_in_words_unless_it_is_information(
    level: Literal["info", "warning", "error"], shown: str
) -> None:
    err = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=100), Console(file=err, width=100), stream_answer=False
    )

    renderer.emit(Notice(level, "disk low"))

    assert err.getvalue() == f"{shown}\n"


def test_the_spinner_shows_a_bracketed_command_as_written() -> None:
    err = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=100),
        Console(file=err, width=100, force_terminal=True),
        stream_answer=False,
    )
    call = tool_call("c1", "bash", '{"command": "echo [/x] [bold]hi"}')

    renderer.emit(ToolStarted(call, "echo [/x] [bold]hi"))
    renderer.close()

    assert "bash echo [/x] [bold]hi" in err.getvalue()


def test_the_spinner_says_how_long_the_wait_has_lasted() -> None:
    err = io.StringIO()
    clock = SteppedClock(100.0)
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=100),
        Console(file=err, width=100, force_terminal=True),
        stream_answer=False,
        clock=clock,
    )

    renderer.emit(TurnStarted(1))
    clock.advance(42.9)
    renderer.close()  # the spinner's last redraw

    assert "thinking… (42s)" in err.getvalue()


def test_each_wait_counts_whole_seconds_from_its_own_start() -> None:
    clock = SteppedClock(100.0)
    label = WaitingLabel("bash make", clock)
    clock.advance(59.5)
    shown = io.StringIO()
    console = Console(file=shown, width=80)

    console.print(label)
    clock.advance(0.5)
    console.print(WaitingLabel("thinking…", clock))
    console.print(label)

    assert shown.getvalue() == "bash make (59s)\nthinking… (0s)\nbash make (60s)\n"


def compaction_run(*events: CompactionApplied, verbose: bool = False) -> list[str]:
    """The stderr lines one run with these compaction events shows."""
    err = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=100),
        Console(file=err, width=100),
        stream_answer=False,
        verbose=verbose,
    )
    with rendering(renderer):
        for event in events:
            renderer.emit(event)
    return err.getvalue().splitlines()


MICRO_STEPS = [CompactionApplied("micro", "micro: 1 result cleared", 1, 100) for _ in range(3)]
SNIP_STEPS = [CompactionApplied("snip", f"snip: {n} groups omitted", n, 50) for n in (2, 3)]


def test_snip_and_micro_show_their_first_step_and_the_run_ends_with_totals() -> None:
    shown = compaction_run(*MICRO_STEPS, *SNIP_STEPS)

    assert shown == [
        "⚙ micro: 1 result cleared",
        "⚙ snip: 2 groups omitted",
        "⚙ compaction this run: snip 5 groups, micro 3 results; 400 B saved (-v shows all 5 steps)",
    ]


def test_verbose_shows_every_snip_and_micro_step() -> None:
    shown = compaction_run(*MICRO_STEPS, verbose=True)

    assert shown[:3] == ["⚙ micro: 1 result cleared"] * 3


def test_verbose_totals_do_not_say_what_verbose_would_show() -> None:
    shown = compaction_run(*MICRO_STEPS, verbose=True)

    assert shown[-1] == "⚙ compaction this run: micro 3 results; 300 B saved"


def test_steps_that_change_what_the_model_sees_always_show() -> None:
    persist = CompactionApplied("persist", "persisted 1 result, 40,000 B → a.txt", 1, 38_000)
    summary = CompactionApplied("summary", "summary: 60,000 B → 1,500 B", 1, 58_500)

    shown = compaction_run(persist, persist, summary, summary)

    assert shown.count("⚙ persisted 1 result, 40,000 B → a.txt") == 2
    assert shown.count("⚙ summary: 60,000 B → 1,500 B") == 2


def test_each_run_counts_its_own_totals_and_later_runs_stay_quiet() -> None:
    err = io.StringIO()
    renderer = TerminalRenderer(
        Console(file=io.StringIO(), width=100), Console(file=err, width=100), stream_answer=False
    )
    with rendering(renderer):
        renderer.emit(MICRO_STEPS[0])
    with rendering(renderer):
        renderer.emit(MICRO_STEPS[1])

    assert err.getvalue().splitlines()[1:] == [
        "⚙ compaction this run: micro 1 result; 100 B saved (-v shows the step)",
        "⚙ compaction this run: micro 1 result; 100 B saved (-v shows the step)",
    ]


def test_a_run_without_compaction_prints_no_totals() -> None:
    assert compaction_run() == []


# Saved text replayed by `sessions list`, `sessions show` and `artifacts show`: a prompt piped
# from a file or a tool's coloured output must not clear, recolour or reorder the screen.
HOSTILE = "hello \x1b[2J\x1b[31mRED\u202eevil"


def printed(renderable: RenderableType) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


def test_session_list_shows_control_characters_in_a_prompt_as_escapes() -> None:
    started = datetime(2026, 11, 30, tzinfo=UTC)
    info = SessionInfo(
        session_id="aaaa0001",
        path=Path("20261130T000000Z-aaaa0001.jsonl"),
        started=started,
        chapter=1,
        model="m",
        first_prompt=HOSTILE,
        has_prompt=True,
        size_bytes=10,
        modified=started,
    )

    shown = printed(session_table([info]))

    assert "\x1b" not in shown and "\u202e" not in shown
    assert "hello \\x1b[2J\\x1b[31mRED\\u202eevil" in shown


def test_a_replayed_message_shows_control_characters_as_escapes() -> None:
    shown = printed(messages_table([{"role": "tool", "content": HOSTILE}, HOSTILE], title="t"))

    assert "\x1b" not in shown and "\u202e" not in shown
    assert shown.count("\\x1b[2J") == 2


def test_a_finished_tool_line_shortens_its_subject_to_fit_the_terminal() -> None:
    command = "wc -l -- src/cli.py src/adapters/filesystem.py src/features/compaction/manager.py"
    line = tool_line("bash", command, tool_success("x" * 199), 0.01, width=80)

    assert len(line.plain) <= 80
    assert line.plain.startswith("• bash wc -l -- src/cli.py")
    assert line.plain.endswith("…  199 B  0.01s")


# A model's text, a tool's name, a hook's reason or a server's words in any line the
# renderer prints: escape sequences arrive as text, never as control bytes.
SEQUENCES = "\x1b]52;c;eA==\x07\x1b]0;t\x07\x1b[2J\x9b1m"
SEQUENCES_SHOWN = r"\x1b]52;c;eA==\x07\x1b]0;t\x07\x1b[2J\x9b1m"


def rendered_streams(events: list[Event], *, markdown: bool = False) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    renderer = TerminalRenderer(
        Console(file=out, width=200, color_system=None),
        Console(file=err, width=200, color_system=None),
        stream_answer=True,
        markdown=markdown,
        verbose=True,
    )
    with rendering(renderer):
        for event in events:
            renderer.emit(event)
    return out.getvalue(), err.getvalue()


def test_every_activity_line_shows_control_characters_as_escapes() -> None:
    call = tool_call("c1", f"x{SEQUENCES}", "{}")
    events: list[Event] = [
        ToolStarted(call, SEQUENCES),
        ToolFinished(call, tool_error("unknown_tool", "no"), 0.0),
        Notice("warning", SEQUENCES),
        PermissionDecided("bash", SEQUENCES, "deny", SEQUENCES, "hook"),
        CompactionApplied("summary", SEQUENCES),
    ]

    _, err = rendered_streams(events)

    assert "\x1b" not in err and "\x9b" not in err and "\x07" not in err
    assert err.count(SEQUENCES_SHOWN) == 6  # name and subject, notice, subject and reason, step


@pytest.mark.parametrize("markdown", [False, True], ids=["text", "markdown"])
def test_a_sequence_split_across_streamed_pieces_stays_text(markdown: bool) -> None:
    pieces = ["before \x1b", "]52;c;eA==", "\x07 \x1b[", "2J \x9b", "1m after"]

    out, _ = rendered_streams([TextDelta(piece) for piece in pieces], markdown=markdown)

    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert r"before \x1b]52;c;eA==\x07 \x1b[2J \x9b1m after" in out


def test_an_error_line_shows_control_characters_as_escapes() -> None:
    assert printed(error_line(f"bad {SEQUENCES}")) == f"error: bad {SEQUENCES_SHOWN}\n"


def test_a_name_that_is_not_utf8_is_shown_with_its_byte_escaped() -> None:
    shown = printed(tool_line("read_file", "caf\udce9.txt", tool_success("ok"), 0.0))

    assert shown.startswith(r"• read_file caf\xe9.txt")


def test_a_streamed_answer_on_a_terminal_breaks_between_words_and_shows_all_before_a_tool() -> None:
    out, err = io.StringIO(), io.StringIO()
    renderer = TerminalRenderer(
        Console(file=out, width=16, force_terminal=True, color_system=None),
        Console(file=err, width=100, force_terminal=True, color_system=None),
        stream_answer=True,
    )
    call = tool_call("c1", "glob", '{"pattern": "*.py"}')
    with rendering(renderer):
        for piece in ["count the Py", "thon files no", "w"]:
            renderer.emit(TextDelta(piece))
        renderer.emit(ToolStarted(call, "*.py"))

    assert out.getvalue() == "count the Python\nfiles now\n"
