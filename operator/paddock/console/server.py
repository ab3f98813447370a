"""``paddock console``: the console served over HTTP (HTTPS with a certificate)."""

from __future__ import annotations

from typing import Any

from paddock import serving


def serve(
    namespace: str, http: str, tls: tuple[str, str] | None = None, external_url: str | None = None
) -> None:
    """Serve the console at ``http`` (HOST:PORT, port 0 for any free one); with ``tls`` (a
    certificate and its key, PEM files), over HTTPS, so that tokens never cross the network in
    the clear (and the sign-in cookie is sent over HTTPS only). ``external_url``: the address
    people reach it at, the one host name it answers to besides loopback and IP addresses."""
    from paddock.console.app import build

    def app_at(host: str, url: str) -> tuple[Any, str]:
        app = build(namespace, secure_cookie=tls is not None, external_url=external_url)
        return app, "warning"

    serving.serve("paddock console", http, tls, app_at)
