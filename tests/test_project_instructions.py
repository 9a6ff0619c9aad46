"""Chapter 7's always-on knowledge: AGENTS.md (or CLAUDE.md) in the system prompt, read
safely and within a size cap; end to end over HTTP, and the reader on its own."""

from __future__ import annotations

import os
from pathlib import Path

from agent_tutorial.features.project_instructions import read_project_instructions
from tests.conftest import RunCli
from tests.loopback import LoopbackServer, project_context_text, prompt_text, text_stream

RULE = "Always run `make check` before saying a change is done."


def project_context(loopback: LoopbackServer, request: int = 0) -> str:
    """The project context of a request, where the instructions go."""
    (context,) = [
        text
        for text in map(project_context_text, loopback.requests[request]["messages"])
        if text is not None
    ]
    return context


def whole_prompt(loopback: LoopbackServer, request: int = 0) -> str:
    return prompt_text(loopback.requests[request])


def test_agents_md_reaches_the_first_request(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(f"# Rules\n\n{RULE}\n")
    loopback.queue(text_stream("ok"))

    result = run_cli("run", "-c", "7", "-p", "hi")

    assert result.exit_code == 0, result.stderr
    prompt = project_context(loopback)
    assert RULE in prompt and "Project instructions from AGENTS.md" in prompt


def test_claude_md_is_read_when_there_is_no_agents_md(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "CLAUDE.md").write_text(RULE)
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "7", "-p", "hi")

    assert "from CLAUDE.md" in project_context(loopback)


def test_agents_md_wins_over_claude_md(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(RULE)
    (workspace / "CLAUDE.md").write_text("Use tabs everywhere.")
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "7", "-p", "hi")

    assert "Use tabs" not in whole_prompt(loopback)


def test_chapters_before_7_do_not_read_agents_md(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(RULE)
    loopback.queue(text_stream("ok"))

    run_cli("run", "-c", "6", "-p", "hi")

    assert RULE not in whole_prompt(loopback)


def test_a_large_agents_md_is_cut_with_a_one_line_warning(
    run_cli: RunCli, loopback: LoopbackServer, workspace: Path
) -> None:
    (workspace / "AGENTS.md").write_text(RULE + "\n" + "filler line\n" * 100 + "LAST LINE\n")
    loopback.queue(text_stream("ok"))

    result = run_cli(
        "run", "-c", "7", "-p", "hi", env={"AGENT_TUTORIAL_PROJECT_INSTRUCTIONS_MAX_BYTES": "200"}
    )

    assert RULE in project_context(loopback) and "LAST LINE" not in whole_prompt(loopback)
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
    assert "SECRET FROM OUTSIDE" not in whole_prompt(loopback)
    assert "AGENTS.md ignored: it resolves outside the project" in result.stderr


def test_an_agents_md_symlink_into_the_state_folder_is_refused(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / ".env").write_text("OPENAI_API_KEY=sk-not-for-the-prompt\n")
    (workspace / "AGENTS.md").symlink_to(".agent_tutorial/.env")

    read = read_project_instructions(workspace, 1024)

    assert not read.files
    assert read.problems[0].startswith("AGENTS.md ignored: tools may not read")


def test_a_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text(RULE)
    (workspace / "AGENTS.md").symlink_to("docs/agents.md")

    instructions = read_project_instructions(workspace, 1024)

    assert instructions.text == RULE and not instructions.problems


def test_a_fifo_named_agents_md_is_refused_without_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "AGENTS.md")

    read = read_project_instructions(workspace, 1024)

    assert not read.files and read.problems == ("AGENTS.md ignored: not a regular file",)


def test_no_instructions_file_reads_as_none(workspace: Path) -> None:
    assert read_project_instructions(workspace, 1024).files == ()


def test_a_cut_inside_a_character_keeps_whole_characters(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("ab" + "é" * 10)  # é is two bytes

    instructions = read_project_instructions(workspace, 5)

    assert instructions.truncated
    assert instructions.text == "abé" and instructions.size == 22


def test_an_agents_md_that_is_not_utf8_is_refused(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_bytes(b"rules \xff\xfe here")

    read = read_project_instructions(workspace, 1024)

    assert not read.files and read.problems == ("AGENTS.md ignored: it is not UTF-8 text",)


# From a subdirectory: every AGENTS.md from the project root down to where the agent started


def test_instructions_are_gathered_from_the_root_down_to_the_start(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    start = workspace / "src" / "app"
    start.mkdir(parents=True)
    (workspace / "AGENTS.md").write_text("root rule")
    (workspace / "src" / "CLAUDE.md").write_text("src rule")
    (start / "AGENTS.md").write_text("app rule")
    (workspace / "elsewhere").mkdir()
    (workspace / "elsewhere" / "AGENTS.md").write_text("a sibling's rule")

    read = read_project_instructions(start, 1024, root=workspace)

    assert [found.file_name for found in read.files] == [
        "AGENTS.md",
        "src/CLAUDE.md",
        "src/app/AGENTS.md",
    ]
    prompt = read.prompt_text()
    assert prompt.index("root rule") < prompt.index("src rule") < prompt.index("app rule")
    assert "Project instructions from src/app/AGENTS.md" in prompt
    assert "sibling" not in prompt


def test_the_size_cap_holds_for_all_files_together(workspace: Path) -> None:
    start = workspace / "src"
    start.mkdir()
    (workspace / "AGENTS.md").write_text("r" * 8)
    (start / "AGENTS.md").write_text("s" * 8)
    (start / "deeper").mkdir()

    read = read_project_instructions(start / "deeper", 12, root=workspace)

    assert [found.text for found in read.files] == ["r" * 8, "s" * 4]
    assert read.problems == (
        "src/AGENTS.md is 8 bytes; only its first 4 are sent to the model "
        "(raise project_instructions_max_bytes to send more)",
    )


def test_a_file_past_a_full_cap_is_left_out_and_named(workspace: Path) -> None:
    start = workspace / "src"
    start.mkdir()
    (workspace / "AGENTS.md").write_text("r" * 8)
    (start / "AGENTS.md").write_text("s")

    read = read_project_instructions(start, 8, root=workspace)

    assert [found.file_name for found in read.files] == ["AGENTS.md"]
    assert read.problems == ("src/AGENTS.md left out: the files above it fill 8 bytes",)


def test_one_broken_file_leaves_the_others_in(workspace: Path) -> None:
    start = workspace / "src"
    start.mkdir()
    (workspace / "AGENTS.md").write_bytes(b"\xff not text")
    (start / "AGENTS.md").write_text(RULE)

    read = read_project_instructions(start, 1024, root=workspace)

    assert read.text == RULE
    assert read.problems == ("AGENTS.md ignored: it is not UTF-8 text",)


def test_a_nested_symlink_into_the_root_state_folder_is_refused(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / ".env").write_text("OPENAI_API_KEY=sk-not-for-the-prompt\n")
    start = workspace / "src"
    start.mkdir()
    (start / "AGENTS.md").symlink_to("../.agent_tutorial/.env")

    read = read_project_instructions(start, 1024, root=workspace)

    assert not read.files and "tools may not read" in read.problems[0]
