"""Chapter 9: the tools of the session's MCP servers as the agent's own tools, named
`mcp__<server>__<tool>` so permission rules, hooks and the log see where they come from.

A call is an `execute` tool with no sandbox of the agent's: the permission policy asks by
default, as for bash, and `accept-edits` does not allow it. A result is capped like bash's
output (its head and tail shown), the whole text kept for chapter 8 to persist.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from agent_tutorial.core.mcp_servers import McpCallError, McpCallResult, McpTool, ServerStatus
from agent_tutorial.core.text import encodable
from agent_tutorial.core.tools import ToolDefinition, ToolResult, tool_error

MCP_PREFIX = "mcp__"
MAX_NAME_LENGTH = 64
"""OpenAI's limit on a tool's name (`^[A-Za-z0-9_-]{1,64}$`)."""
MCP_OUTPUT_CAP_BYTES = 30_000
"""A result above this is shown as its head and tail, as bash's output is."""
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH = 8


class McpCaller(Protocol):
    """What the tools need of the client: one call."""

    def call(self, server: str, tool: str, arguments: dict[str, object]) -> McpCallResult: ...


class McpArguments(BaseModel):
    """Any JSON object: the server validates its own tool's arguments."""

    model_config = ConfigDict(extra="allow", frozen=True)


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, with every character a name may not hold as `_`; a name
    that was changed or is too long ends in a hash of the original, so two tools never
    share one (and the same tool always gets the same)."""
    original = f"{MCP_PREFIX}{server}__{tool}"
    cleaned = _NOT_IN_A_NAME.sub("_", original)
    if cleaned == original and len(cleaned) <= MAX_NAME_LENGTH:
        return cleaned
    digest = hashlib.sha256(original.encode()).hexdigest()[:_HASH_LENGTH]
    return f"{cleaned[: MAX_NAME_LENGTH - _HASH_LENGTH - 1]}_{digest}"


def mcp_tools(statuses: Sequence[ServerStatus], caller: McpCaller) -> list[ToolDefinition]:
    """A tool definition for each tool of each connected server, in the servers' order."""
    return [
        _definition(status.name, tool, caller)
        for status in statuses
        if status.state == "connected"
        for tool in status.tools
    ]


def _definition(server: str, tool: McpTool, caller: McpCaller) -> ToolDefinition:
    schema = dict(tool.input_schema) or {"type": "object", "properties": {}}
    schema.setdefault("type", "object")
    return ToolDefinition(
        name=tool_name(server, tool.name),
        description=tool.description or f"The {tool.name} tool of the MCP server {server}.",
        input_model=McpArguments,
        handler=_Call(server, tool.name, caller),
        effect="execute",
        parameters=schema,
    )


@dataclass(frozen=True)
class _Call:
    """The handler of one MCP tool: a paired error for whatever did not go well."""

    server: str
    tool: str
    caller: McpCaller

    def __call__(self, arguments: McpArguments) -> ToolResult:
        try:
            result = self.caller.call(self.server, self.tool, arguments.model_dump(mode="json"))
        except McpCallError as error:
            return tool_error("mcp_call_failed", f"{self.server}/{self.tool}: {error}")
        if result.is_error:
            return tool_error("mcp_tool_error", result.text)
        return _capped(encodable(result.text))


def _capped(text: str) -> ToolResult:
    whole = text.encode()
    if len(whole) <= MCP_OUTPUT_CAP_BYTES:
        return ToolResult(content=text)
    half = MCP_OUTPUT_CAP_BYTES // 2
    head = whole[:half].decode(errors="ignore")
    tail = whole[-half:].decode(errors="ignore")
    note = f"\n[... {len(whole) - 2 * half} bytes of the result left out here ...]\n"
    return ToolResult(content=head + note + tail, whole_output=_WholeText(whole))


@dataclass
class _WholeText:
    """A result's whole text, held in memory (a server sent it in one message anyway)."""

    text: bytes

    @property
    def total_bytes(self) -> int:
        return len(self.text)

    def chunks(self) -> Iterator[bytes]:
        yield self.text

    def close(self) -> None:
        self.text = b""
