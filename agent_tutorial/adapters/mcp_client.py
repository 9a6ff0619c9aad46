"""Chapter 9's client of MCP servers, over the `mcp` SDK: it starts the configured servers
in parallel, lists their tools, calls them, restarts a crashed stdio server once, and
stops them all when the session ends.

The SDK is asynchronous and the agent is not: every server's connection lives as a task
on one event loop in a background thread, and the agent waits on that loop's futures with
its own timeouts. Closing the session closes each connection: a sandboxed server's PID
namespace ends with the server, and an unconfined one runs under `server_keeper`, which ends
whatever the server started, as bash's commands are ended.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO, cast

import anyio
import httpx2
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, CallToolResult, TextContent
from pydantic import ValidationError

from agent_tutorial.adapters.sandbox_launch import launch_argv
from agent_tutorial.adapters.server_keeper import keeper_argv
from agent_tutorial.core.mcp_servers import (
    McpCallError,
    McpCallResult,
    McpServerConfig,
    McpTool,
    ServerStatus,
)
from agent_tutorial.core.sandbox import SandboxPolicy

_ERROR_TAIL_BYTES = 400
_CLOSE_WAIT_S = 5.0

# What a server that dies, is not there, or speaks nonsense raises out of the SDK; its task
# groups wrap a dead process's stream errors in an ExceptionGroup.
_SERVER_FAILURES = (
    OSError,
    MCPError,
    ValidationError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
    httpx2.HTTPError,
    ExceptionGroup,
)


def _error_file() -> TextIO:
    # Closed by `McpServers.close`, with the connection it belongs to.
    return cast(TextIO, tempfile.TemporaryFile("w+"))


@dataclass
class _Connection:
    """One server's live connection: the task holding it open and its session."""

    config: McpServerConfig
    workspace: Path
    sandbox: SandboxPolicy | None
    """The sandbox a stdio server runs in; None: unconfined."""
    session: ClientSession | None = None
    task: Future[None] | None = None
    running: asyncio.Task[None] | None = None
    """The task holding the connection open, once it runs (cancelled to end it early)."""
    stop: asyncio.Event | None = None
    restarted: bool = False
    errors: TextIO = field(default_factory=_error_file)
    """Where the server's standard error goes: its last line explains a failed start."""

    def error_tail(self) -> str:
        """The last lines the server wrote to its standard error, if any."""
        self.errors.flush()
        self.errors.seek(0, os.SEEK_END)
        size = self.errors.tell()
        self.errors.seek(max(size - _ERROR_TAIL_BYTES, 0))
        lines = [line for line in self.errors.read().splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""


class McpServers:
    """The session's MCP servers: started by `start`, ended by `close`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self._loop = loop
        self._thread = thread
        self._connections: dict[str, _Connection] = {}
        self.statuses: tuple[ServerStatus, ...] = ()

    @classmethod
    def start(
        cls,
        servers: Mapping[str, McpServerConfig],
        workspace: Path,
        sandbox: SandboxPolicy | None = None,
    ) -> McpServers:
        """Every enabled server started at once, each within its start-up timeout; a server
        that does not start is `failed`, with why, and the others go on. A stdio server runs
        confined by `sandbox` unless its entry says `sandbox = "off"` or `network = true`."""
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=_run_until_stopped, args=(loop,), name="mcp-client")
        thread.daemon = True  # an interrupted session must still be able to exit
        thread.start()
        client = cls(loop, thread)
        started_at = time.monotonic()  # each server's timeout counts from here, not its turn
        pending = {
            name: client._open(name, config, workspace, sandbox)
            for name, config in servers.items()
            if config.enabled
        }
        client.statuses = tuple(
            client._status_of(name, config, pending.get(name), started_at)
            for name, config in servers.items()
        )
        return client

    def _open(
        self, name: str, config: McpServerConfig, workspace: Path, sandbox: SandboxPolicy | None
    ) -> Future[tuple[McpTool, ...]]:
        confined = (
            sandbox if sandbox is not None and sandbox.confined and config.sandboxed else None
        )
        connection = _Connection(config, workspace, confined)
        self._connections[name] = connection
        return self._launch(connection)

    def _launch(self, connection: _Connection) -> Future[tuple[McpTool, ...]]:
        ready: Future[tuple[McpTool, ...]] = Future()
        connection.task = asyncio.run_coroutine_threadsafe(
            self._serve(connection, ready), self._loop
        )
        return ready

    def _status_of(
        self,
        name: str,
        config: McpServerConfig,
        ready: Future[tuple[McpTool, ...]] | None,
        started_at: float,
    ) -> ServerStatus:
        if ready is None:
            return ServerStatus(name, "disabled", tool_timeout_s=config.tool_timeout_s)
        left_s = max(started_at + config.startup_timeout_s - time.monotonic(), 0.0)
        try:
            tools = ready.result(timeout=left_s)
        except FutureTimeout:
            self._end(name)
            error = f"did not start within {config.startup_timeout_s:g} s"
            return ServerStatus(name, "failed", error=error, tool_timeout_s=config.tool_timeout_s)
        except McpCallError as error:
            return ServerStatus(
                name, "failed", error=str(error), tool_timeout_s=config.tool_timeout_s
            )
        return ServerStatus(name, "connected", tools, tool_timeout_s=config.tool_timeout_s)

    async def _serve(self, connection: _Connection, ready: Future[tuple[McpTool, ...]]) -> None:
        """Open the connection, list the tools, then hold it open until asked to stop."""
        connection.stop = asyncio.Event()
        connection.running = asyncio.current_task()
        stop = connection.stop
        session: ClientSession | None = None
        try:
            async with AsyncExitStack() as stack:
                session = await _connect(connection, stack)
                listed = await session.list_tools()
                connection.session = session
                ready.set_result(tuple(_tool_of(tool) for tool in listed.tools))
                await stop.wait()
        except _SERVER_FAILURES as error:
            if not ready.done():
                ready.set_exception(McpCallError(_describe(error, connection)))
        finally:
            if connection.session is session:  # not a restarted connection's own
                connection.session = None

    def call(self, server: str, tool: str, arguments: Mapping[str, Any]) -> McpCallResult:
        """Call `tool` of `server`; `McpCallError` if it times out or the server is gone (a
        stdio server that crashed is restarted once, here, before the call)."""
        connection = self._connections[server]
        session = connection.session or self._restarted(server, connection)
        timeout = connection.config.tool_timeout_s
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(tool, dict(arguments)), self._loop
        )
        try:
            result = future.result(timeout=timeout)
        except FutureTimeout:
            future.cancel()
            raise McpCallError(f"the call timed out after {timeout:g} s") from None
        except MCPError as error:
            if error.error.code == CONNECTION_CLOSED:
                self._forget(connection)
            raise McpCallError(f"the server failed: {_describe(error, connection)}") from None
        except _SERVER_FAILURES as error:
            self._forget(connection)
            raise McpCallError(f"the server failed: {_describe(error, connection)}") from None
        return McpCallResult(_text_of(result), bool(result.is_error))

    def _forget(self, connection: _Connection) -> None:
        """A connection that broke: end what is left of it, so the next call restarts it."""
        connection.session = None
        if connection.stop is not None:
            self._loop.call_soon_threadsafe(connection.stop.set)

    def _restarted(self, server: str, connection: _Connection) -> ClientSession:
        """A new connection to a stdio server that crashed, once per session. An HTTP
        server runs on its own: the session does not reconnect to one that went away."""
        if connection.config.transport != "stdio":
            raise McpCallError(
                f"the server {server!r} closed the connection, and an HTTP server is not "
                "reconnected during a session (a new session connects again)"
            )
        if connection.restarted:
            tail = connection.error_tail()
            raise McpCallError(
                f"the server {server!r} is not running" + (f" ({tail})" if tail else "")
            )
        connection.restarted = True
        ready = self._launch(connection)
        try:
            ready.result(timeout=connection.config.startup_timeout_s)
        except (FutureTimeout, McpCallError) as error:
            raise McpCallError(
                f"the server {server!r} crashed and did not restart: {error}"
            ) from None
        if connection.session is None:
            raise McpCallError(f"the server {server!r} crashed and did not restart")
        return connection.session

    def _end(self, name: str) -> None:
        """Cancel a server that did not start in time (its process ends in the cleanup)."""
        connection = self._connections[name]
        if connection.running is not None:
            self._loop.call_soon_threadsafe(connection.running.cancel)

    def close(self) -> None:
        """Stop every server and the event loop; the servers' processes end with them."""
        ending = asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop)
        try:
            ending.result(timeout=2 * _CLOSE_WAIT_S)
        except FutureTimeout:
            ending.cancel()
        for connection in self._connections.values():
            connection.errors.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_CLOSE_WAIT_S)

    async def _stop_all(self) -> None:
        """Ask each connection to end, then wait for its task (the transport's own cleanup
        ends the process tree); a task still at work after the wait is cancelled."""
        for connection in self._connections.values():
            if connection.stop is not None:
                connection.stop.set()
        running = [c.running for c in self._connections.values() if c.running is not None]
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=_CLOSE_WAIT_S)
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=_CLOSE_WAIT_S)


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    try:
        loop.run_forever()
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


