"""Issue 29, item 5: `agent-tutorial` alone is `agent-tutorial run`, as `claude` and
`codex` alone are their interactive sessions: the REPL on a terminal (chapter 8, run's
default), a one-shot run on a prompt piped in; `--help` still prints help."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import cli_command, cli_environment
from tests.loopback import LoopbackServer, text_stream
from tests.terminal import Terminal


def test_a_prompt_piped_to_the_bare_command_runs_once(
    workspace: Path, loopback: LoopbackServer
) -> None:
    loopback.queue(text_stream("four"))

    done = subprocess.run(
        cli_command(),
        cwd=workspace,
        env=cli_environment(loopback),
        input="two and two?",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert (done.returncode, done.stdout) == (0, "four\n"), done.stderr
    assert loopback.requests[0]["messages"][-1] == {"role": "user", "content": "two and two?"}


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_still_prints_help_and_the_commands(workspace: Path, flag: str) -> None:
    done = subprocess.run(
        cli_command(flag),
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0
    assert done.stdout.startswith("Usage: ")
    assert "run" in done.stdout.split() and "sessions" in done.stdout.split()


@pytest.mark.parametrize("columns", [80, 40])
def test_the_bare_command_opens_the_repl_on_a_terminal_with_runs_default_chapter(
    make_terminal: Callable[..., Terminal], loopback: LoopbackServer, columns: int
) -> None:
    loopback.queue(text_stream("hello there"))
    terminal = make_terminal(columns=columns)
    terminal.wait_for_prompt()

    terminal.enter("hi")
    terminal.wait_for_text("hello there")
    terminal.wait_for_prompt()

    assert "chapter 9: MCP servers" in terminal.flat_text()
    assert len(loopback.requests) == 1
