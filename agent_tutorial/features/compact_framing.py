"""The fixed part of every request, made small for a small window: at a known window of
`COMPACT_FRAMING_MAX_WINDOW_TOKENS` or less, the tool schemas and the system prompt go out
in a compact form (the same tools and arguments, shorter text), so that a 4k–16k window
keeps room for the conversation. The rule and the compact form are pure functions; the
model wrapper applies them to each request as the window is known at that moment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agent_tutorial.core.messages import SystemMessage, system_message
from agent_tutorial.core.model import ModelClient, ModelReply, ModelRequest, ToolSpec

COMPACT_FRAMING_MAX_WINDOW_TOKENS = 16_384
"""The largest known window in which requests carry the compact fixed part."""

_SCHEMA_TEXT_KEYS = frozenset({"title", "description", "default"})
"""Annotations, not constraints (JSON Schema's own word): a tool applies its defaults itself."""


def uses_compact_framing(window_tokens: int | None) -> bool:
    """Whether requests in a window of `window_tokens` (None: unknown) are compact."""
    return window_tokens is not None and window_tokens <= COMPACT_FRAMING_MAX_WINDOW_TOKENS


def first_sentence(text: str) -> str:
    """`text` up to the end of its first sentence (a period followed by a space)."""
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def compact_schema(schema: Any) -> Any:
    """A JSON schema without its annotations (titles, descriptions, defaults): types,
    enums, bounds and required fields stay, so every call valid before is valid still.
    Property names are kept as they are (a property may be called `description`)."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    compact: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_TEXT_KEYS:
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            compact[key] = {name: compact_schema(item) for name, item in value.items()}
        else:
            compact[key] = compact_schema(value)
    return compact


def compact_spec(spec: ToolSpec) -> ToolSpec:
    """The same tool, its description cut to its first sentence and its schema's text gone."""
    return ToolSpec(
        name=spec.name,
        description=first_sentence(spec.description),
        parameters=compact_schema(spec.parameters),
    )


class CompactFraming:
    """The model as a small window sees it: while `window_tokens()` says the known window is
    small, each request's tool schemas are compact and its system prompt, when it is
    `system_prompt`, is `compact_prompt` instead. Other requests (a summary's) pass as
    they are."""

    def __init__(
        self,
        model: ModelClient,
        window_tokens: Callable[[], int | None],
        system_prompt: str,
        compact_prompt: str,
    ) -> None:
        self.model = model
        self.window_tokens = window_tokens
        self._system_prompt = system_prompt
        self._compact_prompt = system_message(compact_prompt)
        self._compact_specs: dict[str, tuple[ToolSpec, ToolSpec]] = {}
        """By name: each spec and its compact form, made once (specs are built once too)."""

    def complete(self, request: ModelRequest) -> ModelReply:
        if uses_compact_framing(self.window_tokens()):
            request = self._compact(request)
        return self.model.complete(request)

    def _compact(self, request: ModelRequest) -> ModelRequest:
        messages = request.messages
        first = messages[0] if messages else None
        if isinstance(first, SystemMessage) and first.content == self._system_prompt:
            messages = (self._compact_prompt, *messages[1:])
        tools = tuple(self._compact_spec(spec) for spec in request.tools)
        return replace(request, messages=messages, tools=tools)

    def _compact_spec(self, spec: ToolSpec) -> ToolSpec:
        cached = self._compact_specs.get(spec.name)
        if cached is None or cached[0] is not spec:
            cached = self._compact_specs[spec.name] = (spec, compact_spec(spec))
        return cached[1]
