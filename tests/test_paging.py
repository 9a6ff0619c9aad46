"""Issue 29, item 7: `sessions show` and `artifacts show` taller than the terminal go
through the pager ($PAGER here, a `sed` that marks each line it is given); shorter, or to a
pipe, they are printed as they are."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from agent_tutorial.features.session_files import file_id
from agent_tutorial.paging import write_paged
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, text_stream
from tests.terminal import run_on_two_terminals

PAGER = {"PAGER": "sed 's/^/paged: /'"}
LONG_ANSWER = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(1, 41))


def saved_session(run_cli: RunCli, loopback: LoopbackServer, workspace: Path, answer: str) -> str:
    loopback.queue(text_stream(answer))
    assert run_cli("run", "-c", "2", "-p", "hi").exit_code == 0
    newest = max((workspace / ".agent_tutorial" / "sessions").iterdir())
    return file_id(newest)


def on_a_terminal(workspace: Path, columns: int, *args: str) -> list[str]:
    run = run_on_two_terminals(args, cwd=workspace, env=PAGER, columns=columns)
    assert run.exit_code == 0, run.stderr
    return run.stdout.decode().splitlines()


@pytest.mark.parametrize("columns", [80, 40])
def test_a_session_taller_than_the_terminal_is_paged(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path, columns: int
) -> None:
    session = saved_session(run_cli, loopback, workspace, LONG_ANSWER)

    lines = on_a_terminal(workspace, columns, "sessions", "show", session)

    assert len(lines) > 30 and all(line.startswith("paged: ") for line in lines)
    assert "Paragraph 40 " in " ".join(lines)


def test_a_session_that_fits_the_terminal_is_not_paged(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    session = saved_session(run_cli, loopback, workspace, "short")

    lines = on_a_terminal(workspace, 80, "sessions", "show", session)

    assert "short" in " ".join(lines) and not any("paged: " in line for line in lines)


def test_a_long_session_to_a_pipe_is_not_paged(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    session = saved_session(run_cli, loopback, workspace, LONG_ANSWER)

    shown = run_cli("sessions", "show", session, env=PAGER).stdout

    assert "Paragraph 40 of a long answer." in shown and "paged: " not in shown


def test_a_long_artifact_on_a_terminal_is_paged_as_it_is(workspace: Path) -> None:
    folder = workspace / ".agent_tutorial" / "artifacts"
    folder.mkdir(parents=True)
    text = "".join(f"line {n}\n" for n in range(1, 61))
    (folder / "tool-result-abc123.txt").write_text(text)

    lines = on_a_terminal(workspace, 40, "artifacts", "show", "abc123")

    assert lines == [f"paged: line {n}" for n in range(1, 61)]


def terminal_of(height: int) -> tuple[Console, io.StringIO]:
    screen = io.StringIO()
    return Console(file=screen, force_terminal=True, width=40, height=height), screen


@pytest.mark.parametrize(
    ("text", "paged"),
    [
        ("x\n" * 9, False),  # a row to spare for the shell's prompt
        ("x\n" * 10, True),
        ("x\n" * 8 + "y" * 41 + "\n", True),  # a line wider than the terminal takes two
    ],
    ids=["one-row-short", "as-tall", "wrapped"],
)
def test_output_as_tall_as_the_terminal_is_paged_and_one_row_less_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, paged: bool
) -> None:
    monkeypatch.setenv("PAGER", f"cat > {tmp_path / 'paged'}")
    console, screen = terminal_of(height=10)

    write_paged(console, text)

    assert (tmp_path / "paged").exists() is paged
    shown = (tmp_path / "paged").read_text() if paged else screen.getvalue()
    assert shown == text


def test_without_a_pager_to_run_the_text_is_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAGER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no less
    console, screen = terminal_of(height=3)

    write_paged(console, "x\n" * 5)

    assert screen.getvalue() == "x\n" * 5
