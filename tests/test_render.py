"""The terminal renderer: one compact activity line per tool call on stderr."""

from __future__ import annotations

import io

from rich.console import Console

from agent_tutorial.core.events import ToolFinished, ToolStarted
from agent_tutorial.core.messages import tool_call
from agent_tutorial.core.tools import tool_error, tool_success
from agent_tutorial.render import TerminalRenderer


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
