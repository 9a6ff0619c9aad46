"""A small MCP server over stdio, written with the SDK, for chapter 9's tests: tools that
answer, fail, take long, send a large result, or end the server's process.

Run as `python tests/mcp_fixtures/tiny_server.py` (stdio) or with `--http PORT`
(streamable HTTP at 127.0.0.1:PORT/mcp). `crash` leaves a `crashed-once` file and
`slow` a `slow-started` one in the folder the server runs in, for the tests to wait on.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("tiny")


@server.tool()
def echo(text: str) -> str:
    """Return the text given."""
    return f"echo: {text}"


@server.tool()
def fail(reason: str) -> str:
    """Fail with the reason given."""
    raise ValueError(reason)


@server.tool()
def big(size: int) -> str:
    """Return `size` characters: BEGIN, then dots, then END."""
    return "BEGIN" + "." * max(size - 8, 0) + "END"


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer (a `slow-started` file says the sleep began)."""
    Path("slow-started").write_text(str(os.getpid()))
    time.sleep(seconds)
    return "slept"


@server.tool()
def crash() -> str:
    """End the server's process at once, without an answer."""
    Path("crashed-once").write_text(str(os.getpid()))
    os._exit(3)


@server.tool()
def write(path: str, text: str) -> str:
    """Write `text` to the file at `path`."""
    Path(path).write_text(text)
    return f"wrote {path}"


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:  # streamable HTTP on 127.0.0.1:PORT/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
