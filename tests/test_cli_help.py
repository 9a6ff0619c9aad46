"""What `agent-tutorial --help`, `--version` and shell completion show."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_tutorial import __version__
from agent_tutorial.cli import app
from tests.terminal import run_on_two_terminals

COMMAND = Path(sys.executable).with_name("agent-tutorial")


def help_text(*command: str, columns: int = 80) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.output


def words(text: str) -> list[str]:
    """The words of `text`, a hyphenated one in its parts (wrapping may break after a
    hyphen, as it may at a space)."""
    return [word for word in re.split(r"\s+|(?<=-)", text) if word]


def command_paths() -> list[tuple[str, ...]]:
    """Every command and sub-command, read from the help itself."""
    found: list[tuple[str, ...]] = [()]
    for path in found:
        text = help_text(*path)
        if "Commands:" in text:
            listed = text.split("Commands:", 1)[1]
            found += [(*path, name) for name in re.findall(r"^  (\S+)  ", listed, re.M)]
    return found


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])

    assert result.exit_code == 0
    assert result.output == f"agent-tutorial {__version__}\n"


def test_every_help_page_is_free_of_doubled_negative_flags() -> None:
    paths = command_paths()

    assert ("run",) in paths and ("sessions", "list") in paths
    for path in paths:
        assert "--no-no-" not in help_text(*path), path


def test_command_summaries_are_whole_sentences_not_cut_with_dots() -> None:
    for path in command_paths():
        text = help_text(*path)
        if "Commands:" in text:
            for line in text.split("Commands:", 1)[1].splitlines():
                assert not line.rstrip().endswith("..."), (path, line)


def test_run_help_keeps_its_sentences_together() -> None:
    text = " ".join(help_text("run").split())

    assert "the piped input comes first, as context." in text


def test_every_help_page_fits_40_columns_and_breaks_only_between_words() -> None:
    for path in command_paths():
        narrow, wide = help_text(*path, columns=40), help_text(*path, columns=200)

        assert max(len(line) for line in narrow.splitlines()) <= 40, (path, narrow)
        assert words(narrow) == words(wide), path  # no word cut, none shortened with dots


@pytest.mark.parametrize("columns", [80, 40])
def test_run_help_on_a_terminal_fits_it(workspace: Path, columns: int) -> None:
    """In a real terminal of that size: click alone laid help out 50 columns wide at
    least, and the terminal then broke its lines again mid-word (`Show t` / `his`)."""
    run = run_on_two_terminals(["run", "--help"], cwd=workspace, env={}, columns=columns)
    shown = run.stdout.decode().replace("\r", "")

    assert run.exit_code == 0
    assert max(len(line) for line in shown.splitlines()) <= columns
    after_usage = shown.split("\n\n", 1)[1]  # the usage line names the program as run
    assert words(after_usage) == words(help_text("run", columns=200).split("\n\n", 1)[1])


@pytest.mark.parametrize(
    ("shell", "opening"),
    [("bash", "_agent_tutorial_completion() {"), ("zsh", "#compdef agent-tutorial")],
)
def test_completion_script_is_offered_for_common_shells(shell: str, opening: str) -> None:
    # The shell named in the request, as `--show-completion` does for the shell it detects
    # among its parent processes (which a test runner's workers need not have).
    done = subprocess.run(
        [str(COMMAND)],
        env={**os.environ, "_AGENT_TUTORIAL_COMPLETE": f"source_{shell}"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.lstrip().startswith(opening)
    assert "_AGENT_TUTORIAL_COMPLETE" in done.stdout


def test_completion_offers_the_output_formats() -> None:
    environment = {
        **os.environ,
        "_AGENT_TUTORIAL_COMPLETE": "complete_bash",
        "COMP_WORDS": "agent-tutorial run --output-format ",
        "COMP_CWORD": "3",
    }

    done = subprocess.run(
        [str(COMMAND)], env=environment, capture_output=True, text=True, timeout=60, check=False
    )

    assert done.stdout.split() == ["text", "json", "stream-json"]


def test_dash_h_is_help_for_every_command() -> None:
    for path in command_paths():
        result = CliRunner().invoke(app, [*path, "-h"], env={"COLUMNS": "80"})

        assert result.exit_code == 0, (path, result.output)
        assert result.output == help_text(*path)


@pytest.mark.parametrize(
    ("arguments", "usage", "error"),
    [
        (["--bogus"], "agent-tutorial [OPTIONS]", "No such option: --bogus"),
        (["nope"], "agent-tutorial [OPTIONS]", "No such command 'nope'."),
        (["run", "-c", "0"], "agent-tutorial run [OPTIONS]", "Invalid value for '--chapter'"),
        (["sessions", "show"], "agent-tutorial sessions show", "Missing argument"),
    ],
)
def test_a_refused_command_line_ends_in_error_as_every_failure_does(
    arguments: list[str], usage: str, error: str
) -> None:
    done = subprocess.run(
        [str(COMMAND), *arguments], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 2
    assert done.stderr.startswith(f"Usage: {usage}")
    last = done.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"error: {error}")
    assert "Error:" not in done.stderr
