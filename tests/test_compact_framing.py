"""The compact fixed part for small windows (issue 28, item 5): which windows get it, and
that it keeps every tool and argument while cutting the text."""

from __future__ import annotations

from typing import Any

import pytest

from agent_tutorial.core.messages import assistant_message, system_message, user_message
from agent_tutorial.core.model import ModelReply, ModelRequest, ToolSpec
from agent_tutorial.features.compact_framing import (
    COMPACT_FRAMING_MAX_WINDOW_TOKENS,
    CompactFraming,
    compact_schema,
    compact_spec,
    first_sentence,
    uses_compact_framing,
)
from agent_tutorial.features.compaction import wording

SCHEMA: dict[str, Any] = {
    "additionalProperties": False,
    "properties": {
        "description": {"description": "A label.", "title": "Description", "type": "string"},
        "limit": {
            "anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}],
            "default": None,
            "description": "How many.",
            "title": "Limit",
        },
        "todos": {
            "items": {"$ref": "#/$defs/Item", "title": "Todo"},
            "maxItems": 50,
            "type": "array",
        },
    },
    "$defs": {
        "title": {"type": "string", "title": "A definition named title"},
        "Item": {
            "description": "One step.",
            "properties": {"status": {"enum": ["a", "b"], "title": "Status", "type": "string"}},
            "required": ["status"],
            "title": "Item",
            "type": "object",
        },
    },
    "required": ["description"],
    "type": "object",
}


@pytest.mark.parametrize(
    ("window", "compact"),
    [(None, False), (16_384, True), (16_385, False), (4_096, True), (256, True)],
)
def test_windows_of_16k_or_less_get_the_compact_form(window: int | None, compact: bool) -> None:
    assert COMPACT_FRAMING_MAX_WINDOW_TOKENS == 16_384
    assert uses_compact_framing(window) is compact


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Run a command. Then more.", "Run a command."),
        ("One sentence only.", "One sentence only."),
        ("Version 1.5 works. Yes.", "Version 1.5 works."),
        ("One. Two. Three.", "One."),
        (". Then a sentence. And more.", "."),
        ("", ""),
    ],
)
def test_a_description_is_cut_to_its_first_sentence(text: str, first: str) -> None:
    assert first_sentence(text) == first


def test_the_compact_schema_keeps_every_constraint_and_property_name() -> None:
    assert compact_schema(SCHEMA) == {
        "additionalProperties": False,
        "properties": {
            "description": {"type": "string"},
            "limit": {"anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}]},
            "todos": {"items": {"$ref": "#/$defs/Item"}, "maxItems": 50, "type": "array"},
        },
        "$defs": {
            "title": {"type": "string"},
            "Item": {
                "properties": {"status": {"enum": ["a", "b"], "type": "string"}},
                "required": ["status"],
                "type": "object",
            },
        },
        "required": ["description"],
        "type": "object",
    }


def test_a_compact_spec_is_the_same_tool_with_shorter_text() -> None:
    spec = ToolSpec("task", "Hand a job over. It cannot see this.", SCHEMA)

    compact = compact_spec(spec)

    assert compact.name == "task"
    assert compact.description == "Hand a job over."
    assert compact.parameters["required"] == ["description"]


class Recording:
    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        return ModelReply(assistant_message("ok"), "stop")


@pytest.mark.parametrize(("window", "compact"), [(16_384, True), (16_385, False), (None, False)])
def test_requests_are_compact_only_while_the_known_window_is_small(
    window: int | None, compact: bool
) -> None:
    inner = Recording()
    model = CompactFraming(inner, lambda: window, system_prompt="long prompt", compact_prompt="p")
    spec = ToolSpec("task", "Hand a job over. It cannot see this.", SCHEMA)

    model.complete(ModelRequest((system_message("long prompt"), user_message("hi")), (spec,)))

    (sent,) = inner.requests
    assert (sent.messages[0] == system_message("p")) is compact
    assert (sent.tools[0] == compact_spec(spec)) is compact
    assert sent.messages[1] == user_message("hi")


def test_a_request_of_no_messages_passes_as_it_is() -> None:
    inner = Recording()
    model = CompactFraming(inner, lambda: 4_096, system_prompt="long prompt", compact_prompt="p")

    model.complete(ModelRequest(()))

    assert inner.requests[0].messages == ()


def test_each_specs_compact_form_is_made_once_and_again_for_a_new_spec_of_that_name() -> None:
    inner = Recording()
    model = CompactFraming(inner, lambda: 4_096, system_prompt="long prompt", compact_prompt="p")
    first = ToolSpec("task", "Hand a job over. More.", SCHEMA)
    renewed = ToolSpec("task", "Give a job away. More.", SCHEMA)

    for spec in (first, first, renewed):
        model.complete(ModelRequest((user_message("hi"),), (spec,)))

    sent = [request.tools[0] for request in inner.requests]
    assert sent[0] is sent[1]
    assert sent[2].description == "Give a job away."


def test_a_request_without_the_agents_system_prompt_keeps_its_first_message() -> None:
    inner = Recording()
    model = CompactFraming(inner, lambda: 4_096, system_prompt="long prompt", compact_prompt="p")
    summary_request = (system_message("Summarise this."), user_message("history"))

    model.complete(ModelRequest(summary_request))

    assert inner.requests[0].messages == summary_request


# --- which summary threshold applies (item 7) ---------------------------------------------------


def test_the_seed_names_its_fixed_threshold_and_how_to_raise_it() -> None:
    text = wording.threshold_source("seed", 50_000, None, 50_000)

    assert text == (
        "seed, 50,000 B; raise it with [compaction] proactive_threshold_bytes, or use "
        "--compaction cache-aware to follow the window"
    )


def test_the_seed_in_a_window_with_less_room_names_the_window() -> None:
    assert wording.threshold_source("seed", 49_999, 49_999, 50_000) == (
        "seed, the window's room for history"
    )
    assert wording.threshold_source("seed", 50_000, 50_000, 50_000).startswith("seed, 50,000 B")


def test_cache_aware_follows_a_known_window() -> None:
    assert wording.threshold_source("cache-aware", 90_000, 100_000, 50_000) == (
        "cache-aware, a share of the window's room for history"
    )
    assert "cache_summary_threshold_bytes" in wording.threshold_source(
        "cache-aware", 90_000, None, 50_000
    )
