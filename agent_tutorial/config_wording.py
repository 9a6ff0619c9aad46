"""A configuration value's problem in the project's words rather than the validation
library's: `must be at least 1 (got 0)`, not `Input should be greater than or equal to 1`;
`must be one of 'auto', 'native' or 'text' (got 'xml')`, not `Input should be …`; and
named where it was given: `invalid configuration in /work/.agent_tutorial/config.toml:
max_turns: must be at least 1 (got 0)`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic_core import ErrorDetails

if TYPE_CHECKING:
    from pydantic import ValidationError

    from agent_tutorial.config_origin import SettingOrigin


def describe_config_error(
    error: ValidationError,
    origin: Callable[[str], SettingOrigin | None],
    problem: Callable[[ErrorDetails], str],
) -> str:
    """`invalid configuration in WHERE: KEY: PROBLEM; …`, the problems of one source
    together (`; in WHERE: …` for the next); a setting no one source gave is named alone."""
    by_source: dict[str, list[str]] = {}
    for item in error.errors(include_url=False):
        loc = [str(part) for part in item["loc"]] or ["settings"]
        found = origin(loc[0])
        key = ".".join([loc[0] if found is None else found.key, *loc[1:]])
        by_source.setdefault("" if found is None else found.where, []).append(
            f"{key}: {problem(item)}"
        )
    parts = [
        f"in {where}: {'; '.join(problems)}" if where else "; ".join(problems)
        for where, problems in by_source.items()
    ]
    separator = " " if parts[0].startswith("in ") else ": "
    return "invalid configuration" + separator + "; ".join(parts)


def config_value_problem(item: ErrorDetails, *, as_typed: bool = False) -> str:
    """`item`'s problem with the value given, said plainly; the library's message for a
    kind of problem not worded here. `as_typed`: the value is a flag's, shown as it was
    typed (`got 0`, where a file's text would be quoted)."""
    wording = _WORDING.get(item["type"])
    context: Mapping[str, Any] = item.get("ctx") or {}
    if wording is None:
        return str(item["msg"]).removeprefix("Value error, ")
    given = item["input"]
    return f"{wording(context)} (got {given if as_typed else _shown(given)})"


def _shown(value: object) -> str:
    """As the config file would spell it: text quoted, true and false in lower case."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


def _bound(value: object) -> str:
    """`86400`, not `86400.0`: a bound as the settings' documentation writes it."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_WORDING: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "greater_than_equal": lambda ctx: f"must be at least {_bound(ctx['ge'])}",
    "greater_than": lambda ctx: f"must be more than {_bound(ctx['gt'])}",
    "less_than_equal": lambda ctx: f"must be at most {_bound(ctx['le'])}",
    "less_than": lambda ctx: f"must be less than {_bound(ctx['lt'])}",
    "literal_error": lambda ctx: f"must be one of {ctx['expected']}",
    "enum": lambda ctx: f"must be one of {ctx['expected']}",
    "int_parsing": lambda _ctx: "must be a whole number",
    "int_type": lambda _ctx: "must be a whole number",
    "float_parsing": lambda _ctx: "must be a number",
    "float_type": lambda _ctx: "must be a number",
    "bool_parsing": lambda _ctx: "must be true or false",
    "bool_type": lambda _ctx: "must be true or false",
    "string_type": lambda _ctx: "must be text in quotes",
    "finite_number": lambda _ctx: "must be a finite number",
}
