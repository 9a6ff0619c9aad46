"""Where a setting's value came from: the flag, the environment variable, or the file and
the key it was written under. A refused value is named there, in the words the user wrote
it with (`in /work/.agent_tutorial/.env: AGENT_TUTORIAL_TOOL_CALLS: …`), not only by the
setting's name."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLAG_NAMES = {"context_window_tokens": "--context-window"}
"""Flags not spelt as their setting is (`--max-turns` sets max_turns)."""


@dataclass(frozen=True, slots=True)
class SettingOrigin:
    where: str
    """`the command line`, `the environment`, or a file's path."""
    key: str
    """The flag, the variable or the file's key, as written there."""


@dataclass(frozen=True, slots=True)
class SettingSources:
    """The sources one load merged, each as it applied (an untrusted project's powerful
    settings left out), highest precedence first as `load_settings` orders them."""

    setting_of: Callable[[str], str]
    """The setting a key sets (keys are case-insensitive and may be aliases)."""
    environment_names: Callable[[str], Sequence[str]]
    """The environment variables that set a setting."""
    flags: Mapping[str, Any]
    dotenv: Mapping[str, Any]
    dotenv_lines: Mapping[str, str | None]
    dotenv_path: Path
    files: Sequence[tuple[Path, Mapping[str, Any]]]
    """The TOML files, project first, with what each gave."""

    def origin(self, setting: str) -> SettingOrigin | None:
        """Where the value `setting` was validated with came from (for lists two files add
        up, the project's); None for a default."""
        if setting in self.flags:
            return SettingOrigin("the command line", _flag(setting))
        variables = {name.upper() for name in self.environment_names(setting)}
        variable = _first(os.environ, lambda name: name.upper() in variables)
        if variable is not None:
            return SettingOrigin("the environment", variable)
        if any(self.setting_of(key) == setting for key in self.dotenv):
            line = _first(self.dotenv_lines, lambda key: self.setting_of(key) == setting)
            return SettingOrigin(str(self.dotenv_path), line or setting)
        for path, values in self.files:
            key = _first(values, lambda key: self.setting_of(key) == setting)
            if key is not None:
                return SettingOrigin(str(path), key)
        return None


def _flag(setting: str) -> str:
    return FLAG_NAMES.get(setting, "--" + setting.replace("_", "-"))


def _first(keys: Iterable[str], wanted: Callable[[str], bool]) -> str | None:
    return next((key for key in keys if wanted(key)), None)
