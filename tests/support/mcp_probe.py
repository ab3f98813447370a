"""A small MCP server (the official SDK's, over streamable HTTP) with one tool of a name no CLI
has, for tests that check a CLI connected to a Workspace's MCP server: the tool then appears
among the tools the CLI offers its model. Every call of it is recorded."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

from support.waiting import wait_for

TOOL = "count_quokkas"


@contextmanager
def serve(host: str, seen: list[dict[str, str]] | None = None) -> Iterator[str]:
    """Serve on ``host`` (a free port); yields the server's URL (``.../mcp``). ``seen``: each
    request's headers (lower-case names) are appended to it."""
    server = MCPServer("probe")

    def count_quokkas(island: str) -> str:
        """How many quokkas live on an island."""
        return f"{len(island)} quokkas on {island}"

    server.add_tool(count_quokkas, name=TOOL)
    app = server.streamable_http_app(host=host)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and seen is not None:
            seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await app(scope, receive, send)

    config = uvicorn.Config(recording, host=host, port=0, log_level="warning")
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: running.started, 30, what="the MCP probe server started")
        port = running.servers[0].sockets[0].getsockname()[1]
        yield f"http://{host}:{port}/mcp"
    finally:
        running.should_exit = True
        thread.join(timeout=10)
