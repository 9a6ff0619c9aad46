"""Chapter 9's part of a session: the configured MCP servers started once, their tools
made, a warning line for each server that did not start, and every server stopped when
the session closes."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

from agent_tutorial.adapters.mcp_client import McpServers, ServerStatus
from agent_tutorial.config import Settings
from agent_tutorial.core.tools import ToolDefinition
from agent_tutorial.features.mcp_tools import mcp_tools, tool_name
from agent_tutorial.profiles import Capability, ChapterProfile
from agent_tutorial.project import Project


@dataclass(frozen=True)
class McpSession:
    """The session's servers as they started, and the tools the agent gets from them."""

    statuses: tuple[ServerStatus, ...] = ()
    tools: tuple[ToolDefinition, ...] = ()

    def tool_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)


def start_mcp_servers(
    settings: Settings,
    project: Project,
    profile: ChapterProfile,
    opened: ExitStack,
    warn: Callable[[str], None],
) -> McpSession:
    """The servers of `settings` (a chapter with MCP only), stopped with `opened`."""
    if Capability.MCP not in profile or not settings.mcp_servers:
        return McpSession()
    servers = McpServers.start(settings.mcp_servers, project.workspace)
    opened.callback(servers.close)
    for status in servers.statuses:
        if status.state == "failed":
            warn(f"MCP server {status.name!r} did not start: {status.error}; going on without it")
    return McpSession(servers.statuses, tuple(mcp_tools(servers.statuses, servers)))


def tool_mapping(status: ServerStatus) -> list[tuple[str, str]]:
    """Each tool of a server with the name the model sees it by."""
    return [(tool.name, tool_name(status.name, tool.name)) for tool in status.tools]
