"""Serving an ASGI app (the MCP server's, the console's) on an address bound before the app is
built, so that the URL it announces, and prints, is the one it listens at (port 0: any free
one, which no other process can take in between)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any

GRACEFUL_STOP_SECONDS = 10  # a client holding a connection open must not hold up a stop


def serve(
    label: str,
    http: str,
    tls: tuple[str, str] | None,
    app_at: Callable[[str, str], tuple[Any, str]],
    path: str = "/",
) -> None:
    """Bind ``http`` (HOST:PORT), build the app with ``app_at(host, url)`` (the app and the
    level uvicorn logs at), print ``LABEL: serving URL`` on stderr, and serve it (HTTPS with
    ``tls``, a certificate and its key, PEM files) until stopped."""
    import uvicorn

    host, _, port = http.rpartition(":")
    listener = socket.create_server((host or "127.0.0.1", int(port)))
    bound_host, bound_port = listener.getsockname()[:2]
    url = f"{'https' if tls else 'http'}://{bound_host}:{bound_port}{path}"
    app, log_level = app_at(bound_host, url)
    print(f"{label}: serving {url}", file=sys.stderr, flush=True)
    certificate, key = tls or (None, None)
    config = uvicorn.Config(
        app,
        ssl_certfile=certificate,
        ssl_keyfile=key,
        log_level=log_level,
        # Kubernetes kills a pod 30 s after asking it to stop.
        timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS,
    )
    uvicorn.Server(config).run(sockets=[listener])
