"""Settings precedence: flags > environment > .agent_tutorial/.env > project TOML > user TOML."""

from __future__ import annotations

import errno
import hashlib
import os
import re
from dataclasses import fields
from pathlib import Path

import pytest

from agent_tutorial.config import (
    ConfigError,
    Settings,
    key_from_project_dotenv,
    load_settings,
    missing_settings,
    read_project_settings,
    refuse_unusable_state_dir,
    unread_dotenv_lines,
    user_config_path,
)
from agent_tutorial.core.loop import DEFAULT_MAX_TURNS
from agent_tutorial.core.mcp_servers import McpServerConfig
from agent_tutorial.features.compaction import CompactionSettings
from agent_tutorial.mcp_config import McpConfigError


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


@pytest.mark.parametrize(
    ("line", "model"), [("AGENT_TUTORIAL_MODEL=", "from-toml"), ("AGENT_TUTORIAL_MODEL=m", "m")]
)
def test_an_empty_line_in_the_dotenv_file_leaves_the_setting_to_the_files_below(
    workspace: Path, line: str, model: str
) -> None:
    """As an empty variable in the environment does (`env_ignore_empty`)."""
    write(workspace / ".agent_tutorial" / "config.toml", 'model = "from-toml"\n')
    write(workspace / ".agent_tutorial" / ".env", line + "\n")

    assert load_settings(workspace).model == model


def test_the_dotenv_lines_keep_every_variable_as_parsed(workspace: Path) -> None:
    """What the redactor masks and `api_key_env` finds: settings or not, quotes and
    `export` handled as the settings read them, from the one read of the file."""
    write(workspace / ".agent_tutorial" / ".env", "export SERVICE_TOKEN='quoted-1'\nPLAIN=1\n")

    lines = read_project_settings(workspace).dotenv_lines

    assert lines == {"SERVICE_TOKEN": "quoted-1", "PLAIN": "1"}


def test_without_a_dotenv_file_there_are_no_dotenv_lines(workspace: Path) -> None:
    assert read_project_settings(workspace).dotenv_lines == {}


def test_a_dotenv_file_that_is_not_utf8_is_a_configuration_error(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    (state / ".env").write_bytes(b"SERVICE_TOKEN=caf\xe9\n")

    with pytest.raises(ConfigError, match=r"\.env: it is not UTF-8 text"):
        read_project_settings(workspace)


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


def test_a_bad_key_beside_rules_that_add_up_is_still_reported(workspace: Path) -> None:
    rule = '[[permissions.rules]]\ntool = "bash"\npattern = "{}"\nbehavior = "deny"\n'
    write(user_config_path(), rule.format("^rm "))
    write(
        workspace / ".agent_tutorial" / "config.toml",
        "[permissions]\nbogus = 1\n" + rule.format("^curl "),
    )

    with pytest.raises(ConfigError, match=r"permissions\.bogus"):
        load_settings(workspace)


def hook(event: str, command: str) -> str:
    return f'[[hooks.{event}]]\ncommand = "{command}"\n'


def test_hooks_from_the_user_and_a_trusted_project_add_up_event_by_event(
    workspace: Path,
) -> None:
    write(user_config_path(), hook("PreToolUse", "user-guard") + hook("Stop", "user-stop"))
    write(
        workspace / ".agent_tutorial" / "config.toml",
        hook("PreToolUse", "project-check") + hook("UserPromptSubmit", "project-prompt"),
    )

    hooks = load_settings(workspace, trusted=True).hooks.root

    commands = {event: [h.command for h in event_hooks] for event, event_hooks in hooks.items()}
    assert commands == {
        "PreToolUse": ["user-guard", "project-check"],
        "Stop": ["user-stop"],
        "UserPromptSubmit": ["project-prompt"],
    }


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


# --- where the user's own settings are, and what is refused before anything is read ---------


def test_the_users_settings_are_under_xdg_config_home_when_it_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))

    assert user_config_path() == tmp_path / "xdg" / "agent-tutorial" / "config.toml"


@pytest.mark.parametrize("xdg", [None, ""])
def test_the_users_settings_are_under_the_homes_config_folder_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, xdg: str | None
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if xdg is None:
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CONFIG_HOME", xdg)

    assert user_config_path() == tmp_path / ".config" / "agent-tutorial" / "config.toml"


