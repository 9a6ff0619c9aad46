"""Settings, from five places in a fixed order of precedence:

    command-line flags > environment > .agent_tutorial/.env > .agent_tutorial/config.toml
    > the user's config (~/.config/agent-tutorial/config.toml)

Permission rules and hooks are the exception: those of both config files add up, so a
project cannot drop the user's own. `.agent_tutorial/.env` never overrides a variable the
real environment already has. API keys live only in the environment (or `.env`);
`config.toml` names the variable that holds one.

The project's two files (`ProjectSettings`, of the project root) are read once and split:
its powerful settings (`POWERFUL_SETTINGS`) apply only in a trusted folder (`folder_trust`),
the rest always. The flags, the environment and the user's config are always the user's.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)
from pydantic_settings.sources.utils import parse_env_vars

from agent_tutorial.adapters.chat_wire import WireOptions
from agent_tutorial.adapters.hook_scripts import SCRIPT_SETTING as SCRIPT_SETTING
from agent_tutorial.adapters.hook_scripts import trusted_script_settings
from agent_tutorial.adapters.shell import OUTPUT_DISK_CAP_BYTES
from agent_tutorial.adapters.text_calls import ToolCallMode
from agent_tutorial.config_origin import SettingSources
from agent_tutorial.config_wording import config_value_problem, describe_config_error
from agent_tutorial.core.errors import EXIT_USAGE, AgentTutorialError
from agent_tutorial.core.events import WAITING_INTERVAL_S
from agent_tutorial.core.hooks import HooksConfig
from agent_tutorial.core.loop import DEFAULT_MAX_TURNS
from agent_tutorial.core.mcp_servers import McpServerConfig
from agent_tutorial.core.model import MAX_CONTEXT_WINDOW_TOKENS, MIN_CONTEXT_WINDOW_TOKENS
from agent_tutorial.core.paths import STATE_DIR as STATE_DIR
from agent_tutorial.core.permissions import PermissionMode, PermissionRule
from agent_tutorial.core.sandbox import SandboxMode
from agent_tutorial.core.tools import MAX_TOOL_ARGUMENT_BYTES
from agent_tutorial.dotenv_file import read_dotenv
from agent_tutorial.features.builtin_tools import GREP_TIME_BUDGET_S
from agent_tutorial.features.compaction.settings import CompactionSettings
from agent_tutorial.features.redaction import mask_url_passwords
from agent_tutorial.mcp_config import (
    SERVERS_SETTING,
    check_mcp_servers,
    each_server_apart,
    trusted_server_files,
    with_mcp_json,
)

DEMO_MODEL = "demo"
_API_KEY = "api_key"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

# Upper bounds of the numeric settings: far beyond any real use, low enough that no value
# overflows a timer or an index (`inf`, `nan` and 40-digit numbers are configuration errors).
MAX_TIMEOUT_S = 86_400.0
"""A day: the longest any one wait (a request, a hook, a grep) may be set to."""
MAX_TOKENS = MAX_CONTEXT_WINDOW_TOKENS
"""Ten million tokens: the largest context windows today."""
MAX_TEMPERATURE = 2.0
"""The highest sampling temperature the OpenAI API accepts."""
MiB = 1024 * 1024
CHECKPOINT_MAX_FILE_BYTES = 10 * MiB
"""Files above this size are left out of checkpoints unless `checkpoint_max_file_bytes`
says otherwise."""
_WIRE = WireOptions()
"""The adapter's defaults, which the wire settings below document and start from."""

