"""Settings precedence: flags > environment > .agent_tutorial/.env > project TOML > user TOML."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from agent_tutorial.config import (
    ConfigError,
    Settings,
    load_settings,
    missing_settings,
    user_config_path,
)
from agent_tutorial.features.compaction import CompactionSettings


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def layered(workspace: Path) -> Path:
    """A model name in every file layer, each naming where it came from."""
    write(user_config_path(), 'model = "from-user-toml"\nmax_turns = 11\n')
    write(workspace / ".agent_tutorial" / "config.toml", 'model = "from-project-toml"\n')
    write(workspace / ".agent_tutorial" / ".env", "AGENT_TUTORIAL_MODEL=from-dotenv\n")
    return workspace


def test_a_flag_beats_every_other_source(layered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_MODEL", "from-env")

    assert load_settings(layered, {"model": "from-flag"}).model == "from-flag"


def test_the_environment_beats_the_dotenv_file(
    layered: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_MODEL", "from-env")

    assert load_settings(layered).model == "from-env"


def test_openai_model_is_accepted_as_the_model_variable(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_MODEL", "from-openai-model")

    assert load_settings(workspace).model == "from-openai-model"


def test_the_dotenv_file_beats_the_project_toml(layered: Path) -> None:
    assert load_settings(layered).model == "from-dotenv"


def test_the_project_toml_beats_the_user_toml(layered: Path) -> None:
    (layered / ".agent_tutorial" / ".env").unlink()

    settings = load_settings(layered)

    assert settings.model == "from-project-toml"
    assert settings.max_turns == 11  # only the user file sets it


def test_an_unset_flag_does_not_hide_lower_layers(layered: Path) -> None:
    assert load_settings(layered, {"model": None}).model == "from-dotenv"


def test_an_api_key_in_toml_is_refused(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", 'api_key = "sk-oops"\n')

    with pytest.raises(ConfigError, match="api_key_env"):
        load_settings(workspace)


def test_api_key_env_names_the_variable_that_holds_the_key(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", 'api_key_env = "DEEPSEEK_API_KEY"\n')
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek")

    settings = load_settings(workspace, trusted=True)

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-deepseek"
    assert "sk-deepseek" not in repr(settings)


def test_api_key_env_finds_the_key_in_the_dotenv_file(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", 'api_key_env = "DEEPSEEK_API_KEY"\n')
    write(workspace / ".agent_tutorial" / ".env", "DEEPSEEK_API_KEY=sk-deepseek-dotenv\n")

    settings = load_settings(workspace, trusted=True)

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-deepseek-dotenv"


def test_unknown_keys_in_the_dotenv_file_are_ignored(workspace: Path) -> None:
    dotenv = "UNRELATED_TOOL_TOKEN=abc\nAGENT_TUTORIAL_NOT_A_SETTING=1\nAGENT_TUTORIAL_MODEL=m\n"
    write(workspace / ".agent_tutorial" / ".env", dotenv)

    assert load_settings(workspace).model == "m"


def test_every_missing_setting_is_named(workspace: Path) -> None:
    missing = missing_settings(load_settings(workspace))

    assert missing == ["OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_TUTORIAL_MODEL"]


def test_a_loopback_endpoint_needs_no_key(workspace: Path) -> None:
    settings = load_settings(workspace, {"base_url": "http://127.0.0.1:8080/v1", "model": "m"})

    assert missing_settings(settings) == []


def test_the_demo_model_needs_nothing_else(workspace: Path) -> None:
    assert missing_settings(load_settings(workspace, {"model": "demo"})) == []


def test_an_invalid_value_is_a_readable_config_error(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", 'permission_mode = "yolo"\n')

    with pytest.raises(ConfigError, match="permission_mode"):
        load_settings(workspace, trusted=True)


def test_the_sandbox_is_unset_by_default_and_the_network_off(workspace: Path) -> None:
    settings = load_settings(workspace)

    assert (settings.sandbox, settings.sandbox_network) == (None, False)


def test_the_sandbox_settings_come_from_the_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_SANDBOX", "read-only")
    monkeypatch.setenv("AGENT_TUTORIAL_SANDBOX_NETWORK", "true")

    settings = load_settings(workspace)

    assert (settings.sandbox, settings.sandbox_network) == ("read-only", True)


def test_a_sandbox_mode_that_does_not_exist_is_a_readable_config_error(workspace: Path) -> None:
    # Codex calls "off" danger-full-access; here the name is refused, not guessed at.
    write(workspace / ".agent_tutorial" / "config.toml", 'sandbox = "danger-full-access"\n')

    with pytest.raises(ConfigError, match="sandbox: must be one of 'workspace-write'"):
        load_settings(workspace, trusted=True)  # a powerful setting: untrusted, it is ignored


def test_a_misspelt_key_is_named_unknown_with_the_setting_it_resembles(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", 'modle = "gpt"\n')

    with pytest.raises(ConfigError, match=r"modle: not a setting; did you mean 'model'\?"):
        load_settings(workspace)


def test_a_misspelt_compaction_key_resembles_a_compaction_setting(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", '[compaction]\nstrategie = "seed"\n')

    with pytest.raises(ConfigError, match=r"compaction\.strategie: .*did you mean 'strategy'\?"):
        load_settings(workspace)


def test_toml_that_does_not_parse_names_the_file(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", "model = \n")

    with pytest.raises(ConfigError, match=r"config\.toml"):
        load_settings(workspace)


def test_rules_from_the_user_and_the_project_add_up(workspace: Path) -> None:
    rule = '[[permissions.rules]]\ntool = "bash"\npattern = "{}"\nbehavior = "deny"\n'
    write(user_config_path(), rule.format("^rm "))
    write(workspace / ".agent_tutorial" / "config.toml", rule.format("^curl "))

    patterns = [r.pattern for r in load_settings(workspace).permissions.rules]

    assert patterns == ["^rm ", "^curl "]


def test_without_a_compaction_table_the_seed_numbers_apply(workspace: Path) -> None:
    assert load_settings(workspace).compaction == CompactionSettings()
    assert CompactionSettings().proactive_threshold_bytes == 50_000


def test_a_compaction_table_builds_the_compaction_settings(workspace: Path) -> None:
    write(
        workspace / ".agent_tutorial" / "config.toml",
        "[compaction]\nsnip_max_groups = 20\nkeep_recent_tool_groups = 5\n",
    )

    settings = load_settings(workspace).compaction

    assert settings == CompactionSettings(snip_max_groups=20, keep_recent_tool_groups=5)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("bogus = 1", r"compaction\.bogus"),
        ("snip_max_groups = 2", "snip max_groups must be at least 3"),
        ('strategy = "fastest"', "compaction.strategy"),
        ('strategy = "fastest"', "must be one of 'seed' or 'cache-aware' \\(got 'fastest'\\)"),
    ],
)
def test_an_invalid_compaction_table_is_a_readable_config_error(
    workspace: Path, table: str, message: str
) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", f"[compaction]\n{table}\n")

    with pytest.raises(ConfigError, match=message):
        load_settings(workspace)


TEMPLATE = Path(__file__).parent.parent / ".agent_tutorial.example" / "config.toml"


def _template_uncommented() -> str:
    """The template with each commented `key = value` and `[table]` line switched on, in
    file order; a key offered twice in one table (the alternative base URLs) only once."""
    lines: list[str] = []
    seen: set[str] = set()
    for line in TEMPLATE.read_text().splitlines():
        header = re.fullmatch(r"# (\[\[?[\w.]+\]\]?)\s*", line)
        setting = re.fullmatch(r"# ([a-z_]+) = (.*?)(\s+#.*)?", line)
        if header:
            seen = set()
            lines.append(header.group(1))
        elif setting and setting.group(1) not in seen:
            seen.add(setting.group(1))
            lines.append(f"{setting.group(1)} = {setting.group(2)}")
    return "\n".join(lines) + "\n"


def test_the_config_template_uncommented_is_a_valid_config(workspace: Path) -> None:
    write(workspace / ".agent_tutorial" / "config.toml", _template_uncommented())

    settings = load_settings(workspace, trusted=True)

    assert settings.shell_environment.include == ("GITHUB_TOKEN",)
    assert settings.compaction == CompactionSettings()


def test_the_config_template_names_every_setting() -> None:
    text = TEMPLATE.read_text()
    names = [*Settings.model_fields, *(f.name for f in fields(CompactionSettings))]
    missing = [name for name in names if name != "api_key" and name not in text]

    assert missing == []
