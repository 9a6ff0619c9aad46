"""A configuration value's problem in the project's words rather than the validation
library's: `must be at least 1 (got 0)`, not `Input should be greater than or equal to 1`;
`must be one of 'auto', 'native' or 'text' (got 'xml')`, not `Input should be …`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic_core import ErrorDetails


def config_value_problem(item: ErrorDetails) -> str:
    """`item`'s problem with the value given, said plainly; the library's message for a
    kind of problem not worded here."""
    wording = _WORDING.get(item["type"])
    context: Mapping[str, Any] = item.get("ctx") or {}
    if wording is None:
        return str(item["msg"]).removeprefix("Value error, ")
    return f"{wording(context)} (got {_shown(item['input'])})"


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
}
