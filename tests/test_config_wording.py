"""Issue 29, item 7: a configuration value's problem in the project's words, with the
value given, not the validation library's (`Input should be greater than or equal to 1`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_tutorial.config import ConfigError, load_settings


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
