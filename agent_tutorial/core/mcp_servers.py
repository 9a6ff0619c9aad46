"""What a user writes to add an MCP server (`[mcp_servers.NAME]` in config.toml, or an
entry of `.mcp.json`): a value the configuration validates once and the client reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

STARTUP_TIMEOUT_S = 10.0
"""How long a server may take to start and list its tools, unless its entry says."""
TOOL_TIMEOUT_S = 60.0
"""How long one call of a server's tool may take, unless its entry says."""
_MAX_TIMEOUT_S = 86_400.0


class McpServerConfig(BaseModel):
    """One MCP server: a command speaking JSON-RPC on its standard streams (stdio), or
    the URL of a streamable HTTP endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    command: str | None = None
    """The program of a stdio server (looked up on PATH)."""
    args: tuple[str, ...] = ()
    """Its arguments."""
    env: dict[str, str] = {}
    """Variables added to its environment."""
    cwd: str | None = None
    """The folder it starts in; unset: the workspace."""
    url: str | None = None
    """A streamable HTTP server's endpoint (instead of `command`)."""
    bearer_token_env_var: str | None = None
    """The environment variable holding the bearer token sent to `url`."""
    headers: dict[str, str] = {}
    """Headers sent to `url` (`.mcp.json`'s shape)."""
    startup_timeout_s: float = Field(
        STARTUP_TIMEOUT_S,
        gt=0,
        le=_MAX_TIMEOUT_S,
        validation_alias=AliasChoices("startup_timeout_s", "startup_timeout_sec"),
    )
    """Seconds to start and list tools (Codex's `startup_timeout_sec` is an alias)."""
    tool_timeout_s: float = Field(
        TOOL_TIMEOUT_S,
        gt=0,
        le=_MAX_TIMEOUT_S,
        validation_alias=AliasChoices("tool_timeout_s", "tool_timeout_sec"),
    )
    """Seconds one tool call may take (Codex's `tool_timeout_sec` is an alias)."""
    enabled: bool = True
    """False: the server is configured but not started."""
    sandbox: Literal["on", "off"] = "on"
    """"off": a stdio server runs outside the session's sandbox."""
    network: bool = False
    """True: a stdio server runs outside the sandbox, since it needs the network."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (an HTTP server)")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def sandboxed(self) -> bool:
        """Whether a stdio server runs under the session's sandbox."""
        return self.sandbox == "on" and not self.network


ServerState = Literal["connected", "failed", "disabled"]


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool a server lists: its name, description and JSON schema as the server gave."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A configured server as the session found it."""

    name: str
    state: ServerState
    tools: tuple[McpTool, ...] = ()
    error: str | None = None
    tool_timeout_s: float = 60.0


@dataclass(frozen=True, slots=True)
class McpCallResult:
    """What a call returned: the text of its content and whether the server said error."""

    text: str
    is_error: bool


class McpCallError(Exception):
    """A call that did not return: it timed out, or the server is gone."""
