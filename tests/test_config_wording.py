"""Issue 29, item 7: a configuration value's problem in the project's words, with the
value given, not the validation library's (`Input should be greater than or equal to 1`),
named where it was given: the file and its key, the environment variable or the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_tutorial.config import ConfigError, load_settings
from tests.conftest import RunCli


def refused(workspace: Path, toml: str) -> str:
    state = workspace / ".agent_tutorial"
    state.mkdir(exist_ok=True)
    (state / "config.toml").write_text(toml)
    with pytest.raises(ConfigError) as raised:
        load_settings(workspace, trusted=True)
    return str(raised.value)


@pytest.mark.parametrize(
    ("toml", "said"),
    [
        ("max_turns = 0", "max_turns: must be at least 1 (got 0)"),
        ('tool_calls = "xml"', "tool_calls: must be one of 'auto', 'native' or 'text' (got 'xml')"),
        ('max_turns = "ten"', "max_turns: must be a whole number (got 'ten')"),
        ('redact_secrets = "maybe"', "redact_secrets: must be true or false (got 'maybe')"),
        ("request_timeout_s = 86400.5", "request_timeout_s: must be at most 86400 (got 86400.5)"),
    ],
)
def test_a_bad_value_is_said_in_the_projects_words(workspace: Path, toml: str, said: str) -> None:
    message = refused(workspace, toml + "\n")

    assert said in message
    assert "Input should" not in message and "Value error" not in message


# --- named where it was given -----------------------------------------------------------


def load_refused(workspace: Path) -> str:
    with pytest.raises(ConfigError) as raised:
        load_settings(workspace, trusted=True)
    return str(raised.value)


def test_a_value_in_config_toml_is_named_with_the_file(workspace: Path) -> None:
    message = refused(workspace, "max_turns = 0\n")

    config = workspace / ".agent_tutorial" / "config.toml"
    assert message == f"invalid configuration in {config}: max_turns: must be at least 1 (got 0)"


@pytest.mark.parametrize("variable", ["AGENT_TUTORIAL_TOOL_CALLS", "agent_tutorial_tool_calls"])
def test_a_value_in_the_env_file_is_named_by_its_line_as_written(
    workspace: Path, variable: str
) -> None:
    dotenv = workspace / ".agent_tutorial" / ".env"
    dotenv.parent.mkdir()
    dotenv.write_text(f"{variable}=xml\n")

    assert load_refused(workspace).startswith(
        f"invalid configuration in {dotenv}: {variable}: must be one of"
    )


def test_a_value_in_the_users_own_config_is_named_with_that_file(
    workspace: Path, tmp_path: Path
) -> None:
    user = tmp_path / "home" / ".config" / "agent-tutorial" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text("max_turns = 0\n")

    assert load_refused(workspace).startswith(f"invalid configuration in {user}: max_turns: ")


def test_the_environment_is_named_where_it_overrides_the_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_MAX_TURNS", "0")

    message = refused(workspace, "max_turns = 5\n")

    assert message == (
        "invalid configuration in the environment: AGENT_TUTORIAL_MAX_TURNS: "
        "must be at least 1 (got '0')"
    )


def test_a_bad_value_the_environment_overrides_is_no_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_MAX_TURNS", "5")
    (workspace / ".agent_tutorial").mkdir()
    (workspace / ".agent_tutorial" / "config.toml").write_text("max_turns = 0\n")

    assert load_settings(workspace, trusted=True).max_turns == 5


def test_problems_from_two_sources_are_named_each_with_its_own(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_TEMPERATURE", "9")

    message = refused(workspace, "max_turns = 0\n")

    config = workspace / ".agent_tutorial" / "config.toml"
    assert message == (
        f"invalid configuration in {config}: max_turns: must be at least 1 (got 0); "
        "in the environment: AGENT_TUTORIAL_TEMPERATURE: must be at most 2 (got '9')"
    )


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--max-turns", "0"], "Invalid value for '--max-turns': must be at least 1 (got 0)"),
        (["-c", "x"], "Invalid value for '--chapter' / '-c': must be a whole number (got x)"),
        (["-c", "10"], "Invalid value for '--chapter' / '-c': must be at most 9 (got 10)"),
    ],
)
def test_a_flags_value_is_refused_in_the_same_words(
    run_cli: RunCli, flags: list[str], said: str
) -> None:
    result = run_cli("run", *flags, "-p", "hi")

    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"error: {said}"
