"""A run's credential routes (the Workspace's ``spec.routes``): held by the egress gateway,
so that the sandbox never holds their secrets. At launch the operator writes the run's routes
(one Secret in the gateway's namespace: each route's URL, headers with their secret values,
and rules; the sandbox the requests must come from; the SHA-256 of a fresh token) and gives
the run each route's URL, with the token in it, in ``PADDOCK_ROUTE_<NAME>``; at the run's end,
and at its deletion, it deletes them. Without a gateway the routes are not there, and the run
says so: their secrets never go into the sandbox instead.

With a gateway, each MCP server of the Workspace with a secret header is reached through a
route of the run's too (``mcp.<skill>``): the sandbox's pod was made without those headers'
Secrets (``render.sandbox``), and the run's ``PADDOCK_MCPURL_<SKILL>``, which each harness's
MCP config reads the server's URL from, is its route to the server. Without a gateway the
headers are in the sandbox's environment, as a policy that refuses secrets there says."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from paddock.agentruns import gateway_secrets
from paddock.agentruns.decide import Ending
from paddock.agentruns.model_access import EXPIRY_MARGIN, ModelGateway
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.common import SecretRef
from paddock.api.fields import parse_duration
from paddock.api.reasons import RunReason as R
from paddock.api.skills import McpHeader, Skill
from paddock.api.workspace import HttpRoute, WorkspaceSpec
from paddock.render import credential_routes as routes_format
from paddock.render.credential_routes import ROUTES_OF_LABEL, CredentialRoute, Rule, RunRoutes
from paddock.render.model_routes import token_digest
from paddock.render.projections import mcp_url_env, mcp_url_value

Obj = dict[str, Any]


@dataclass(frozen=True)
class Routed:
    """What the run is given of its routes: env (each route's URL) and its CredentialRoutes
    condition (status, reason, message); none of either when its Workspace names no route."""

    env: dict[str, str] = field(default_factory=dict)
    condition: tuple[bool, R, str] | None = None
    held: bool = False  # the gateway holds the MCP servers' secret headers


def held_mcp(workspace: WorkspaceSpec) -> list[Skill]:
    """The Workspace's MCP servers with a secret header: a gateway's to hold."""
    return [
        skill
        for skill in workspace.skills
        if skill.mcp is not None and any(h.secret_key_ref for h in skill.mcp.headers)
    ]


def grant(
    run: Obj,
    spec: AgentRunSpec,
    sandbox: ReadySandbox,
    workspace: WorkspaceSpec,
    gateway: ModelGateway | None,
    now: datetime,
    values: dict[SecretRef, str],
) -> Routed | Ending:
    """The run's routes, written now (``values``: the Secrets' values the routes' headers
    name); the run's end when their Secret is another's."""
    servers = held_mcp(workspace)
    # Every MCP server's URL, as its harness config reads it: the server's own, or the run's
    # route to it (below). (A pod made before it had its URL in its env has none.)
    direct = {mcp_url_env(s.name): mcp_url_value(str(s.mcp.url)) for s in workspace.skills if s.mcp}
    if not workspace.routes and (gateway is None or not servers):
        return Routed(direct)
    names = ", ".join(route.name for route in workspace.routes)
    if gateway is None:
        said = (
            f"No egress gateway serves credential routes: the Workspace's routes ({names}) are "
            "not there for this run, and their secrets are not in the sandbox either."
        )
        return Routed(direct, (False, R.ROUTES_UNSERVED, said))
    names = ", ".join(
        [*(r.name for r in workspace.routes), *(f"MCP server {s.name}" for s in servers)]
    )
    meta = run["metadata"]
    namespace, uid = str(meta["namespace"]), str(meta["uid"])
    token = "paddock-" + secrets.token_urlsafe(32)
    lifetime = parse_duration(spec.timeout) + EXPIRY_MARGIN
    held = RunRoutes(
        token_sha256=token_digest(token),
        run=f"{namespace}/{meta['name']}",
        sandbox=f"{namespace}/{sandbox.name}",
        expires=now + lifetime,
        routes=(
            *(_route(route, values) for route in workspace.routes),
            *(_mcp_route(skill, values) for skill in servers),
        ),
        uid=uid,
    )
    secret = routes_format.routes_secret(gateway.namespace, uid, held)
    taken = gateway_secrets.write_own(secret, ROUTES_OF_LABEL, uid, "credential routes")
    if taken:
        return Ending(RunPhase.FAILED, R.ROUTES_UNSERVED, taken)
    env = _urls(gateway.url, token, workspace, servers)
    said = (
        f"The egress gateway holds the secrets of the Workspace's routes ({names}); the run "
        f"reaches them at {', '.join(sorted(env))}."
    )
    return Routed(direct | env, (True, R.THROUGH_GATEWAY, said), held=bool(servers))


def _urls(
    gateway: str, token: str, workspace: WorkspaceSpec, servers: list[Skill]
) -> dict[str, str]:
    """Each route's URL, with the run's token, in the variable the run reads it from."""
    env = {
        routes_format.route_env(route.name): routes_format.route_url(gateway, token, route.name)
        for route in workspace.routes
    }
    env |= {
        mcp_url_env(skill.name): mcp_url_value(
            routes_format.mcp_route_url(gateway, token, skill.name, str(skill.mcp.url))
        )
        for skill in servers
        if skill.mcp is not None
    }
    return env


def _route(route: HttpRoute, values: dict[SecretRef, str]) -> CredentialRoute:
    """The route as the gateway holds it: each header's value resolved (a Secret's not found
    is sent empty: the API refuses it, and nothing else of the Secret is said)."""
    headers, masked = _headers(route.headers, values)
    rules = tuple(Rule(tuple(r.methods), tuple(r.paths)) for r in route.allow)
    return CredentialRoute(route.name, str(route.url), tuple(headers), rules, tuple(masked))


def _mcp_route(skill: Skill, values: dict[SecretRef, str]) -> CredentialRoute:
    """An MCP server's route: its headers, to the server's one path (streamable HTTP)."""
    assert skill.mcp is not None
    upstream, under, query = routes_format.mcp_upstream(str(skill.mcp.url))
    headers, masked = _headers(skill.mcp.headers, values)
    rules = (Rule(routes_format.MCP_METHODS, (under,)),)
    name = routes_format.MCP_ROUTE_PREFIX + skill.name
    return CredentialRoute(name, upstream, tuple(headers), rules, tuple(masked), (under, query))


def _headers(
    given: list[McpHeader], values: dict[SecretRef, str]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The headers with their values resolved, and the secret values among them."""
    headers, masked = [], []
    for header in given:
        ref = header.secret_key_ref
        value = str(header.value if ref is None else values.get(ref.pair, ""))
        headers.append((header.name, f"Bearer {value}" if header.bearer else value))
        if ref is not None and value:
            masked.append(value)
    return headers, masked


def routed(status: Obj) -> bool:
    """Whether the run's status says it was given routes (its CredentialRoutes condition)."""
    conditions = status.get("conditions") or []
    return any(
        c.get("type") == "CredentialRoutes" and c.get("status") == "True" for c in conditions
    )


def revoke(run_uid: str, gateway: ModelGateway | None, held: bool = True) -> None:
    """Delete the run's routes, if it has them (``held``: it was given them): only a Secret
    labelled as this run's."""
    if gateway is None or not run_uid or not held:
        return
    name = routes_format.secret_name(run_uid)
    gateway_secrets.delete_own(gateway.namespace, name, ROUTES_OF_LABEL, run_uid)