SANDBOX_SETTINGS = ("sandbox", "sandbox_network")
"""The sandbox's settings: a project could loosen it (`off`, the network on). It may not
tighten it either untrusted: the simplest rule that is right is to ignore them all."""
ALLOW_RULES = "permissions.rules"
NARROWING_BEHAVIOURS = ("deny", "ask")
POWERFUL_SETTINGS = (
    "hooks",
    "permission_mode",
    ALLOW_RULES,
    "shell_environment",
    "base_url",
    "api_key_env",
    "redact_secrets",
    "mcp_servers",
    *SANDBOX_SETTINGS,
)
"""Project settings that apply only in a trusted folder: they run commands (hooks, MCP
servers), let calls run unasked (the mode, allow rules, the sandbox), let secrets into bash,
or choose where the API key goes, which key it is and what is masked. Of `permissions.rules`
only the allow rules: deny and ask rules narrow, and apply always."""
SERVERS_VARIABLE = f"AGENT_TUTORIAL_{SERVERS_SETTING.upper()}"
SERVERS_BELONG = (
    "MCP servers belong in .agent_tutorial/config.toml ([mcp_servers.NAME]) or .mcp.json"
)
"""Where a project's MCP servers may be set: there each is trusted apart, the script it runs
is hashed and its `cwd` is the project root; a `.env` line would have none of that."""


class ConfigError(AgentTutorialError):
    """The configuration is missing something or says something invalid (exit code 2)."""

    exit_code = EXIT_USAGE


class PermissionsConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: tuple[PermissionRule, ...] = ()
    """User rules, checked against every tool call (deny > ask > allow)."""


class ShellEnvironmentConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    include: tuple[str, ...] = ()
    """Secret-looking variables (names with KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL) that
    bash may still see, by exact name; all others are left out of its environment."""


