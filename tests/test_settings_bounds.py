"""Every numeric setting has a sane range: the bound itself is accepted, one past it is a
configuration error naming the setting, and so are `inf`, `nan`, negative and 40-digit
values, whether they come from config.toml, the environment or a flag (exit 2, one line,
no traceback). Before, `request_timeout_s = inf` ended in an OverflowError traceback and a
40-digit `max_stdin_bytes` in "cannot fit 'int' into an index-sized integer"."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from agent_tutorial.config import ConfigError, Settings, load_settings
from agent_tutorial.features.compaction import CompactionSettings
from tests.conftest import RunCli, write_state

GiB = 1024**3
MiB = 1024**2
FORTY_NINES = "9" * 40

# setting: (lowest accepted, one below it, highest accepted, one above it)
INT_BOUNDS = {
    "max_turns": (1, 0, 1_000_000, 1_000_001),
    "max_retries": (0, -1, 100, 101),
    "context_window_tokens": (256, 255, 10_000_000, 10_000_001),
    "max_stdin_bytes": (1, 0, GiB, GiB + 1),
    "project_instructions_max_bytes": (1, 0, 4 * MiB, 4 * MiB + 1),
    "max_output_tokens": (1, 0, 10_000_000, 10_000_001),
    "output_disk_cap_bytes": (0, -1, 64 * GiB, 64 * GiB + 1),
    "max_tool_argument_bytes": (1024, 1023, 64 * MiB, 64 * MiB + 1),
    "checkpoint_max_file_bytes": (0, -1, 64 * GiB, 64 * GiB + 1),
}
FLOAT_SETTINGS = ("request_timeout_s", "grep_time_budget_s")
"""Above 0 and at most 86,400 seconds (a day), finite."""
INTERVAL_SETTINGS = ("waiting_event_interval_s",)
"""At least 0.1 s (more often would flood stream-json) and at most a day, finite."""
UNSET_BY_DEFAULT = ("temperature",)
"""From 0 to 2, finite, or unset (the server's default)."""


def problem(workspace: Path, text: str) -> str | None:
    """The configuration error for `text` as config.toml (of a trusted project: hooks are
    among its settings), or None if it is accepted."""
    write_state(workspace, "config.toml", text)
    try:
        load_settings(workspace, {"model": "demo"}, trusted=True)
    except ConfigError as error:
        return str(error)
    return None


def test_every_numeric_setting_has_its_bounds_tested() -> None:
    numeric = {
        name
        for name, field in Settings.model_fields.items()
        if field.annotation in (int, float, int | None, float | None)
    }

    assert numeric == (
        set(INT_BOUNDS) | set(FLOAT_SETTINGS) | set(INTERVAL_SETTINGS) | set(UNSET_BY_DEFAULT)
    )


@pytest.mark.parametrize("name", INT_BOUNDS)
def test_an_integer_setting_accepts_its_bounds_and_refuses_one_past_them(
    workspace: Path, name: str
) -> None:
    lowest, below, highest, above = INT_BOUNDS[name]

    assert problem(workspace, f"{name} = {lowest}") is None
    assert problem(workspace, f"{name} = {highest}") is None
    assert f"{name}: must be at least {lowest} (got {below})" in str(
        problem(workspace, f"{name} = {below}")
    )
    assert f"{name}: must be at most {highest} (got {above})" in str(
        problem(workspace, f"{name} = {above}")
    )


@pytest.mark.parametrize("name", INT_BOUNDS)
@pytest.mark.parametrize("value", [FORTY_NINES, f"-{FORTY_NINES}", "inf", "nan"])
def test_an_integer_setting_refuses_absurd_values(workspace: Path, name: str, value: str) -> None:
    assert f"config.toml: {name}: " in str(problem(workspace, f"{name} = {value}"))


@pytest.mark.parametrize("name", FLOAT_SETTINGS)
def test_a_duration_accepts_up_to_a_day_and_refuses_more(workspace: Path, name: str) -> None:
    assert problem(workspace, f"{name} = 86400") is None
    assert problem(workspace, f"{name} = 0.001") is None
    assert f"{name}: must be at most 86400 (got 86400.001)" in str(
        problem(workspace, f"{name} = 86400.001")
    )
    assert f"{name}: must be more than 0 (got 0)" in str(problem(workspace, f"{name} = 0"))


@pytest.mark.parametrize("name", INTERVAL_SETTINGS)
def test_an_interval_accepts_a_tenth_of_a_second_to_a_day(workspace: Path, name: str) -> None:
    assert problem(workspace, f"{name} = 0.1") is None
    assert problem(workspace, f"{name} = 86400") is None
    assert f"{name}: must be at least 0.1 (got 0.099)" in str(problem(workspace, f"{name} = 0.099"))
    assert f"{name}: must be at most 86400 (got 86400.001)" in str(
        problem(workspace, f"{name} = 86400.001")
    )


@pytest.mark.parametrize("name", FLOAT_SETTINGS + INTERVAL_SETTINGS)
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e308", FORTY_NINES, "-1"])
def test_a_duration_refuses_absurd_values(workspace: Path, name: str, value: str) -> None:
    assert f"config.toml: {name}: " in str(problem(workspace, f"{name} = {value}"))


def test_temperature_accepts_0_to_2_and_refuses_what_is_outside(workspace: Path) -> None:
    assert problem(workspace, "temperature = 0") is None
    assert problem(workspace, "temperature = 2") is None
    assert "temperature: must be at least 0 (got" in str(problem(workspace, "temperature = -0.01"))
    assert "temperature: must be at most 2 (got" in str(problem(workspace, "temperature = 2.01"))


@pytest.mark.parametrize("value", ["inf", "nan", FORTY_NINES, '"warm"'])
def test_temperature_refuses_absurd_values(workspace: Path, value: str) -> None:
    assert "config.toml: temperature: " in str(problem(workspace, f"temperature = {value}"))


def test_a_hook_timeout_accepts_up_to_a_day_and_refuses_more_or_inf(workspace: Path) -> None:
    def hook(timeout: str) -> str:
        return f"[[hooks.PreToolUse]]\ncommand = 'true'\ntimeout_s = {timeout}\n"

    assert problem(workspace, hook("86400")) is None
    assert "hooks.PreToolUse.0.timeout_s: must be at most 86400 (got" in str(
        problem(workspace, hook("86400.5"))
    )
    assert "timeout_s: must be a finite number (got inf)" in str(problem(workspace, hook("inf")))


def compaction_limit(name: str) -> int:
    if name.endswith("_bytes"):
        return GiB
    return 1 if name.endswith("_share") else 1_000_000


COMPACTION_LIMITS = {
    field.name: compaction_limit(field.name)
    for field in fields(CompactionSettings)
    if field.name not in {"strategy", "context_window_tokens"}
}


@pytest.mark.parametrize("name", COMPACTION_LIMITS)
def test_a_compaction_number_has_an_upper_bound(workspace: Path, name: str) -> None:
    """At the bound a value may still break a rule between two settings (the low mark
    below the high one); it is never refused by the bound itself."""
    limit = COMPACTION_LIMITS[name]
    bound_error = f"compaction.{name}: must be at most {limit} (got"

    assert bound_error not in str(problem(workspace, f"[compaction]\n{name} = {limit}"))
    assert bound_error in str(problem(workspace, f"[compaction]\n{name} = {limit + 1}"))
    assert bound_error in str(problem(workspace, f"[compaction]\n{name} = {FORTY_NINES}"))


def test_the_largest_compaction_numbers_are_accepted_where_no_other_rule_objects(
    workspace: Path,
) -> None:
    paired = {"snip_keep_head_groups", "cache_low_mark_bytes", "cache_snip_keep_groups"}
    largest = "\n".join(
        f"{name} = {limit}" for name, limit in COMPACTION_LIMITS.items() if name not in paired
    )

    assert problem(workspace, f"[compaction]\n{largest}\n") is None


# --- through the CLI: config.toml, the environment, a flag ----------------------------------


def assert_config_error(result_stderr: str, exit_code: int, where: str, key: str) -> None:
    assert exit_code == 2
    assert "Traceback" not in result_stderr
    assert result_stderr.startswith(f"error: invalid configuration in {where}: {key}: ")
    assert result_stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ("request_timeout_s = inf", "request_timeout_s"),
        ("request_timeout_s = 1e308", "request_timeout_s"),
        (f"max_stdin_bytes = {FORTY_NINES}", "max_stdin_bytes"),
        ("max_turns = -1", "max_turns"),
    ],
)
def test_an_absurd_value_in_config_toml_is_a_configuration_error(
    run_cli: RunCli, workspace: Path, line: str, setting: str
) -> None:
    write_state(workspace, "config.toml", line)

    result = run_cli("run", "-c", "1", "-p", "hi")

    config = workspace / ".agent_tutorial" / "config.toml"
    assert_config_error(result.stderr, result.exit_code, str(config), setting)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AGENT_TUTORIAL_REQUEST_TIMEOUT_S", "inf"),
        ("AGENT_TUTORIAL_REQUEST_TIMEOUT_S", "nan"),
        ("AGENT_TUTORIAL_MAX_STDIN_BYTES", FORTY_NINES),
        ("AGENT_TUTORIAL_GREP_TIME_BUDGET_S", "1e308"),
    ],
)
def test_an_absurd_value_in_the_environment_is_a_configuration_error(
    run_cli: RunCli, variable: str, value: str
) -> None:
    result = run_cli("run", "-c", "1", "-p", "hi", env={variable: value})

    assert_config_error(result.stderr, result.exit_code, "the environment", variable)


@pytest.mark.parametrize("flag", ["--max-turns", "--context-window"])
def test_an_absurd_flag_is_a_configuration_error(run_cli: RunCli, flag: str) -> None:
    result = run_cli("run", "-c", "1", "-p", "hi", flag, FORTY_NINES)

    assert_config_error(result.stderr, result.exit_code, "the command line", flag)
