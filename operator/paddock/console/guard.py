"""Who a console request is from, and whether a decision it posts is the person's own.

A request carries a Kubernetes bearer token: in ``Authorization`` (an authenticating proxy in
front of the console sets it), or in the cookie the sign-in form sets (HttpOnly, so no script
of a page reads it; SameSite=Strict, so no other site's page sends it). The console asks the
API server whose token it is (TokenReview) and acts for that identity only.

A decision (every POST) must carry the form's CSRF token, an HMAC of the words below keyed by
the bearer token's hash: another site cannot compute it without the token, and every replica
of the console computes the same one without sharing a key. Its ``Origin``, when the browser
sends one, must be the console's own, and every request's ``Host`` must name the console
(``host_allowed``). Pure."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

COOKIE = "paddock-token"
CSRF_FIELD = "csrf"
_CSRF_WORDS = b"paddock console: a decision posted from the console's own page"


def bearer(headers: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
    """The request's bearer token: the ``Authorization`` header's, else the sign-in cookie's."""
    scheme, _, token = (headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return cookies.get(COOKIE) or None


def csrf_token(token: str) -> str:
    key = hashlib.sha256(token.encode()).digest()
    return hmac.new(key, _CSRF_WORDS, hashlib.sha256).hexdigest()


def csrf_ok(token: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(csrf_token(token), given)


def same_origin(origin: str | None, scheme: str, host: str | None, own: str | None) -> bool:
    """Whether a POST's ``Origin`` is the console's own: reached at its configured address,
    that address's origin (``own``, so behind a proxy that ends TLS too); reached otherwise,
    the scheme and ``Host`` it was reached at (no Origin: a browser that sends none, where
    the CSRF token alone decides)."""
    if origin is None:
        return True
    if own is not None and (host or "").lower() == own.partition("://")[2].lower():
        return origin == own  # (its plain-HTTP twin is another origin)
    return host is not None and origin == f"{scheme}://{host}"


def host_allowed(host: str | None, own: str | None) -> bool:
    """Whether a request's ``Host`` names this console: the host (and port) of its configured
    address ``own`` (an origin, ``https://console.example.com``), a loopback name or an IP
    address (a port-forward, a probe, a Service's address). Any other name is refused, so
    that a page of another site whose name was made to resolve here (DNS rebinding) is not
    served, and so cannot read a page or its CSRF token."""
    if not host:
        return False
    if own is not None and host.lower() == own.partition("://")[2].lower():
        return True
    name = host.rpartition(":")[0] if host.count(":") == 1 else host
    name = name.removeprefix("[").partition("]")[0] if name.startswith("[") else name
    if name.lower() == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def origin_of(url: str) -> str:
    """The origin of the console's configured address (``--external-url``)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--external-url {url!r} is no http(s) URL")
    default = {"http": 80, "https": 443}[parts.scheme]
    port = "" if parts.port in (None, default) else f":{parts.port}"
    host = parts.hostname.rstrip(".")
    return f"{parts.scheme}://{f'[{host}]' if ':' in host else host}{port}"
