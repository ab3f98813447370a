"""``paddock console``: the console served over HTTP (HTTPS with a certificate), on an address
bound before it starts, so that the URL it prints is the one it listens at."""

from __future__ import annotations

import socket
import sys

GRACEFUL_STOP_SECONDS = 10


def serve(namespace: str, http: str, tls: tuple[str, str] | None = None) -> None:
    """Serve the console at ``http`` (HOST:PORT, port 0 for any free one); with ``tls`` (a
    certificate and its key, PEM files), over HTTPS, so that tokens never cross the network in
    the clear (and the sign-in cookie is sent over HTTPS only)."""
    import uvicorn

    from paddock.console.app import build

    host, _, port = http.rpartition(":")
    listener = socket.create_server((host or "127.0.0.1", int(port)))
    bound_host, bound_port = listener.getsockname()[:2]
    url = f"{'https' if tls else 'http'}://{bound_host}:{bound_port}/"
    print(f"paddock console: serving {url}", file=sys.stderr, flush=True)
    certificate, key = tls or (None, None)
    config = uvicorn.Config(
        build(namespace, secure_cookie=tls is not None),
        ssl_certfile=certificate,
        ssl_keyfile=key,
        log_level="warning",
        # A browser holding a live page open must not hold up a stop.
        timeout_graceful_shutdown=GRACEFUL_STOP_SECONDS,
    )
    uvicorn.Server(config).run(sockets=[listener])
