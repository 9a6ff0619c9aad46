"""Chapter 7's always-on knowledge: AGENTS.md (or CLAUDE.md) in the system prompt, read
safely and within a size cap; end to end over HTTP, and the reader on its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_tutorial.features.project_instructions import (
    InstructionsError,
    read_project_instructions,
)
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, text_stream

RULE = "Always run `make check` before saying a change is done."


def system_prompt(loopback: LoopbackServer, request: int = 0) -> str:
    first = loopback.requests[request]["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def test_agents_md_reaches_the_first_request(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(f"# Rules\n\n{RULE}\n")
    loopback.queue(text_stream("ok"))

    result = run_cli("run", "-c", "7", "-p", "hi")

    assert result.exit_code == 0, result.stderr
    prompt = system_prompt(loopback)
    assert RULE in prompt and "Project instructions from AGENTS.md" in prompt


def test_claude_md_is_read_when_there_is_no_agents_md(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "CLAUDE.md").write_text(RULE)
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "7", "-p", "hi")

    assert "from CLAUDE.md" in system_prompt(loopback)


def test_agents_md_wins_over_claude_md(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(RULE)
    (workspace / "CLAUDE.md").write_text("Use tabs everywhere.")
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "7", "-p", "hi")

    assert "Use tabs" not in system_prompt(loopback)


def test_chapters_before_7_do_not_read_agents_md(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(RULE)
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "6", "-p", "hi")

    assert RULE not in system_prompt(loopback)


def test_a_large_agents_md_is_cut_with_a_one_line_warning(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(RULE + "\n" + "filler line\n" * 100 + "LAST LINE\n")
    loopback.queue(text_stream("ok"))

    result = run_cli(
        "run", "-c", "7", "-p", "hi", env={"AGENT_TUTORIAL_PROJECT_INSTRUCTIONS_MAX_BYTES": "200"}
    )

    assert RULE in system_prompt(loopback) and "LAST LINE" not in system_prompt(loopback)
    notes = [line for line in result.stderr.splitlines() if "AGENTS.md is" in line]
    assert len(notes) == 1 and "first 200" in notes[0]


def test_an_agents_md_symlink_out_of_the_workspace_is_not_read(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    secret = workspace.parent / "outside.md"
    secret.write_text("SECRET FROM OUTSIDE")
    (workspace / "AGENTS.md").symlink_to(secret)
    loopback.queue(text_stream("ok"))

    result = run_cli("run", "-c", "7", "-p", "hi")

    assert result.exit_code == 0
    assert "SECRET FROM OUTSIDE" not in system_prompt(loopback)
    assert "AGENTS.md ignored: it resolves outside the workspace" in result.stderr


def test_an_agents_md_symlink_into_the_state_folder_is_refused(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / ".env").write_text("OPENAI_API_KEY=sk-not-for-the-prompt\n")
    (workspace / "AGENTS.md").symlink_to(".agent_tutorial/.env")

    with pytest.raises(InstructionsError, match=r"AGENTS\.md ignored: tools may not read"):
        read_project_instructions(workspace, 1024)


def test_a_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text(RULE)
    (workspace / "AGENTS.md").symlink_to("docs/agents.md")

    instructions = read_project_instructions(workspace, 1024)

    assert instructions is not None and instructions.text == RULE


def test_a_fifo_named_agents_md_is_refused_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "AGENTS.md")

    with pytest.raises(InstructionsError, match="not a regular file"):
        read_project_instructions(workspace, 1024)


def test_no_instructions_file_reads_as_none(workspace: Path) -> None:
    assert read_project_instructions(workspace, 1024) is None


def test_a_cut_inside_a_character_keeps_whole_characters(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("ab" + "é" * 10)  # é is two bytes

    instructions = read_project_instructions(workspace, 5)

    assert instructions is not None and instructions.truncated
    assert instructions.text == "abé" and instructions.size == 22


def test_an_agents_md_that_is_not_utf8_is_refused(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_bytes(b"rules \xff\xfe here")

    with pytest.raises(InstructionsError, match="not UTF-8"):
        read_project_instructions(workspace, 1024)