class Settings(BaseSettings):
    """Everything the agent needs to start; see `.agent_tutorial.example/config.toml`."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        case_sensitive=False,
        env_prefix="AGENT_TUTORIAL_",
        env_ignore_empty=True,
        loc_by_alias=False,  # an error names the setting, not the variable it may come from
    )

    base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL"))
    """The OpenAI-compatible endpoint, e.g. https://api.openai.com/v1."""

    api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    """The key for that endpoint; only ever read from the environment or `.env`."""

    api_key_env: str = "OPENAI_API_KEY"
    """The environment variable that holds the key (set it in config.toml, not the key)."""

    model: str | None = Field(
        default=None,
        validation_alias=AliasChoices("AGENT_TUTORIAL_MODEL", "OPENAI_MODEL"),
    )
    """The model name the endpoint knows, or `demo` for the offline scripted demo."""

    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=1_000_000)
    """Model calls allowed for one prompt before the run stops."""

    max_retries: int = Field(default=2, ge=0, le=100)
    """Retries the SDK makes for 408/409/429/5xx and connection errors, with backoff."""

    request_timeout_s: float = Field(default=600.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    """Seconds one model request may take, from sending it to the last byte of its reply,
    keepalives or not; one that times out is not sent again."""

    waiting_event_interval_s: float = Field(
        default=WAITING_INTERVAL_S, ge=0.1, le=MAX_TIMEOUT_S, allow_inf_nan=False
    )
    """Seconds between stream-json's `system/waiting` lines while the model is awaited."""

    context_window_tokens: int | None = Field(
        default=None,
        ge=MIN_CONTEXT_WINDOW_TOKENS,
        le=MAX_CONTEXT_WINDOW_TOKENS,
        validation_alias=AliasChoices("AGENT_TUTORIAL_CONTEXT_WINDOW"),
    )
    """The model's context window in tokens; unset, chapter 8 asks the server and otherwise
    keeps to its byte thresholds. The one place the window is set: a `context_window_tokens`
    under `[compaction]` is read as this setting (see `_one_context_window`)."""

    max_stdin_bytes: int = Field(default=MiB, ge=1, le=1024 * MiB)
    """The most piped standard input `run` accepts as (part of) the prompt; more is refused."""

    project_instructions_max_bytes: int = Field(default=32 * 1024, ge=1, le=4 * MiB)
    """How much of AGENTS.md (or CLAUDE.md) goes into the project context (chapter 7 on);
    the rest is cut, with a one-line warning."""

    max_output_tokens: int = Field(default=_WIRE.max_output_tokens, ge=1, le=MAX_TOKENS)
    """The most tokens one reply may have, sent with every request (as `max_tokens`, or
    `max_completion_tokens` once a server asks for that); a runaway reply stops there."""

    send_tool_choice: bool = _WIRE.send_tool_choice
    """Send `tool_choice: "auto"` with the tools; turn off for a server that rejects it."""

    stream: bool = _WIRE.stream
    """Stream replies; turn off for a server that cannot stream (text then appears at once)."""

    merge_reminders: bool = _WIRE.merge_reminders
    """Join each `<system-reminder>` note to the user turn next to it (and a prompt whose
    request failed to the next prompt), for chat templates that demand strict
    user/assistant alternation."""

    temperature: float | None = Field(
        default=_WIRE.temperature, ge=0, le=MAX_TEMPERATURE, allow_inf_nan=False
    )
    """Sampling temperature sent with every request; unset, the server's default is used
    (0 makes a real model's runs repeatable)."""

    tool_calls: ToolCallMode = "auto"
    """How tool calls travel: `auto` sends the tools natively and also runs calls a model
    writes as text (a JSON object, fenced, in `<tool_call>` tags, `functions.NAME:`);
    `native` never reads calls from text; `text` sends no tools at all and describes them,
    and the one call format, in the system prompt (for servers that reject or ignore
    `tools`). See chapter 2, "Tool calling is text underneath"."""

    permission_mode: PermissionMode = "ask"
    """ask, accept-edits or auto; see chapter 3."""

    sandbox: SandboxMode | None = None
    """What bash commands may touch (chapter 2+), enforced by the operating system:
    `workspace-write` (write only in the workspace and a private `$TMPDIR`), `read-only`, or
    `off`. Unset: `workspace-write` where this system has the sandbox, else `off`, said once
    per session. Set to a confining mode on a system without it: a configuration error."""

    sandbox_network: bool = False
    """Let sandboxed commands use the network (TCP and UDP); Unix sockets stay closed."""

    permissions: PermissionsConfig = PermissionsConfig()
    """`[[permissions.rules]]` tables."""

    hooks: HooksConfig = HooksConfig()
    """`[[hooks.<Event>]]` tables with matcher, command and timeout_s."""

    mcp_servers: dict[str, McpServerConfig] = {}
    """`[mcp_servers.NAME]` tables (and a project's `.mcp.json`): chapter 9's MCP servers."""

    compaction: CompactionSettings = CompactionSettings()
    """`[compaction]`: chapter 8's thresholds and strategy; see `CompactionSettings`."""

    grep_time_budget_s: float = Field(
        default=GREP_TIME_BUDGET_S, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False
    )
    """Seconds one grep call may search; then it returns `Error [timeout]` with the matches
    found so far (a regex that backtracks badly cannot hang the agent)."""

    redact_secrets: bool = True
    """Mask well-known token shapes (sk-…, ghp_…, AKIA…, private keys, JWTs) in tool results;
    known secret values (the API key, secret-looking variables) are masked regardless."""

    shell_environment: ShellEnvironmentConfig = ShellEnvironmentConfig()
    """`[shell_environment]`: what bash's environment keeps; see chapter 3."""

    output_disk_cap_bytes: int = Field(default=OUTPUT_DISK_CAP_BYTES, ge=0, le=64 * 1024 * MiB)
    """Bytes of one command's whole output kept on disk for chapter 8's artifact (0: none)."""

    checkpoint_max_file_bytes: int = Field(
        default=CHECKPOINT_MAX_FILE_BYTES, ge=0, le=64 * 1024 * MiB
    )
    """A file larger than this is left out of checkpoints (one notice says which), so undo
    leaves it as it is."""

    max_tool_argument_bytes: int = Field(default=MAX_TOOL_ARGUMENT_BYTES, ge=1024, le=64 * MiB)
    """A tool call with larger arguments is refused, and the arguments are shortened in the
    history, so they are not sent again with every later request."""

    @model_validator(mode="before")
    @classmethod
    def _one_context_window(cls, data: Any) -> Any:
        """Move a window given under `[compaction]` to the top level, where the flag, the
        environment and the server's answer put it, so the output cap and the budgets read
        one value. One given at the top level wins."""
        if not isinstance(data, dict):
            return data
        table = data.get("compaction")
        if isinstance(table, CompactionSettings):  # given whole, as code may
            window = table.context_window_tokens
            table = replace(table, context_window_tokens=None)
        elif isinstance(table, dict):
            table = dict(table)
            window = table.pop("context_window_tokens", None)
        else:
            return data
        moved = {**data, "compaction": table}
        if window is not None and not any(key.lower() in _WINDOW_KEYS for key in data):
            moved["context_window_tokens"] = window
        return moved

    @property
    def is_demo(self) -> bool:
        return self.model == DEMO_MODEL

    @property
    def endpoint_host(self) -> str:
        return urlsplit(self.base_url or "").hostname or ""


_WINDOW_KEYS = frozenset({"context_window_tokens", "agent_tutorial_context_window"})
"""The top-level window's name and its environment variable's, as sources hand them over."""
_ALIASES = {
    choice.lower(): name
    for name, field in Settings.model_fields.items()
    if isinstance(field.validation_alias, AliasChoices)
    for choice in field.validation_alias.choices
    if isinstance(choice, str)
} | {f"agent_tutorial_{name}": name for name in Settings.model_fields}
"""Every other name a setting is given by (`OPENAI_BASE_URL`, `AGENT_TUTORIAL_HOOKS`)."""


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agent-tutorial" / "config.toml"


def load_settings(
    root: Path,
    flags: Mapping[str, Any] | None = None,
    *,
    project: ProjectSettings | None = None,
    trusted: bool = False,
) -> Settings:
    """Merge every source for the project at `root` (whose `.agent_tutorial/` is read; see
    `project.find_project`, or pass it as read in `project`); its powerful settings apply
    only when `trusted`. Raise `ConfigError` with a readable message."""
    project = project or read_project_settings(root)
    project_toml, project_dotenv = project.layers(trusted=trusted)
    _refuse_servers_in_dotenv(project_dotenv, project)
    given = {key: value for key, value in (flags or {}).items() if value is not None}
    user_toml = _read_toml(user_config_path())
    check_mcp_servers(user_toml.get("mcp_servers"), user_config_path())
    toml_layers = _with_lists_added_up([user_toml, dict(project_toml)])

    class WorkspaceSettings(Settings):
        """Settings with this workspace's files as sources, in order of precedence."""

        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (
                init_settings,
                EnvSettingsSource(settings_cls),
                InitSettingsSource(settings_cls, dict(project_dotenv)),
                *(InitSettingsSource(settings_cls, layer) for layer in reversed(toml_layers)),
            )

    try:
        settings: Settings = WorkspaceSettings(**given)
    except ValidationError as error:
        sources = SettingSources(
            _setting_of,
            _environment_names,
            given,
            project_dotenv,
            project.dotenv_lines,
            project.dotenv_path,
            [(root / STATE_DIR / "config.toml", project_toml), (user_config_path(), user_toml)],
        )
        problems = describe_config_error(error, sources.origin, _describe_config_problem)
        raise ConfigError(problems) from None
    except SettingsError as error:  # a table given in the environment that is not JSON
        raise ConfigError(f"invalid configuration: {error}") from None
    if not settings.is_demo:
        _check_base_url(settings.base_url, "--base-url" if "base_url" in given else None)
    return _with_named_key(settings, project.dotenv_lines)


def _refuse_servers_in_dotenv(project_dotenv: Mapping[str, Any], project: ProjectSettings) -> None:
    """A project's `.env` may not set MCP servers (`SERVERS_BELONG`): trusting it would
    trust a script that could then change unasked. Untrusted, the line is only ignored, as
    every powerful setting is (it is not among the `.env` settings that apply)."""
    if SERVERS_SETTING not in project_dotenv:
        return
    line = next(name for name in project.dotenv_lines if name.upper() == SERVERS_VARIABLE)
    raise ConfigError(
        f"invalid configuration in {project.dotenv_path}: {line}: a project's .env may not "
        f"set MCP servers; {SERVERS_BELONG}"
    )


def unread_dotenv_lines(project: ProjectSettings) -> list[str]:
    """A warning for each line of the project's `.env` named as a setting is (`max_turns=4`,
    any case): pydantic-settings reads a setting there only under its variable
    (`AGENT_TUTORIAL_MAX_TURNS`), so such a line would silently do nothing. Every other
    variable may be another tool's, and is left alone."""
    return [
        f"in {project.dotenv_path}: {name} is not read; {_how_to_set(name.lower())}"
        for name in project.dotenv_lines
        if name.lower() in Settings.model_fields
    ]


def _how_to_set(setting: str) -> str:
    if setting == SERVERS_SETTING:
        return SERVERS_BELONG
    return f"write {_environment_names(setting)[0]} to set {setting}"


@dataclass(frozen=True)
class ProjectSettings:
    """The project's `config.toml` and `.env`, read once, with the powerful settings set
    apart: the run decides trust by what was read, and loads exactly that."""

    toml: Mapping[str, Any]
    dotenv: Mapping[str, Any]
    """`.env`'s settings (other lines left out), decoded as the settings read them."""
    plain_toml: Mapping[str, Any]
    plain_dotenv: Mapping[str, Any]
    powerful: Mapping[str, Any]
    """Each powerful setting found: a TOML one by its setting name (`hooks`,
    `permissions.rules`: the allow rules), a `.env` line by its variable, and each project
    file a hook command names as `hook script NAME` with its SHA-256."""
    dotenv_path: Path
    dotenv_lines: Mapping[str, str | None]
    """Every variable of `.env` as python-dotenv parsed it, settings or not: the key that
    `api_key_env` names and the secrets the redactor masks come from here, so the file
    is read once (and the key sent is the value masked)."""

    def layers(self, *, trusted: bool) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """(config.toml, .env) as they apply: whole when trusted, else without power."""
        if trusted:
            return self.toml, self.dotenv
        return self.plain_toml, self.plain_dotenv

    @property
    def digest(self) -> str:
        """What trusting the folder trusts: a hash of the powerful settings' values (their
        layout and comments may change), the hook scripts' contents among them."""
        return value_sha256(self.powerful)


def value_sha256(value: Any) -> str:
    """A hash of a setting's value as TOML or `.env` gave it: its JSON with the keys
    sorted, so layout, comments and the order of a table do not count. orjson writes
    nearly every value; what it refuses (an integer beyond 64 bits, which TOML allows, or
    a lone surrogate from an `.env` byte, a type TOML has not) the standard library writes,
    a value of no JSON type as its text, so such a value is hashed too instead of ending
    the run. Only values orjson refuses take that path: a trusted folder's stored hashes
    stay valid."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(value, sort_keys=True, default=str).encode()
    return hashlib.sha256(text).hexdigest()


def read_project_settings(root: Path) -> ProjectSettings:
    """The project's own settings files, split by power; `ConfigError` if unreadable."""
    state_dir = root / STATE_DIR
    refuse_unusable_state_dir(state_dir)
    toml = with_mcp_json(_read_toml(state_dir / "config.toml"), root)
    dotenv_path = state_dir / ".env"
    lines = _read_dotenv_lines(dotenv_path)
    dotenv = _dotenv_settings(lines, dotenv_path)
    plain_toml, powerful_toml = _split_power(toml, _toml_name, state_dir / "config.toml")
    plain_dotenv, powerful_dotenv = _split_power(dotenv, _dotenv_name, dotenv_path)
    powerful = each_server_apart({**powerful_toml, **powerful_dotenv})
    hooks = [value for key, value in powerful.items() if _setting_of(key) == "hooks"]
    powerful |= trusted_script_settings(root, hooks)  # trusting hooks trusts what they run
    powerful |= trusted_server_files(root, toml.get("mcp_servers"))
    return ProjectSettings(
        toml, dotenv, plain_toml, plain_dotenv, powerful, dotenv_path, dotenv_lines=lines
    )


def _read_dotenv_lines(path: Path) -> Mapping[str, str | None]:
    """`.env`'s variables, read once; `ConfigError` if it is there but cannot be read."""
    try:
        return read_dotenv(path)
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read {path}: it is not UTF-8 text") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None


def _dotenv_settings(lines: Mapping[str, str | None], path: Path) -> dict[str, Any]:
    try:
        return _KnownKeysDotEnv(Settings, lines)()
    except SettingsError as error:  # a table on a line that is not JSON
        raise ConfigError(f"invalid configuration in {path}: {error}") from None


def _split_power(
    values: Mapping[str, Any], shown_as: Callable[[str, str], str], source: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(plain, powerful) of one file's settings; `shown_as(key, setting)` names a powerful
    one in messages and in the hash.

    A setting given twice (`hooks` and `HOOKS`, `base_url` and `OPENAI_BASE_URL`) is a
    `ConfigError`: the trust prompt and its hash would show one spelling while the run
    applied the other."""
    plain: dict[str, Any] = {}
    powerful: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for key, value in values.items():
        setting = _setting_of(key)
        if setting in seen:
            raise ConfigError(
                f"invalid configuration in {source}: {setting} is set twice "
                f"({seen[setting]!r} and {key!r})"
            )
        seen[setting] = key
        if setting == "permissions":
            plain[key], allow = _without_allow_rules(value)
            if allow:
                powerful[shown_as(key, ALLOW_RULES)] = allow
        elif setting in POWERFUL_SETTINGS:
            powerful[shown_as(key, setting)] = value
        else:
            plain[key] = value
    return plain, powerful


def _without_allow_rules(permissions: Any) -> tuple[Any, list[Any]]:
    """The permissions table with only its narrowing (deny and ask) rules, and the others:
    the allow rules, and any rule that is not plainly narrowing (validation would refuse
    it, but only a trusted folder's rules are worth a configuration error). A table of
    another shape is left whole for validation to report."""
    rules = permissions.get("rules") if isinstance(permissions, dict) else None
    if not isinstance(rules, list):
        return permissions, []
    narrowing = [rule for rule in rules if _narrows(rule)]
    others = [rule for rule in rules if not _narrows(rule)]
    return {**permissions, "rules": narrowing}, others


def _narrows(rule: Any) -> bool:
    return isinstance(rule, dict) and rule.get("behavior") in NARROWING_BEHAVIOURS


def _setting_of(key: str) -> str:
    """The setting a key sets: keys are case-insensitive, and may be an alias."""
    return _ALIASES.get(key.lower(), key.lower())


def _toml_name(key: str, setting: str) -> str:
    return setting


def _dotenv_name(key: str, setting: str) -> str:
    """A `.env` line by its variable: the alias it used, or `AGENT_TUTORIAL_<NAME>`."""
    if key.lower() in _ALIASES:
        return key.upper()
    field = "permissions" if setting == ALLOW_RULES else setting
    return f"AGENT_TUTORIAL_{field.upper()}"


class _KnownKeysDotEnv(DotEnvSettingsSource):
    """`.env`'s lines, already read, as a settings source that passes on only the keys
    `Settings` knows (decoded as pydantic-settings decodes a `.env`: tables as JSON).

    A `.env` is shared with other tools and holds variables such as the one `api_key_env`
    names (`DEEPSEEK_API_KEY`); pydantic-settings hands every unknown key to the model,
    which forbids extras. Unknown keys are ignored here, as the environment's are.
    """

    def __init__(self, settings_cls: type[BaseSettings], lines: Mapping[str, str | None]):
        self._lines = lines  # before the base class loads them, in its __init__
        super().__init__(settings_cls, env_file=None)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            dict(self._lines), self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )

    def __call__(self) -> dict[str, Any]:
        known = _setting_keys(self.settings_cls)
        return {key: value for key, value in super().__call__().items() if key.lower() in known}


def _setting_keys(settings_cls: type[BaseSettings]) -> frozenset[str]:
    """Field names and their aliases, lower-cased (settings are case-insensitive)."""
    keys: set[str] = set()
    for name, field in settings_cls.model_fields.items():
        keys.add(name.lower())
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):
            keys.update(choice.lower() for choice in alias.choices if isinstance(choice, str))
    return frozenset(keys)


def key_from_project_dotenv(settings: Settings, project: ProjectSettings) -> str | None:
    """The variable whose value in the project's `.env` is the key in use, when the
    environment does not hold it (a run says so once: a cloned project can ship a key)."""
    if settings.api_key is None or settings.is_demo:
        return None
    key = settings.api_key.get_secret_value()
    spellings = _key_variables(settings)
    if any(os.environ.get(name) == key for name in os.environ if name.lower() in spellings):
        return None
    lines = project.dotenv_lines
    return next((name for name in lines if name.lower() in spellings and lines[name] == key), None)


def _key_variables(settings: Settings) -> frozenset[str]:
    """Every name, lower-cased, a variable that gives the key may have (settings are
    case-insensitive: `openai_api_key=` in `.env` is the key too)."""
    names = {alias for alias, setting in _ALIASES.items() if setting == _API_KEY}
    return frozenset({_API_KEY, settings.api_key_env.lower(), *names})


def refuse_unusable_state_dir(state_dir: Path) -> None:
    """Nothing is loaded from a state folder that is a symlink (it could hand the agent
    settings and hooks from anywhere, and tools could not tell what is protected) or that
    belongs to another user (whoever can create it could configure the agent, as git
    refuses a repository another user owns)."""
    if state_dir.is_symlink():
        raise ConfigError(
            f"{state_dir} is a symlink; settings, hooks and skills are read from a real "
            "directory only"
        )
    try:
        owner = state_dir.stat().st_uid
    except OSError:  # missing (or unreadable, which reading its files then reports)
        return
    if owner != os.geteuid():
        raise ConfigError(
            f"{state_dir} belongs to another user (uid {owner}); settings, keys and sessions "
            "are used only from your own. Remove it, or run from another directory."
        )


def _check_base_url(base_url: str | None, flag: str | None) -> None:
    """A URL the HTTP client cannot parse would otherwise fail with a traceback, or after
    every retry as an unreachable endpoint. The error names the `flag` that gave it, when
    one did, else the variable."""
    if not base_url:
        return
    shown = f"{flag or 'OPENAI_BASE_URL'} {mask_url_passwords(base_url)!r}"
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - parsing the port is what raises for a bad one
    except ValueError as error:
        raise ConfigError(f"{shown} is not a valid URL: {error}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{shown} must start with http:// or https:// and name a host, "
            "such as http://localhost:8080/v1"
        )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            values = tomllib.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read {path}: it is not UTF-8 text") from None
    key = next((key for key in values if _setting_of(key) == _API_KEY), None)
    if key is not None:  # any spelling: `OPENAI_API_KEY` or `Api_Key` would be sent too
        raise ConfigError(
            f"{path} holds an api_key ({key!r}); keys belong in the environment or "
            ".agent_tutorial/.env. Name the variable with api_key_env instead."
        )
    return values


def _with_lists_added_up(layers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Permission rules and hooks add up across config files, the user's first; any other
    setting in the project file replaces the user's. A project's rules must not silently
    drop a user's global deny rule or guard hook. (The sources are merged key by key, so
    the combined lists are placed in the most specific layer.)"""
    top = dict(layers[-1])
    rules = _added_up([_table(layer, "permissions").get("rules") for layer in layers])
    if rules is not None:
        top["permissions"] = {**_table(top, "permissions"), "rules": rules}
    for event in {event for layer in layers for event in _table(layer, "hooks")}:
        hooks = _added_up([_table(layer, "hooks").get(event) for layer in layers])
        if hooks is not None:
            top["hooks"] = {**_table(top, "hooks"), event: hooks}
    return [*layers[:-1], top]


def _table(layer: dict[str, Any], key: str) -> dict[str, Any]:
    value = layer.get(key)
    return value if isinstance(value, dict) else {}


def _added_up(values: list[Any]) -> list[Any] | None:
    """The lists joined, or None when there is nothing to join or a value is not a list
    (then validation reports it as it stands)."""
    present = [value for value in values if value is not None]
    if len(present) < 2 or not all(isinstance(value, list) for value in present):
        return None
    return [item for value in present for item in value]


def _with_named_key(settings: Settings, dotenv_lines: Mapping[str, str | None]) -> Settings:
    """Honour `api_key_env` when the key is kept in a variable other than OPENAI_API_KEY
    (in the environment, or in the `.env` as read). A key in OPENAI_API_KEY, in any
    spelling, the sources have already read: then `api_key` is set and wins."""
    if settings.api_key is not None:
        return settings
    value = os.environ.get(settings.api_key_env) or dotenv_lines.get(settings.api_key_env)
    if not value:
        return settings
    return settings.model_copy(update={"api_key": SecretStr(value)})


def missing_settings(settings: Settings) -> list[str]:
    """Names of the environment variables a real (non-demo) run still needs."""
    if settings.is_demo:
        return []
    missing = []
    if not settings.base_url:
        missing.append("OPENAI_BASE_URL")
    if settings.api_key is None and settings.endpoint_host not in LOOPBACK_HOSTS:
        missing.append(settings.api_key_env)
    if not settings.model:
        missing.append("AGENT_TUTORIAL_MODEL")
    return missing


_UNKNOWN_KEY_ERRORS = ("extra_forbidden", "unexpected_keyword_argument")  # model, dataclass


def _environment_names(setting: str) -> tuple[str, ...]:
    """The variables read for `setting`: its aliases (`OPENAI_BASE_URL`), and
    `AGENT_TUTORIAL_<NAME>` (which pydantic-settings passes on even for a field with
    aliases, where it is refused as not a setting)."""
    field = Settings.model_fields.get(setting)
    alias = None if field is None else field.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else []
    return (
        *(choice for choice in choices if isinstance(choice, str)),
        f"AGENT_TUTORIAL_{setting.upper()}",
    )


def _describe_config_problem(item: ErrorDetails) -> str:
    """A misspelt key is called unknown and, where one is close, names the setting it
    resembles (pydantic alone says "Extra inputs are not permitted")."""
    if item["type"] not in _UNKNOWN_KEY_ERRORS:
        return config_value_problem(item)
    close = difflib.get_close_matches(str(item["loc"][-1]), _known_keys(item["loc"]), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"not a setting{hint}"


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The setting names allowed where `loc` points: the top level, or inside a table."""
    shape: object = Settings
    for part in loc[:-1]:
        shape = _field_types(shape).get(str(part))
    return list(_field_types(shape))


def _field_types(shape: object) -> dict[str, object]:
    if isinstance(shape, type) and issubclass(shape, BaseModel):
        return {name: field.annotation for name, field in shape.model_fields.items()}
    if dataclasses.is_dataclass(shape):  # a shape is an annotation, never an instance
        return {field.name: field.type for field in dataclasses.fields(shape)}
    return {}
