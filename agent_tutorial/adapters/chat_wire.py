"""The shape of a chat-completions request on the wire, as real servers accept it.

Core messages keep their canonical shapes (and `to_wire`, whose bytes chapter 8 counts);
this module decides what goes over HTTP: one leading system message, every later system
note as a `<system-reminder>` user turn, no `null` content. Pure: no SDK, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, cast

from agent_tutorial.core.messages import AssistantMessage, ChatMessage, SystemMessage, to_wire
from agent_tutorial.core.model import DEFAULT_MAX_OUTPUT_TOKENS
from agent_tutorial.core.text import plain_json

# The system prompt and a restored summary.
_MERGED_SYSTEM_MESSAGES = 2

CapParameter: TypeAlias = Literal["max_tokens", "max_completion_tokens"]


@dataclass(frozen=True, slots=True)
class WireOptions:
    """What one server needs on the wire. `config.Settings` documents each field under
    the same name and takes its defaults from here."""

    send_tool_choice: bool = True
    stream: bool = True
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    merge_reminders: bool = False
    temperature: float | None = None

    def __post_init__(self) -> None:
        if self.max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be >= 1, got {self.max_output_tokens}")


def system_reminder(text: str) -> str:
    """A system note as user text; Claude Code marks its own notes the same way, so the
    model can tell them from what the user typed."""
    return f"<system-reminder>\n{text}\n</system-reminder>"


def wire_messages(
    messages: Sequence[ChatMessage], *, merge_reminders: bool = False
) -> list[dict[str, Any]]:
    """The messages as sent: at most one system message, first.

    The system prompt and a summary right after it become that one message (a summary
    request carries the earlier summary there; the agent's requests have the project
    context between the two, so their summary travels as a reminder and the system
    message stays the same for a server's prompt cache). Any other system message (a snip
    marker, a request-only reminder) becomes a user turn in `<system-reminder>` tags, in
    place, so request-only notes stay after the last canonical message and each request
    still extends the previous one. Chat templates of Gemma, Mistral and others reject a
    system message anywhere else, and llama-cpp-python renders the whole tool list again
    for each one.
    """
    leading = _leading_system_messages(messages)
    wire: list[dict[str, Any]] = []
    if leading:
        text = "\n\n".join(message.content for message in leading)
        wire.append({"role": "system", "content": text})
    for message in messages[len(leading) :]:
        if isinstance(message, SystemMessage):
            wire.append({"role": "user", "content": system_reminder(message.content)})
        elif isinstance(message, AssistantMessage):
            wire.append(_assistant_wire(message))
        else:
            wire.append(to_wire(message))
    wire = [_sendable(message) for message in wire]
    return _merged_user_turns(wire) if merge_reminders else wire


def _sendable(message: dict[str, Any]) -> dict[str, Any]:
    """The request is sent as UTF-8, which a lone surrogate cannot be: one in a server's own
    reply echoed back (JSON may escape one), or in a workspace path that is not UTF-8,
    goes as `\\xe9` text (`core.text.encodable`)."""
    return cast(dict[str, Any], plain_json(message))


def _leading_system_messages(messages: Sequence[ChatMessage]) -> list[SystemMessage]:
    """The system prompt and the summary after it: two at most, since a third system
    message in a row is a request-only reminder (after a summary and nothing else), which
    must not change the system message of the requests that follow."""
    leading: list[SystemMessage] = []
    for message in messages[:_MERGED_SYSTEM_MESSAGES]:
        if not isinstance(message, SystemMessage):
            break
        leading.append(message)
    return leading


def _assistant_wire(message: AssistantMessage) -> dict[str, Any]:
    """No `"content": null`: llama-cpp-python rejects it with a 500 validation error. The
    field is kept, as "", because many chat templates concatenate `message['content']`
    and fail on a missing one."""
    wire = to_wire(message)
    if wire["content"] is None:
        wire["content"] = ""
    return wire


def _merged_user_turns(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For templates that demand strict user/assistant alternation: adjacent user turns
    become one. That joins a reminder to the user turn next to it, and a prompt whose
    request failed (it got no reply) to the prompt after it, which would otherwise be
    refused on every later request."""
    merged: list[dict[str, Any]] = []
    for message in wire:
        if merged and message["role"] == merged[-1]["role"] == "user":
            joined = f"{merged[-1]['content']}\n\n{message['content']}"
            merged[-1] = {"role": "user", "content": joined}
        else:
            merged.append(message)
    return merged
