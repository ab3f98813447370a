"""Credential routes, their pure parts: the rules' path patterns, the route's URL as the gateway
reads it, the Secret's format, the headers forwarded, and what the operator grants a run."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from paddock.agentruns import credential_access
from paddock.agentruns.model_access import ModelGateway
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.gateway.credentials import parts, reachable_from, upstream_headers
from paddock.gateway.squid import ALWAYS_INTERNAL
from paddock.render.credential_routes import (
    CredentialRoute,
    Rule,
    RunRoutes,
    read_routes,
    route_env,
    routes_secret,
)
from paddock.render.workspace_hash import workspace_hash

RULES = {
    ("/v1/things/*", "/v1/things/7"): True,
    ("/v1/things/*", "/v1/things/7/more"): False,
    ("/v1/things/*", "/v1/things/"): True,
    ("/repos/**", "/repos/a/b/c"): True,
    ("/repos/**", "/repos"): False,
    ("/repos/**/pulls", "/repos/a/b/pulls"): True,
    ("/repos/**/pulls", "/repos/a/b/pulls/1"): False,
    ("/a.b", "/aXb"): False,  # the dot is itself
    ("/exact", "/exact"): True,
    ("/exact", "/exact/"): False,
}


def _reference(pattern: str, path: str) -> bool:
    """The pattern as a regular expression (backtracking: for short paths only)."""
    parts = re.split(r"(\*\*|\*)", pattern)
    text = "".join(".*" if p == "**" else "[^/]*" if p == "*" else re.escape(p) for p in parts)
    return re.fullmatch(text, path) is not None


def test_the_patterns_match_as_their_regular_expressions_do() -> None:
    pick = random.Random(59)
    for _ in range(3000):
        pattern = "/" + "".join(pick.choice(["a", "b", "/", "*", "**"]) for _ in range(6))
        path = "/" + "".join(pick.choice("ab/") for _ in range(pick.randint(0, 8)))
        assert Rule(("GET",), (pattern,)).allows("GET", path) is _reference(pattern, path), (
            pattern, path)  # fmt: skip


def test_a_hostile_pattern_takes_no_backtracking() -> None:
    """Eight wildcards against a long path: decided in steps of parts x path."""
    path = "/" + "a" * 4000
    for pattern in ("/**a**a**a**a**a**a**a**b", "/*a*a*a*a*a*a*a*b"):
        assert not Rule(("GET",), (pattern,)).allows("GET", path)


@pytest.mark.parametrize(("pattern", "path"), RULES)
def test_a_rules_path_patterns(pattern: str, path: str) -> None:
    assert Rule(("GET",), (pattern,)).allows("GET", path) is RULES[(pattern, path)]
    assert not Rule(("POST",), (pattern,)).allows("GET", path)


PARTS = {
    b"/_route/tok/api/v1/x": ("tok", "api", "/v1/x"),
    b"/_route/tok/api": ("tok", "api", "/"),
    b"/_route/tok/api/": ("tok", "api", "/"),
    b"/_route/tok": None,
    b"/_route//api/x": None,
    b"/_route/tok/api/%2e%2e/x": None,
    b"/_route/tok/api/a%2Fb": None,
    b"/v1/messages": None,
}


@pytest.mark.parametrize("raw", PARTS)
def test_a_routes_url_as_the_gateway_reads_it(raw: bytes) -> None:
    assert parts(raw) == PARTS[raw]


def test_the_secret_holds_the_routes_whole_and_nothing_else_reads_as_them() -> None:
    route = CredentialRoute("api", "https://api.example.com/v1", (("X-Key", "s3cret"),),
                            (Rule(("GET", "POST"), ("/a/**",)),))  # fmt: skip
    held = RunRoutes("digest", "team/r", "team/box", datetime(2026, 12, 7, tzinfo=UTC), (route,),
                     uid="u1")  # fmt: skip
    secret = routes_secret("gw", "u1", held)
    assert secret["metadata"]["labels"]["paddock.dev/routes-of"] == "u1"
    assert read_routes(secret) == held
    assert read_routes({"metadata": {}, "data": {"routes": "bm90IGpzb24="}}) is None
    assert read_routes({"metadata": {}, "data": {}}) is None


def test_forwarded_headers_drop_the_runs_credentials_and_those_the_route_sets() -> None:
    route = CredentialRoute("api", "https://x", (("X-Key", "s3cret"),), ())
    sent = [("Authorization", "Bearer mine"), ("x-key", "forged"), ("Cookie", "c=1"),
            ("Connection", "close"), ("Accept", "application/json")]  # fmt: skip
    assert upstream_headers(route, sent) == [
        ("Accept", "application/json"), ("X-Key", "s3cret"), ("accept-encoding", "identity"),
    ]  # fmt: skip


WORKSPACE = WorkspaceSpec.model_validate({"routes": [{
    "name": "the-api", "url": "https://api.example.com",
    "headers": [{"name": "Authorization", "bearer": True,
                 "secretKeyRef": {"name": "api", "key": "token"}},
                {"name": "X-Team", "value": "blue"}],
    "allow": [{"methods": ["GET"], "paths": ["/**"]}],
}]})  # fmt: skip
RUN = {"metadata": {"name": "r", "namespace": "team", "uid": "u1"}}
SPEC = AgentRunSpec.model_validate({"sandboxRef": {"name": "box"}, "harness": "command",
                                    "command": "true"})  # fmt: skip
NOW = datetime(2026, 12, 7, tzinfo=UTC)


def test_without_a_gateway_a_run_gets_no_route_and_no_secret_and_says_so() -> None:
    granted = credential_access.grant(RUN, SPEC, ReadySandbox("box", "p", "ws"), WORKSPACE, None,
                                      NOW, {("api", "token"): "s3cret"})  # fmt: skip
    assert isinstance(granted, credential_access.Routed)
    assert granted.env == {}
    assert granted.condition is not None
    assert granted.condition[:2] == (False, "NoGateway")
    assert "the-api" in granted.condition[2]
    assert "s3cret" not in granted.condition[2]


MCP_WORKSPACE = WorkspaceSpec.model_validate({"skills": [
    {"name": "docs", "mcp": {"url": "https://mcp.example.com/v1/mcp?team=blue", "headers": [
        {"name": "Authorization", "secretKeyRef": {"name": "mcp", "key": "token"}, "bearer": True},
        {"name": "X-Team", "value": "blue"}]}},
    {"name": "open", "mcp": {"url": "https://open.example.com/mcp"}},
    {"name": "wild", "mcp": {"url": "https://w.example.com/v1/**", "headers": [
        {"name": "X-Key", "secretKeyRef": {"name": "mcp", "key": "token"}}]}},
]})  # fmt: skip


def test_an_mcp_servers_secret_header_is_the_gateways_and_the_run_reaches_it_by_a_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[dict[str, Any]] = []  # (the Secret the operator would write: read back below)
    monkeypatch.setattr(credential_access.gateway_secrets, "write_own",
                        lambda secret, *_: written.append(secret))  # fmt: skip
    gateway = ModelGateway("http://gw:8081", "gw")
    granted = credential_access.grant(RUN, SPEC, ReadySandbox("box", "p", "ws"), MCP_WORKSPACE,
                                      gateway, NOW, {("mcp", "token"): "s3cret"})  # fmt: skip
    assert isinstance(granted, credential_access.Routed)
    assert granted.held
    token = granted.env["PADDOCK_MCPURL_DOCS"].split("/_route/")[1].split("/")[0]
    assert granted.env == {
        "PADDOCK_MCPURL_DOCS": f"http://gw:8081/_route/{token}/mcp.docs/mcp?team=blue",
        "PADDOCK_MCPURL_OPEN": "https://open.example.com/mcp",  # no secret header: direct
        "PADDOCK_MCPURL_WILD": f"http://gw:8081/_route/{token}/mcp.wild/**",
    }
    assert granted.condition is not None
    assert granted.condition[:2] == (True, "ThroughGateway")
    assert "MCP server docs" in granted.condition[2]
    # The route the gateway holds: the server's URL without its last segment, that one path,
    # the headers with the secret's value (masked in answers).
    (secret,) = written
    held = read_routes(secret)
    assert held is not None
    route, wild = held.routes
    assert (route.name, route.upstream) == ("mcp.docs", "https://mcp.example.com/v1")
    assert route.headers == (("Authorization", "Bearer s3cret"), ("X-Team", "blue"))
    assert route.secrets == ("s3cret",)
    # The server's one path and its own query, as they are; no other.
    for method in ("POST", "GET", "DELETE"):
        assert route.allows(method, "/mcp", "team=blue")
    assert not route.allows("POST", "/mcp", "team=red")  # a scope of the agent's choosing
    assert not route.allows("POST", "/mcp", "")
    assert not route.allows("POST", "/mcp/more", "team=blue")
    assert not route.allows("PUT", "/mcp", "team=blue")
    assert wild.allows("POST", "/**")  # a wildcard in the URL is itself, not a pattern
    assert not wild.allows("POST", "/admin/users")
    # Without a gateway, the header is in the sandbox, as before: nothing to route.
    unrouted = credential_access.grant(RUN, SPEC, ReadySandbox("box", "p", "ws"), MCP_WORKSPACE,
                                       None, NOW, {})  # fmt: skip
    assert unrouted == credential_access.Routed({
        "PADDOCK_MCPURL_DOCS": "https://mcp.example.com/v1/mcp?team=blue",
        "PADDOCK_MCPURL_OPEN": "https://open.example.com/mcp",
        "PADDOCK_MCPURL_WILD": "https://w.example.com/v1/**",
    })  # fmt: skip


def test_skills_whose_variables_would_be_the_same_are_refused() -> None:
    """One would take the other's value: a secret header sent to another server."""
    mcp = {"url": "https://a.example.com/mcp"}
    for skills in (
        [{"name": "a-b", "mcp": mcp}, {"name": "a--b", "mcp": mcp}],
        [{"name": "a", "mcp": {**mcp, "headers": [{"name": "b-x", "value": "1"}]}},
         {"name": "a-b", "mcp": {**mcp, "headers": [{"name": "x", "value": "2"}]}}],
        [{"name": "docs", "mcp": mcp}, {"name": "docs", "file": {"path": "f", "content": ""}}],
    ):  # fmt: skip
        with pytest.raises(ValueError, match=r"apart|own"):
            WorkspaceSpec.model_validate({"skills": skills})