def test_a_state_folder_that_is_a_symlink_is_refused(workspace: Path, tmp_path: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.symlink_to(tmp_path)

    with pytest.raises(ConfigError) as refused:
        refuse_unusable_state_dir(state)

    assert str(refused.value) == (
        f"{state} is a symlink; settings, hooks and skills are read from a real directory only"
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root")
def test_a_state_folder_of_another_user_is_refused(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    state.mkdir()
    os.chown(state, 65534, 65534)

    with pytest.raises(ConfigError) as refused:
        refuse_unusable_state_dir(state)

    assert str(refused.value) == (
        f"{state} belongs to another user (uid 65534); settings, keys and sessions are used "
        "only from your own. Remove it, or run from another directory."
    )


def test_a_missing_state_folder_or_the_users_own_is_used(workspace: Path) -> None:
    state = workspace / ".agent_tutorial"
    refuse_unusable_state_dir(state)
    state.mkdir()
    refuse_unusable_state_dir(state)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://h:9x/v1", "is not a valid URL: Port could not be cast to integer value as '9x'"),
        (
            "ftp://h/v1",
            "must start with http:// or https:// and name a host, "
            + "such as http://localhost:8080/v1",
        ),
        (
            "http:///v1",
            "must start with http:// or https:// and name a host, "
            + "such as http://localhost:8080/v1",
        ),
    ],
)
def test_a_base_url_the_client_cannot_use_is_refused_naming_where_it_came_from(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, url: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as from_flag:
        load_settings(workspace, {"base_url": url})
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    with pytest.raises(ConfigError) as from_environment:
        load_settings(workspace)

    assert str(from_flag.value) == f"--base-url {url!r} {problem}"
    assert str(from_environment.value) == f"OPENAI_BASE_URL {url!r} {problem}"


@pytest.mark.parametrize("url", ["http://localhost:8080/v1", "https://api.example.com/v1"])
def test_an_http_or_https_base_url_naming_a_host_is_used(workspace: Path, url: str) -> None:
    assert load_settings(workspace, {"base_url": url}).base_url == url


# --- the API key: which variable holds it, and whether it came from the project's .env -----

PROJECT_KEY = "sk-the-projects-own-key-123"


def project_with_key(workspace: Path, dotenv: str, toml: str = "") -> tuple[Settings, str | None]:
    """The settings of a trusted project with these files, and the variable its key came
    from when the project's `.env` gave it."""
    write(workspace / ".agent_tutorial" / ".env", dotenv)
    write(workspace / ".agent_tutorial" / "config.toml", toml)
    project = read_project_settings(workspace)
    settings = load_settings(workspace, project=project, trusted=True)
    return settings, key_from_project_dotenv(settings, project)


def test_a_key_only_the_projects_env_holds_is_said_to_come_from_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    settings, source = project_with_key(workspace, f"OPENAI_API_KEY={PROJECT_KEY}\n")

    assert settings.api_key is not None and settings.api_key.get_secret_value() == PROJECT_KEY
    assert source == "OPENAI_API_KEY"


@pytest.mark.parametrize("environment_key", [PROJECT_KEY, "sk-the-users-own-key-456"])
def test_a_key_the_environment_holds_does_not_come_from_the_projects_env(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, environment_key: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", environment_key)

    _, source = project_with_key(workspace, f"OPENAI_API_KEY={PROJECT_KEY}\n")

    assert source is None


def test_a_key_in_the_variable_api_key_env_names_is_used_and_said_to_come_from_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TEAM_LLM_KEY", raising=False)

    settings, source = project_with_key(
        workspace, f"TEAM_LLM_KEY={PROJECT_KEY}\n", 'api_key_env = "TEAM_LLM_KEY"\n'
    )

    assert settings.api_key is not None and settings.api_key.get_secret_value() == PROJECT_KEY
    assert source == "TEAM_LLM_KEY"


def test_a_key_in_the_environment_under_api_key_env_is_used(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("TEAM_LLM_KEY", "sk-from-the-environment-789")

    settings, source = project_with_key(workspace, "", 'api_key_env = "TEAM_LLM_KEY"\n')

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-from-the-environment-789"
    assert source is None


def test_openai_api_key_wins_over_the_variable_api_key_env_names(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-own-key-456")
    monkeypatch.setenv("TEAM_LLM_KEY", "sk-from-the-environment-789")

    settings, _ = project_with_key(workspace, "", 'api_key_env = "TEAM_LLM_KEY"\n')

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-the-users-own-key-456"


@pytest.mark.parametrize(
    "dotenv",
    [
        "OPENAI_API_KEY=sk-another-key-of-the-project\n",  # a key variable, another value
        "NOT_THE_KEY_VARIABLE=sk-given-as-a-flag-000\n",  # the same value, another variable
    ],
)
def test_a_key_no_key_variable_of_the_projects_env_holds_does_not_come_from_it(
    workspace: Path, dotenv: str
) -> None:
    write(workspace / ".agent_tutorial" / ".env", dotenv)
    project = read_project_settings(workspace)
    flag = {"api_key": "sk-given-as-a-flag-000"}

    settings = load_settings(workspace, flag, project=project, trusted=True)

    assert settings.api_key is not None
    assert settings.api_key.get_secret_value() == "sk-given-as-a-flag-000"
    assert key_from_project_dotenv(settings, project) is None


def test_no_key_or_the_demo_model_has_no_key_source(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    _, without_key = project_with_key(workspace, "")
    _, demo = project_with_key(workspace, f"OPENAI_API_KEY={PROJECT_KEY}\n", 'model = "demo"\n')

    assert (without_key, demo) == (None, None)


# --- the project's files as read, and what is wrong with them -----------------------------


def state_file(workspace: Path, name: str, content: str | bytes) -> Path:
    path = workspace / ".agent_tutorial" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def test_a_setting_given_twice_in_config_toml_names_the_file_and_both_spellings(
    workspace: Path,
) -> None:
    config = state_file(workspace, "config.toml", "max_turns = 3\nMAX_TURNS = 4\n")

    with pytest.raises(ConfigError) as refused:
        read_project_settings(workspace)

    assert str(refused.value) == (
        f"invalid configuration in {config}: max_turns is set twice ('max_turns' and 'MAX_TURNS')"
    )


def test_a_powerful_env_line_is_named_by_its_variable(workspace: Path) -> None:
    state_file(
        workspace,
        ".env",
        "OPENAI_BASE_URL=http://localhost:8080/v1\n"
        """AGENT_TUTORIAL_PERMISSIONS='{"rules": [{"tool": "*", "behavior": "allow"}]}'\n"""
        """AGENT_TUTORIAL_HOOKS='{"Stop": [{"command": "x"}]}'\n""",
    )

    powerful = read_project_settings(workspace).powerful

    assert sorted(powerful) == [
        "AGENT_TUTORIAL_HOOKS",
        "AGENT_TUTORIAL_PERMISSIONS",
        "OPENAI_BASE_URL",
    ]
    assert powerful["AGENT_TUTORIAL_PERMISSIONS"] == [{"tool": "*", "behavior": "allow"}]


@pytest.mark.parametrize("name", ["config.toml", ".env"])
def test_a_project_file_that_is_not_utf8_is_refused_by_name(workspace: Path, name: str) -> None:
    path = state_file(workspace, name, b'model = "caf\xe9"\n')

    with pytest.raises(ConfigError) as refused:
        read_project_settings(workspace)

    assert str(refused.value) == f"cannot read {path}: it is not UTF-8 text"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (PermissionError(errno.EACCES, "Permission denied"), "Permission denied"),
        (OSError("the disk is gone"), "the disk is gone"),  # no strerror: the error itself
    ],
)
def test_a_dotenv_file_that_cannot_be_read_says_why(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, reason: str
) -> None:
    """Tests may run as root, whom no file mode keeps from reading: `read_dotenv` fails on cue."""

    def unreadable(path: Path) -> None:
        raise error

    monkeypatch.setattr("agent_tutorial.config.read_dotenv", unreadable)

    with pytest.raises(ConfigError) as refused:
        read_project_settings(workspace)

    assert str(refused.value) == f"cannot read {workspace / '.agent_tutorial' / '.env'}: {reason}"


def test_a_table_in_the_env_file_that_is_not_json_names_the_file(workspace: Path) -> None:
    path = state_file(workspace, ".env", "AGENT_TUTORIAL_HOOKS=not-json\n")

    with pytest.raises(ConfigError) as refused:
        read_project_settings(workspace)

    assert str(refused.value).startswith(f"invalid configuration in {path}: ")
    assert '"hooks"' in str(refused.value)


def test_a_table_in_the_environment_that_is_not_json_is_a_configuration_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_TUTORIAL_HOOKS", "not-json")

    with pytest.raises(ConfigError) as refused:
        load_settings(workspace)

    assert str(refused.value).startswith("invalid configuration: ")
    assert '"hooks"' in str(refused.value)


def test_an_api_key_in_toml_is_refused_with_where_it_belongs(workspace: Path) -> None:
    config = state_file(workspace, "config.toml", 'api_key = "sk-oops"\n')

    with pytest.raises(ConfigError) as refused:
        load_settings(workspace)

    assert str(refused.value) == (
        f"{config} holds an api_key ('api_key'); keys belong in the environment or "
        ".agent_tutorial/.env. "
        "Name the variable with api_key_env instead."
    )


def test_a_permissions_setting_that_is_not_a_table_is_a_configuration_error(
    workspace: Path,
) -> None:
    state_file(workspace, "config.toml", "permissions = 3\n")

    with pytest.raises(ConfigError, match="permissions"):
        load_settings(workspace, trusted=True)


@pytest.mark.parametrize(
    "variable", ["AGENT_TUTORIAL_CONTEXT_WINDOW", "AGENT_TUTORIAL_CONTEXT_WINDOW_TOKENS"]
)
def test_a_value_refused_from_the_environment_is_named_by_its_variable(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """The setting's own variable, or AGENT_TUTORIAL_<FIELD>, which pydantic-settings reads
    as well where the field has another name: the message names the one the value was in."""
    monkeypatch.setenv(variable, "5")

    with pytest.raises(ConfigError) as refused:
        load_settings(workspace)

    assert str(refused.value) == (
        f"invalid configuration in the environment: {variable}: must be at least 256 (got '5')"
    )


def test_a_key_in_openai_api_key_is_named_even_when_api_key_env_names_another(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("TEAM_LLM_KEY", raising=False)

    _, source = project_with_key(
        workspace, f"OPENAI_API_KEY={PROJECT_KEY}\n", 'api_key_env = "TEAM_LLM_KEY"\n'
    )

    assert source == "OPENAI_API_KEY"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("zzzzqqq = 1", "zzzzqqq: not a setting"),
        ("max_turn = 3", "max_turn: not a setting; did you mean 'max_turns'?"),
    ],
)
def test_an_unknown_setting_is_named_with_the_closest_known_one_if_any(
    workspace: Path, line: str, problem: str
) -> None:
    config = state_file(workspace, "config.toml", line + "\n")

    with pytest.raises(ConfigError) as refused:
        load_settings(workspace)

    assert str(refused.value) == f"invalid configuration in {config}: {problem}"


# --- MCP servers: the user's checked where they are read, the project's files hashed -------


def test_a_server_in_the_users_config_is_read(workspace: Path) -> None:
    write(user_config_path(), '[mcp_servers.time]\ncommand = "mcp-server-time"\n')

    servers = load_settings(workspace).mcp_servers

    assert servers == {"time": McpServerConfig.model_validate({"command": "mcp-server-time"})}


@pytest.mark.parametrize(
    ("toml", "problem"),
    [
        ("mcp_servers = 3", "mcp_servers must be a table"),
        (
            "[mcp_servers.time]\nargs = ['a']",
            "mcp_servers.time: Value error, give either command (a stdio server) "
            "or url (an HTTP server)",
        ),
    ],
)
def test_a_bad_server_in_the_users_config_is_refused_naming_that_file(
    workspace: Path, toml: str, problem: str
) -> None:
    write(user_config_path(), toml + "\n")

    with pytest.raises(McpConfigError) as refused:
        load_settings(workspace)

    assert str(refused.value) == f"invalid configuration in {user_config_path()}: {problem}"


def server_running(workspace: Path, script: str) -> None:
    """A project whose one MCP server runs `python3 SCRIPT` (from the project root)."""
    table = f'[mcp_servers.tools]\ncommand = "python3"\nargs = ["{script}"]\n'
    state_file(workspace, "config.toml", table)


def test_the_file_a_projects_server_runs_is_among_the_powerful_settings(
    workspace: Path,
) -> None:
    script = workspace / "tools" / "server.py"
    write(script, "print('serving')\n")
    server_running(workspace, "tools/server.py")

    powerful = read_project_settings(workspace).powerful

    assert powerful["mcp server file tools/server.py"] == (
        hashlib.sha256(script.read_bytes()).hexdigest()
    )


def test_trust_follows_the_file_a_projects_server_runs_and_no_other(workspace: Path) -> None:
    server, other = workspace / "server.py", workspace / "notes.py"
    write(server, "version = 1\n")
    write(other, "version = 1\n")
    server_running(workspace, "server.py")
    trusted = read_project_settings(workspace).digest

    other.write_text("version = 2\n")
    other_changed = read_project_settings(workspace).digest
    server.write_text("version = 2\n")
    server_changed = read_project_settings(workspace).digest

    assert other_changed == trusted
    assert server_changed != trusted


# --- a project's .env: no MCP servers, and lines that name a setting bare -----------------

ENV_SERVERS = (
    """Agent_Tutorial_Mcp_Servers='{"tools": {"command": "python3", "args": ["s.py"]}}'\n"""
)
"""A project's `.env` line setting a server, spelt as a user might (any case is read)."""


def test_a_trusted_projects_env_may_not_set_mcp_servers(workspace: Path) -> None:
    dotenv = state_file(workspace, ".env", ENV_SERVERS)

    with pytest.raises(ConfigError) as refused:
        load_settings(workspace, trusted=True)

    assert str(refused.value) == (
        f"invalid configuration in {dotenv}: Agent_Tutorial_Mcp_Servers: a project's .env may "
        "not set MCP servers; MCP servers belong in .agent_tutorial/config.toml "
        "([mcp_servers.NAME]) or .mcp.json"
    )


def test_an_untrusted_projects_env_servers_are_ignored_as_a_powerful_setting(
    workspace: Path,
) -> None:
    state_file(workspace, ".env", ENV_SERVERS)

    servers = load_settings(workspace, trusted=False).mcp_servers

    assert servers == {}
    assert list(read_project_settings(workspace).powerful) == ["AGENT_TUTORIAL_MCP_SERVERS"]


def test_a_trusted_projects_config_toml_still_sets_servers_started_in_its_root(
    workspace: Path,
) -> None:
    state_file(workspace, "config.toml", '[mcp_servers.tools]\ncommand = "python3"\n')

    servers = load_settings(workspace, trusted=True).mcp_servers

    assert servers["tools"].command == "python3"
    assert servers["tools"].cwd == str(workspace)


def test_the_users_environment_still_sets_servers_in_a_trusted_project(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_file(workspace, ".env", "AGENT_TUTORIAL_MAX_TURNS=7\n")
    monkeypatch.setenv("AGENT_TUTORIAL_MCP_SERVERS", '{"time": {"command": "mcp-server-time"}}')

    settings = load_settings(workspace, trusted=True)

    assert settings.max_turns == 7
    assert settings.mcp_servers == {
        "time": McpServerConfig.model_validate({"command": "mcp-server-time"})
    }


@pytest.mark.parametrize(
    ("line", "advice"),
    [
        ("max_turns=4", "max_turns is not read; write AGENT_TUTORIAL_MAX_TURNS to set max_turns"),
        ("MAX_TURNS=4", "MAX_TURNS is not read; write AGENT_TUTORIAL_MAX_TURNS to set max_turns"),
        (
            "Base_Url=http://localhost:8080/v1",
            "Base_Url is not read; write OPENAI_BASE_URL to set base_url",
        ),
        (
            "mcp_servers={}",
            "mcp_servers is not read; MCP servers belong in .agent_tutorial/config.toml "
            "([mcp_servers.NAME]) or .mcp.json",
        ),
    ],
)
def test_a_dotenv_line_named_as_a_setting_is_said_to_be_unread(
    workspace: Path, line: str, advice: str
) -> None:
    """pydantic-settings reads a `.env` setting only under its variable: the bare name
    (which the run would silently ignore) gets one warning saying what to write."""
    dotenv = state_file(workspace, ".env", line + "\n")
    project = read_project_settings(workspace)

    warnings = unread_dotenv_lines(project)

    assert warnings == [f"in {dotenv}: {advice}"]
    assert load_settings(workspace, project=project).max_turns == DEFAULT_MAX_TURNS  # not read


def test_a_settings_variable_or_another_tools_is_not_remarked_on(workspace: Path) -> None:
    state_file(
        workspace,
        ".env",
        "AGENT_TUTORIAL_MAX_TURNS=4\nOPENAI_BASE_URL=http://localhost:8080/v1\n"
        "DEEPSEEK_API_KEY=sk-other\nmax_turn=4\n",
    )

    assert unread_dotenv_lines(read_project_settings(workspace)) == []