async def _connect(connection: _Connection, stack: AsyncExitStack) -> ClientSession:
    config = connection.config
    if config.command is not None:
        argv, cwd = [config.command, *config.args], Path(config.cwd or connection.workspace)
        if connection.sandbox is not None:  # its PID namespace ends with the server
            sandbox = replace(connection.sandbox, visible=what_a_server_runs(argv, cwd))
            argv = launch_argv(sandbox, argv)
        else:  # the keeper ends what the server leaves behind
            argv = keeper_argv(argv)
        parameters = StdioServerParameters(
            command=argv[0], args=argv[1:], env=dict(config.env) or None, cwd=cwd
        )
        read, write = await stack.enter_async_context(
            stdio_client(parameters, errlog=connection.errors)
        )
    else:
        assert config.url is not None  # the configuration gives one of the two
        client = httpx2.AsyncClient(headers=_headers(config))
        await stack.enter_async_context(client)
        read, write = await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def what_a_server_runs(argv: list[str], cwd: Path) -> tuple[Path, ...]:
    """What a stdio server's command needs to see in the sandbox wherever it lies: its
    executable (as named and as linked to), the virtual environment that holds it, and the
    folder of each argument that names an existing file from `cwd` (its script)."""
    found: list[Path] = []
    executable = shutil.which(argv[0])
    if executable is not None:
        named = Path(executable).absolute()
        found += [named.parent, named.resolve().parent]
        environment = named.parent.parent
        if (environment / "pyvenv.cfg").is_file():
            found.append(environment)
    for argument in argv[1:]:
        path = (cwd / argument).absolute()
        if _is_file(path):
            found.append(path.parent)
    return tuple(dict.fromkeys(found))


def _is_file(path: Path) -> bool:
    """Whether `path` names a file; False for an argument that cannot be a path at all
    (`-c` with a script longer than a name may be, a NUL byte)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _headers(config: McpServerConfig) -> dict[str, str]:
    headers = dict(config.headers)
    if config.bearer_token_env_var:
        token = os.environ.get(config.bearer_token_env_var, "")
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _tool_of(tool: Any) -> McpTool:
    return McpTool(tool.name, tool.description or "", dict(tool.input_schema or {}))


def _text_of(result: CallToolResult) -> str:
    """A result's content as text: text blocks as they are, other blocks by their kind."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        else:
            parts.append(f"[{block.type} content]")
    return "\n".join(parts)


def _describe(error: BaseException, connection: _Connection) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error) or type(error).__name__
    tail = connection.error_tail()
    return f"{text} ({tail})" if tail and tail not in text else text


def tool_names(statuses: Sequence[ServerStatus]) -> tuple[str, ...]:
    """Each connected server's tools as `server/tool`, for messages."""
    return tuple(f"{s.name}/{t.name}" for s in statuses for t in s.tools)
