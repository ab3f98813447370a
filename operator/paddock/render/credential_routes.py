"""The credential routes the egress gateway serves: one Secret per run whose Workspace names
routes (``spec.routes``), in the gateway's namespace, made by the operator at the run's launch
and deleted at its end. It holds, for each route, where it goes, the headers the gateway adds
(their secret values resolved) and the rules of what passes; and the run, the sandbox the
requests must come from, when the routes expire and the SHA-256 of the run's token (the token
itself is only in the run's environment, in each route's URL).

A route's URL, as the run gets it, is ``GATEWAY/_route/TOKEN/NAME``: a request to that + PATH
goes to the route's ``url`` + PATH. This module is the one place the Secret's format and the
URL are written and read, and where a request is matched to a rule. Pure."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from paddock.times import format_time, parse_time
from paddock.vocab.names import MANAGED_BY

Obj = dict[str, Any]
ROUTES_OF_LABEL = "paddock.dev/routes-of"  # the run's uid: the gateway lists by this label
PREFIX = "/_route/"  # the gateway's path of the routes, on its model route's listener


# An MCP server's route is named mcp.<skill> (a route of spec.routes has no dot) and lets
# through what streamable HTTP sends to the server's one path: messages (POST), the server's
# own stream (GET) and the session's end (DELETE).
MCP_ROUTE_PREFIX = "mcp."
MCP_METHODS = ("GET", "POST", "DELETE")


def secret_name(run_uid: str) -> str:
    return f"paddock-routes-{run_uid}"


def route_env(name: str) -> str:
    """The run's variable holding a route's URL."""
    return "PADDOCK_ROUTE_" + name.upper().replace("-", "_")


def route_url(gateway: str, token: str, name: str) -> str:
    return f"{gateway.rstrip('/')}{PREFIX}{token}/{name}"


def mcp_upstream(url: str) -> tuple[str, str, str]:
    """An MCP server's URL as a route: the route's upstream (the URL without its last path
    segment), the one path under it the route lets through (that segment), and the query."""
    parts = urlsplit(url)
    base, _, last = (parts.path or "/").rpartition("/")
    return f"{parts.scheme}://{parts.netloc}{base}", f"/{last}", parts.query


def mcp_route_url(gateway: str, token: str, skill: str, url: str) -> str:
    """What a run's MCP config reaches the server ``skill`` at: its route, and the path and
    query of the server's URL under it."""
    _, under, query = mcp_upstream(url)
    return (
        route_url(gateway, token, MCP_ROUTE_PREFIX + skill) + under + (f"?{query}" if query else "")
    )


@dataclass(frozen=True)
class Rule:
    methods: tuple[str, ...]
    paths: tuple[str, ...]

    @cached_property
    def patterns(self) -> tuple[list[str], ...]:
        return tuple([p for p in re.split(r"(\*\*|\*)", path) if p] for path in self.paths)

    def allows(self, method: str, path: str) -> bool:
        return method in self.methods and any(matches(p, path) for p in self.patterns)


def matches(parts: list[str], path: str) -> bool:
    """Whether ``path`` matches a pattern cut into its parts: ``**`` any text, ``*`` any text
    without a /, anything else itself. The positions of the path the parts so far can end at
    are kept as the bits of one integer, so that each part costs a few operations on it (and
    a literal part one scan of the path), never backtracking."""
    n = len(path)
    ends = 1  # bit i: the parts so far can end at position i
    segments = [*(i for i, c in enumerate(path) if c == "/"), n] if "*" in parts else []
    for part in parts:
        if part == "**":
            ends = ((1 << (n + 1)) - 1) & ~((ends & -ends) - 1)  # from the first end on
        elif part == "*":
            reached, start = 0, 0
            for stop in segments:  # each end reaches up to the next / (or the path's end)
                inside = ends & (((1 << (stop + 1)) - 1) & ~((1 << start) - 1))
                if inside:
                    reached |= ((1 << (stop + 1)) - 1) & ~((inside & -inside) - 1)
                start = stop + 1
            ends = reached
        else:
            found, at = 0, path.find(part)
            while at >= 0:
                found |= 1 << at
                at = path.find(part, at + 1)
            ends = (ends & found) << len(part)
        if not ends:
            return False
    return bool(ends >> n & 1)