def test_a_workspace_without_routes_gives_nothing() -> None:
    gateway = ModelGateway("http://gw:8081", "gw")
    granted = credential_access.grant(RUN, SPEC, ReadySandbox("box", "p", "ws"), WorkspaceSpec(),
                                      gateway, NOW, {})  # fmt: skip
    assert granted == credential_access.Routed()
    assert route_env("the-api") == "PADDOCK_ROUTE_THE_API"


ADDRESSES = {
    "8.8.8.8": True,
    "2001:4860:4860::8888": True,
    "192.0.2.10": True,  # vouched for
    "10.0.0.1": False,
    "100.64.1.1": False,  # shared address space: not global
    "::ffff:10.0.0.1": False,  # IPv4-mapped
    "::ffff:169.254.169.254": False,
    "64:ff9b::a9fe:a9fe": False,  # NAT64 of 169.254.169.254
    "2002:a00:1::1": False,  # 6to4 of 10.0.0.1
    "2001:0:4136:e378:8000:63bf:f5ff:fffe": False,  # Teredo
    "127.0.0.1": False,
    "::1": False,
    "fe80::1%eth0": False,
    "203.0.113.9": False,  # documentation range, and in the cluster's ranges here
    "fec0::1": False,  # site-local
    "64:ff9b:1::a9fe:a9fe": False,  # local-use NAT64
    "::10.0.0.1": False,  # IPv4-compatible
    "::ffff:0:a00:1": False,  # SIIT
}


@pytest.mark.parametrize("address", ADDRESSES)
def test_a_route_reaches_no_internal_address_however_it_is_written(address: str) -> None:
    reachable = reachable_from(lambda: (*ALWAYS_INTERNAL, "203.0.113.0/24"), ("192.0.2.10/32",))
    assert reachable(address) is ADDRESSES[address]


def test_routes_change_nothing_of_a_prepared_workspace_so_not_its_hash() -> None:
    without = WorkspaceSpec.model_validate({"setup": ["make deps"]})
    routed = WorkspaceSpec.model_validate(
        {"setup": ["make deps"], "routes": WORKSPACE.to_api()["routes"]}
    )
    changed = WorkspaceSpec.model_validate({"setup": ["make other"]})
    assert workspace_hash(routed, "img") == workspace_hash(without, "img")
    assert workspace_hash(changed, "img") != workspace_hash(without, "img")
