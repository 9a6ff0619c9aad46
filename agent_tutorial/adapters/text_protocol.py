"""`tool_calls = "text"`: a request for a server that rejects or ignores `tools`, in plain
chat messages. The tools and the one call format go at the front of the system prompt (so
the prompt's fixed part stays first, and cached); earlier calls go back as that text, and
their results as user turns in `<tool_result>` tags. Canonical history is not touched: only
the request is rewritten. Pure: no I/O, no SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace

from agent_tutorial.core.messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    assistant_message,
    system_message,
    user_message,
)
from agent_tutorial.core.model import ModelRequest, ToolSpec

TOOL_FORMAT = """\
# Tools

You can call the tools listed below. To call one, end your reply with the call in exactly \
this format, and write nothing after it:
<tool_call>
{"name": "TOOL_NAME", "arguments": {ARGUMENTS AS A JSON OBJECT}}
</tool_call>
To call several tools at once, write one <tool_call> block after another. A tool's \
result comes back in the next message: never write a result yourself. When you have what \
you need, answer the user without a tool call.

The tools (name, description and JSON-schema parameters):
<tools>
{tools}
</tools>"""


def as_text_protocol(request: ModelRequest) -> ModelRequest:
    """The request with no tools on the wire: described in the system prompt instead (when
    it offers any), and every earlier call and result written as text."""
    messages = list(_as_text(request.messages))
    if request.tools:
        messages = _with_tool_format(messages, request.tools)
    return replace(request, messages=tuple(messages), tools=(), tool_choice=None)


def tool_format(tools: Sequence[ToolSpec]) -> str:
    """The tools and how to call them, as the system prompt's first part."""
    listed = "\n".join(
        json.dumps(
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
            ensure_ascii=False,
        )
        for tool in tools
    )
    return TOOL_FORMAT.replace("{tools}", listed)


def written_call(call: ToolCall) -> str:
    """One call as the model is asked to write it."""
    try:
        arguments: object = json.loads(call.arguments)
    except json.JSONDecodeError:
        arguments = call.arguments  # as the model sent it; the registry refused it already
    text = json.dumps({"name": call.name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{text}\n</tool_call>"


def _with_tool_format(messages: list[ChatMessage], tools: Sequence[ToolSpec]) -> list[ChatMessage]:
    """The tool format in front of the system prompt, or as the system prompt."""
    described = tool_format(tools)
    if messages and isinstance(messages[0], SystemMessage):
        return [system_message(f"{described}\n\n{messages[0].content}"), *messages[1:]]
    return [system_message(described), *messages]


def _as_text(messages: Sequence[ChatMessage]) -> Iterator[ChatMessage]:
    """Calls as `<tool_call>` text; each batch of results as one user turn."""
    names: dict[str, str] = {}
    results: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            name = json.dumps(names.get(message.tool_call_id, ""))
            results.append(f"<tool_result name={name}>\n{message.content}\n</tool_result>")
            continue
        if results:
            yield user_message("\n\n".join(results))
            results = []
        if isinstance(message, AssistantMessage) and message.tool_calls:
            names.update((call.id, call.name) for call in message.tool_calls)
            yield _written_calls(message)
        else:
            yield message
    if results:
        yield user_message("\n\n".join(results))


def _written_calls(message: AssistantMessage) -> AssistantMessage:
    calls = "\n".join(written_call(call) for call in message.tool_calls)
    return assistant_message(f"{message.content}\n\n{calls}" if message.content else calls)
