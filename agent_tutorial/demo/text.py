"""Small text helpers the demo's modules share: encoding tool arguments as JSON and reading
the lines a tool printed."""

from __future__ import annotations

import orjson


def to_json(value: object) -> str:
    return orjson.dumps(value).decode("utf-8")


def output_lines(result: str) -> list[str]:
    """The lines a tool printed, without bash's status line or notes in brackets."""
    return [line for line in result.splitlines() if not line.startswith("[")]


def is_tool_error(result: str) -> bool:
    return result.startswith("Error [")
