"""Chapter 9's part of a session: the configured MCP servers started once, their tools
made, a warning line for each server that did not start, and every server stopped when
the session closes."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import orjson

from agent_tutorial.config import Settings
from agent_tutorial.core.mcp_servers import ServerStatus
from agent_tutorial.core.sandbox import SandboxPolicy
from agent_tutorial.core.tools import ToolDefinition
from agent_tutorial.features.mcp_tools import mcp_tools, tool_name
from agent_tutorial.profiles import Capability, ChapterProfile
from agent_tutorial.project import Project


@dataclass(frozen=True)
class McpSession:
    """The session's servers as they started, and the tools the agent gets from them."""

    statuses: tuple[ServerStatus, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()

    def started(self) -> list[dict[str, str]]:
        """Each server the session tried to start, as stream-json's init names it."""
        return [
            {"name": status.name, "status": status.state}
            for status in self.statuses
            if status.state != "disabled"
        ]


def start_mcp_servers(
    settings: Settings,
    project: Project,
    profile: ChapterProfile,
    opened: ExitStack,
    warn: Callable[[str], None],
    sandbox: SandboxPolicy | None = None,
) -> McpSession:
    """The servers of `settings` (a chapter with MCP only), stopped with `opened`; stdio
    servers run in `sandbox` (the session's, as bash's commands) unless their entry opts
    out."""
    if Capability.MCP not in profile or not settings.mcp_servers:
        return McpSession()
    from agent_tutorial.adapters.mcp_client import McpServers  # the SDK: ~1 s to import

    servers = McpServers.start(settings.mcp_servers, project.workspace, sandbox)
    opened.callback(servers.close)
    for status in servers.statuses:
        if status.state == "failed":
            warn(f"MCP server {status.name!r} did not start: {status.error}; going on without it")
    return McpSession(servers.statuses, tuple(mcp_tools(servers.statuses, servers)))


def tool_mapping(status: ServerStatus) -> list[tuple[str, str]]:
    """Each tool of a server with the name the model sees it by."""
    return [(tool.name, tool_name(status.name, tool.name)) for tool in status.tools]


def mcp_schema_text(tools: tuple[ToolDefinition, ...]) -> str:
    """How many MCP tools the session has and the bytes their schemas add to every request
    (counted in the fixed part of the window, with the built-in tools')."""
    size = sum(len(orjson.dumps(tool.spec().to_wire())) for tool in tools)
    return f"{len(tools)} tool(s), {size:,} bytes of schemas in every request"


def list_servers(
    settings: Settings, project: Project, sandbox: SandboxPolicy | None
) -> tuple[ServerStatus, ...]:
    """Each configured server started (a stdio one in `sandbox`, as a session would), asked
    for its tools and stopped again: what `mcp list` shows, with no session and no model."""
    if not settings.mcp_servers:
        return ()
    from agent_tutorial.adapters.mcp_client import McpServers

    servers = McpServers.start(settings.mcp_servers, project.workspace, sandbox)
    try:
        return servers.statuses
    finally:
        servers.close()


def describe_servers(statuses: tuple[ServerStatus, ...]) -> list[str]:
    """One line per server (its state, its tool count or why it failed), then one per
    tool with the name the model sees it by."""
    if not statuses:
        return ["no MCP servers configured ([mcp_servers.NAME] in config.toml, or .mcp.json)"]
    lines: list[str] = []
    for status in statuses:
        if status.state == "connected":
            lines.append(f"{status.name}: connected, {len(status.tools)} tool(s)")
        elif status.state == "failed":
            lines.append(f"{status.name}: failed: {status.error}")
        else:
            lines.append(f"{status.name}: disabled")
        lines += [f"  {model_name}  ({tool})" for tool, model_name in tool_mapping(status)]
    return lines


def servers_record(statuses: tuple[ServerStatus, ...]) -> list[dict[str, object]]:
    """The servers as JSON: name, status, error, and each tool with its model name."""
    return [
        {
            "name": status.name,
            "status": status.state,
            "error": status.error,
            "tools": [
                {
                    "name": tool.name,
                    "model_name": tool_name(status.name, tool.name),
                    "description": tool.description,
                }
                for tool in status.tools
            ],
        }
        for status in statuses
    ]