@dataclass(frozen=True)
class CredentialRoute:
    """One route: ``upstream`` (scheme://host[:port][/base]), the headers added to what
    ``rules`` let through."""

    name: str
    upstream: str
    headers: tuple[tuple[str, str], ...]
    rules: tuple[Rule, ...]
    secrets: tuple[str, ...] = ()  # the secret values in the headers: masked in answers
    # An MCP server's route: the one path and query it lets through, as they are (the rules
    # then judge the method only): its URL's, whatever wildcard or scope they could hold.
    exact: tuple[str, str] | None = None

    def allows(self, method: str, path: str, query: str = "") -> bool:
        if self.exact is not None:
            methods = {m for rule in self.rules for m in rule.methods}
            return method in methods and (path, query) == self.exact
        return any(rule.allows(method, path) for rule in self.rules)


@dataclass(frozen=True)
class RunRoutes:
    """A run's routes: requests with the token of digest ``token_sha256``, from a pod of
    ``sandbox`` (NAMESPACE/NAME), until ``expires``."""

    token_sha256: str
    run: str
    sandbox: str
    expires: datetime
    routes: tuple[CredentialRoute, ...]
    uid: str = ""

    def named(self, name: str) -> CredentialRoute | None:
        return next((route for route in self.routes if route.name == name), None)


def routes_secret(namespace: str, run_uid: str, routes: RunRoutes) -> Obj:
    document = {
        "token-sha256": routes.token_sha256,
        "run": routes.run,
        "sandbox": routes.sandbox,
        "expires": format_time(routes.expires),
        "routes": [
            {
                "name": route.name,
                "upstream": route.upstream,
                "headers": [list(pair) for pair in route.headers],
                "secrets": list(route.secrets),
                **({"exact": list(route.exact)} if route.exact is not None else {}),
                "rules": [
                    {"methods": list(r.methods), "paths": list(r.paths)} for r in route.rules
                ],
            }
            for route in routes.routes
        ],
    }
    encoded = base64.b64encode(json.dumps(document, sort_keys=True).encode()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(run_uid),
            "namespace": namespace,
            "labels": {**MANAGED_BY, ROUTES_OF_LABEL: run_uid},
        },
        "type": "Opaque",
        "data": {"routes": encoded},
    }


def _exact(given: Any) -> tuple[str, str] | None:
    if given is None:
        return None
    path, query = given  # (a list of another length is no whole Secret: ValueError)
    return str(path), str(query)


def read_routes(secret: Obj) -> RunRoutes | None:
    """The routes a Secret holds; None when it is not a whole one."""
    meta = secret.get("metadata") or {}
    try:
        document = json.loads(base64.b64decode((secret.get("data") or {})["routes"], validate=True))
        expires = parse_time(document["expires"])
        routes = tuple(
            CredentialRoute(
                name=str(route["name"]),
                upstream=str(route["upstream"]),
                headers=tuple((str(k), str(v)) for k, v in route["headers"]),
                rules=tuple(
                    Rule(tuple(map(str, r["methods"])), tuple(map(str, r["paths"])))
                    for r in route["rules"]
                ),
                # (without the list, every header's value is masked: none is shown unmasked)
                secrets=tuple(map(str, route.get("secrets", [v for _, v in route["headers"]]))),
                exact=_exact(route.get("exact")),
            )
            for route in document["routes"]
        )
        found = RunRoutes(
            token_sha256=str(document["token-sha256"]),
            run=str(document["run"]),
            sandbox=str(document["sandbox"]),
            expires=expires,  # type: ignore[arg-type]
            routes=routes,
            uid=str((meta.get("labels") or {}).get(ROUTES_OF_LABEL, "")),
        )
    except (KeyError, TypeError, ValueError, binascii.Error):
        return None
    return found if expires is not None else None
