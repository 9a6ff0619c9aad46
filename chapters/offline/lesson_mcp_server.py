"""A small MCP server for `make lesson N=9`: standard library only, stdio, one JSON-RPC
message per line. Its one tool, `define`, looks a term up in a short glossary."""

from __future__ import annotations

import json
import sys
from typing import Any

GLOSSARY = {
    "mcp": "Model Context Protocol: how an agent finds and calls tools that live in another "
    "process, over stdio or HTTP.",
    "json-rpc": "JSON-RPC 2.0: requests with an id and a method, answers with the same id "
    "and a result or an error; notifications have no id and get no answer.",
    "stdio": "The server's standard input and output: the client writes one JSON message "
    "per line to one and reads the answers from the other.",
}
DEFINE = {
    "name": "define",
    "description": "Look up a term (MCP, JSON-RPC, stdio) in the lesson's glossary.",
    "inputSchema": {
        "type": "object",
        "properties": {"term": {"type": "string"}},
        "required": ["term"],
    },
}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The result of one request (an error for a method or tool this server lacks)."""
    method, params = request.get("method"), request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "glossary", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [DEFINE]}
    if method == "tools/call" and params.get("name") == "define":
        term = str(params.get("arguments", {}).get("term", ""))
        text = GLOSSARY.get(term.lower())
        if text is None:
            known = ", ".join(sorted(GLOSSARY))
            return {
                "content": [{"type": "text", "text": f"no entry for {term!r}; known: {known}"}],
                "isError": True,
            }
        return {"content": [{"type": "text", "text": text}]}
    raise LookupError(f"no method {method!r}" if method != "tools/call" else "no such tool")


def main() -> int:
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification (notifications/initialized): no answer
        try:
            reply = {"result": answer(request)}
        except LookupError as error:
            reply = {"error": {"code": -32601, "message": str(error)}}
        print(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
