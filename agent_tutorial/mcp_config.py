"""MCP servers as configured: `[mcp_servers.NAME]` tables of a config.toml, checked where
they are read so an error names the file, and a project's `.mcp.json` (Claude Code's
shape) read into the same table. A project's servers are powerful settings: the files
their commands name inside the project are hashed by folder trust, as hook scripts are."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from agent_tutorial.adapters.hook_scripts import script_digests, scripts_of
from agent_tutorial.core.errors import EXIT_USAGE, AgentTutorialError
from agent_tutorial.core.mcp_servers import McpServerConfig

MCP_JSON = ".mcp.json"
SERVERS_SETTING = "mcp_servers"
SERVER_FILE_SETTING = "mcp server file"
"""How a file an MCP server's command names is shown among the powerful settings."""
_HTTP_TYPES = frozenset({"http", "streamable-http"})


class McpConfigError(AgentTutorialError):
    """An MCP server entry is invalid (exit code 2); the message names the file and key."""

    exit_code = EXIT_USAGE


def check_mcp_servers(
    table: Any, source: Path, table_name: str = "mcp_servers"
) -> dict[str, McpServerConfig]:
    """The `mcp_servers` table of `source`, validated; `McpConfigError` naming the key."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise McpConfigError(f"invalid configuration in {source}: {table_name} must be a table")
    return {
        name: _one_server(f"{table_name}.{name}", entry, source) for name, entry in table.items()
    }


def _one_server(name: str, entry: Any, source: Path) -> McpServerConfig:
    try:
        return McpServerConfig.model_validate(entry)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        key = name + (f".{where}" if where else "")
        raise McpConfigError(
            f"invalid configuration in {source}: {key}: {problem['msg']}"
        ) from None


def with_mcp_json(toml: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """The project's config.toml with the servers of `.mcp.json` (if any) added to its
    `mcp_servers`, each stdio server started in the project root (or its `cwd` taken from
    there); a name defined in both, or an invalid entry, is `McpConfigError`."""
    source = root / MCP_JSON
    project_toml = dict(toml)
    check_mcp_servers(project_toml.get("mcp_servers"), root / ".agent_tutorial" / "config.toml")
    servers = dict(project_toml.get("mcp_servers") or {})
    from_json = _read_mcp_json(source)
    for name in from_json:
        if name in servers:
            raise McpConfigError(
                f"invalid configuration in {source}: mcpServers.{name} is also defined in "
                "the project's config.toml"
            )
    if servers or from_json:
        merged = {**servers, **from_json}
        project_toml["mcp_servers"] = {name: _rooted(e, root) for name, e in merged.items()}
    return project_toml


def _rooted(entry: dict[str, Any], root: Path) -> dict[str, Any]:
    """A project's stdio server runs where its files were resolved for folder trust, the
    project root, whatever folder the session starts in (as hooks run there)."""
    if "command" not in entry:
        return entry
    return {**entry, "cwd": str(root / str(entry.get("cwd") or ""))}


def _read_mcp_json(source: Path) -> dict[str, Any]:
    try:
        data = orjson.loads(source.read_bytes())
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise McpConfigError(f"cannot read {source}: {error.strerror or error}") from None
    except orjson.JSONDecodeError as error:
        raise McpConfigError(f"invalid configuration in {source}: not JSON: {error}") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f"invalid configuration in {source}: mcpServers must be an object")
    entries = {name: _as_toml_entry(name, entry, source) for name, entry in servers.items()}
    check_mcp_servers(entries, source, "mcpServers")
    return entries


def _as_toml_entry(name: str, entry: Any, source: Path) -> dict[str, Any]:
    """Claude Code's entry in this table's shape: its `type` says the transport."""
    if not isinstance(entry, dict):
        raise McpConfigError(f"invalid configuration in {source}: mcpServers.{name}: not an object")
    kind = entry.get("type", "stdio")
    if kind != "stdio" and kind not in _HTTP_TYPES:
        raise McpConfigError(
            f"invalid configuration in {source}: mcpServers.{name}.type: {kind!r} is not "
            "supported (stdio or http)"
        )
    return {key: value for key, value in entry.items() if key != "type"}


def each_server_apart(powerful: Mapping[str, Any]) -> dict[str, Any]:
    """The powerful settings with a project's `mcp_servers` table as one setting per
    server, `mcp_servers.NAME`, in place: folder trust then names each server it leaves
    alone, and which one changed."""
    apart: dict[str, Any] = {}
    for setting, value in powerful.items():
        if setting == SERVERS_SETTING and isinstance(value, dict):
            apart |= {f"{SERVERS_SETTING}.{name}": entry for name, entry in value.items()}
        else:
            apart[setting] = value
    return apart


def describe_server(entry: Any) -> str:
    """What a server entry starts or reaches, for the trust panel: its command line or its
    URL, and whether it runs outside the sandbox."""
    if not isinstance(entry, Mapping):
        return str(entry)
    command = _command_line(entry)
    text = f"runs {command}" if command else f"reaches {entry.get('url')}"
    if command and (entry.get("sandbox") == "off" or entry.get("network") is True):
        text += ", outside the sandbox"
    return text


def trusted_server_files(root: Path, servers: Any) -> dict[str, str]:
    """The project files the project's server commands name, as `mcp server file NAME` →
    digest entries for folder trust to hash and show (a server's script is what runs)."""
    if not isinstance(servers, dict):
        return {}
    commands = [_from_cwd(entry) for entry in servers.values() if isinstance(entry, dict)]
    digests = script_digests(root, scripts_of(root, [line for line in commands if line]))
    return {f"{SERVER_FILE_SETTING} {name}": digest for name, digest in digests.items()}


def unconfined_server_scripts(
    root: Path, workspace: Path, servers: Mapping[str, McpServerConfig], *, confined: bool
) -> tuple[Path, ...]:
    """The project files named by the commands of the stdio servers that run outside the
    sandbox (all of them when the session has none): like hook scripts, no tool or
    sandboxed command may write them during the session, or a rewritten one would run
    unconfined when its server restarts."""
    outside = [
        config
        for config in servers.values()
        if config.enabled and config.command is not None and not (confined and config.sandboxed)
    ]
    return scripts_of(root, [_from_cwd(_as_entry(config, workspace)) for config in outside])


def _as_entry(config: McpServerConfig, workspace: Path) -> dict[str, Any]:
    """A validated stdio server as an entry, with the folder it starts in (the client's
    default: the workspace)."""
    cwd = str(Path(workspace, config.cwd or ""))
    return {"command": config.command, "args": list(config.args), "cwd": cwd}


def _command_line(entry: Mapping[str, Any]) -> str:
    command, args = entry.get("command"), entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list):
        return ""
    return shlex.join([command, *(str(arg) for arg in args)])


def _from_cwd(entry: Mapping[str, Any]) -> str:
    """The command line with each word a path from the folder the server runs in, so a
    file it names is found (and hashed) where the server will open it."""
    line, cwd = _command_line(entry), entry.get("cwd")
    if not line or not isinstance(cwd, str):
        return line
    return shlex.join(str(Path(cwd, word)) for word in shlex.split(line))
