"""The model route's deciding parts: which provider each harness speaks to and how it is pointed
at the gateway, the route's Secret (written by the operator, read by the gateway), which route
a request is on, how a forwarded request is rewritten, and every sandbox's egress to the route.
The route is served for real, against a real upstream, in ``test_model_route_server.py``; each
real CLI completes a run through it on the real node (tests/e2e/test_model_route.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from paddock.api.agentrun import AgentRunSpec
from paddock.api.budget import Budget
from paddock.api.policy import SandboxPolicySpec
from paddock.gateway.endpoints import ENDPOINTS
from paddock.gateway.model import Call, token_of, upstream_request
from paddock.gateway.routes import Refused, Routes
from paddock.harness import codex, models
from paddock.harness.base import WorkspaceContext
from paddock.harness.models import ModelRoute, Provider
from paddock.render.model_routes import Route, read_route, route_secret, token_digest
from paddock.render.network_policy import ClusterNetwork, Gateway, render_network_policy
from paddock.settings import OperatorSettings

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
KEY = {"secretKeyRef": {"name": "llm", "key": "key"}}


def _spec(harness: str, model: str | None = None, **more: Any) -> AgentRunSpec:
    fields = {"harness": harness, "prompt": "go", "sandboxRef": {"name": "box"}, "modelKey": KEY}
    return AgentRunSpec.model_validate(fields | ({"model": model} if model else {}) | more)


@pytest.mark.parametrize(
    ("harness", "model", "provider"),
    [
        ("claude-code", None, Provider.ANTHROPIC),
        ("codex", "gpt-5", Provider.OPENAI),
        ("gemini", None, Provider.GOOGLE),
        ("opencode", "anthropic/claude-sonnet-4-5", Provider.ANTHROPIC),
        ("opencode", "openai/gpt-5", Provider.OPENAI),
    ],
)
def test_each_harness_speaks_to_its_provider(harness: str, model: str, provider: str) -> None:
    assert models.provider_of(_spec(harness, model)) == provider


def test_an_opencode_model_of_another_provider_cannot_be_routed() -> None:
    said = models.provider_of(_spec("opencode", "google/gemini-2.5-pro"))
    assert not isinstance(said, Provider)
    assert "google/gemini-2.5-pro" in said


ROUTE = ModelRoute("http://gw:3130", "paddock-token")


@pytest.mark.parametrize(
    ("harness", "model", "env"),
    [
        ("claude-code", None,
         {"ANTHROPIC_API_KEY": "paddock-token", "ANTHROPIC_BASE_URL": "http://gw:3130"}),
        ("gemini", None,
         {"GEMINI_API_KEY": "paddock-token", "GOOGLE_GEMINI_BASE_URL": "http://gw:3130"}),
        ("opencode", "anthropic/x",
         {"ANTHROPIC_API_KEY": "paddock-token", "ANTHROPIC_BASE_URL": "http://gw:3130/v1"}),
        ("opencode", "openai/x",
         {"OPENAI_API_KEY": "paddock-token", "OPENAI_BASE_URL": "http://gw:3130/v1"}),
        ("codex", None, {"CODEX_API_KEY": "paddock-token"}),
    ],
)  # fmt: skip
def test_the_harness_gets_the_token_and_the_route_never_the_key(
    harness: str, model: str | None, env: dict[str, str]
) -> None:
    spec = _spec(harness, model)
    provider = models.provider_of(spec)
    assert isinstance(provider, Provider)
    assert models.routed_env(spec, provider, ROUTE) == env


def test_codex_is_given_the_route_as_its_provider_by_session_flags() -> None:
    options = models.codex_options("http://gw:3130/v1")
    assert options[:2] == ["-c", 'model_provider="paddock"']
    assert '"base_url" = "http://gw:3130/v1"' in options[3]
    assert '"env_key" = "CODEX_API_KEY"' in options[3]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, None),
        ({"env": [{"name": "OPENAI_BASE_URL", "value": "http://m:1/v1"}]},
         ("http://m:1/v1", "CODEX_API_KEY")),
        ({"env": [{"name": "OPENAI_BASE_URL", "value": "http://m:1/v1"}],
          "secrets": [{"name": "OPENAI_API_KEY", "secretKeyRef": {"name": "s", "key": "k"}}]},
         ("http://m:1/v1", "OPENAI_API_KEY")),
    ],
)  # fmt: skip
def test_a_codex_runs_openai_base_url_is_its_provider_since_codex_reads_no_config_of_its_own(
    fields: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    spec = _spec("codex", None, **fields)
    options = codex.provider_options(spec, WorkspaceContext())
    if expected is None:
        assert options == []
    else:
        assert options == models.codex_options(*expected)
    # The gateway's route, when there is one, comes first.
    routed = codex.provider_options(spec, WorkspaceContext(model_url="http://gw:3130"))
    assert routed == models.codex_options("http://gw:3130/v1")


def test_the_upstream_is_the_runs_base_url_else_the_providers_public_api() -> None:
    assert models.upstream(_spec("claude-code"), Provider.ANTHROPIC) == "https://api.anthropic.com"
    spec = _spec("claude-code", modelKey=KEY | {"baseUrl": "http://models.internal:8080/"})
    assert models.upstream(spec, Provider.ANTHROPIC) == "http://models.internal:8080"


@pytest.mark.parametrize("base_url", ["ftp://x", "http://user@host", "https://x/y?z=1", "x"])
def test_a_base_url_that_is_no_http_api_is_refused(base_url: str) -> None:
    with pytest.raises(ValidationError, match=r"base_?[uU]rl"):
        _spec("claude-code", modelKey=KEY | {"baseUrl": base_url})


def test_a_command_run_has_no_model_key() -> None:
    with pytest.raises(ValidationError, match="modelKey applies to an agent harness"):
        AgentRunSpec.model_validate(
            {"harness": "command", "command": "ls", "sandboxRef": {"name": "b"}, "modelKey": KEY}
        )


def _route(**changes: Any) -> Route:
    fields = {
        "token_sha256": token_digest("paddock-token"),
        "key": "sk-real",
        "upstream": "https://api.anthropic.com",
        "provider": "anthropic",
        "run": "team/r1",
        "sandbox": "team/box",
        "expires": NOW + timedelta(hours=1),
        "uid": "uid-1",
    }
    return Route(**(fields | changes))


def test_the_route_secret_reads_back_as_written_and_holds_no_token() -> None:
    secret = route_secret("paddock-system", "uid-1", _route())
    assert secret["metadata"]["name"] == "paddock-model-uid-1"
    assert secret["metadata"]["labels"]["paddock.dev/model-route-of"] == "uid-1"
    assert read_route(secret) == _route()
    assert "paddock-token" not in str(secret)
    budgeted = _route(budget=Budget(tokens=500, cost_usd=0.25))
    assert read_route(route_secret("paddock-system", "uid-1", budgeted)) == budgeted


def test_a_secret_that_is_not_a_whole_route_is_none() -> None:
    secret = route_secret("paddock-system", "uid-1", _route())
    del secret["data"]["key"]
    assert read_route(secret) is None
    assert read_route({"metadata": {"name": "x"}, "data": {"key": "not base64!"}}) is None


def test_a_request_is_on_its_tokens_route_only_from_its_sandbox_until_it_expires() -> None:
    routes = Routes()
    routes.relisted("Secret", [route_secret("gw", "uid-1", _route())])
    assert routes.find("paddock-token", "team/box", NOW) == _route()
    assert routes.find("paddock-token", "team/other", NOW) == Refused(
        "the token is not for team/other", "team/r1"
    )
    assert routes.find("paddock-token", None, NOW).reason == "the token is not for this address"
    assert routes.find("paddock-other", "team/box", NOW) == Refused("the token is no running run's")
    assert routes.find("", "team/box", NOW).reason == "the request carries no token of a run"
    expired = routes.find("paddock-token", "team/box", NOW + timedelta(hours=2))
    assert expired == Refused("the run's route has expired", "team/r1")
    routes.changed("Secret", "DELETED", route_secret("gw", "uid-1", _route()))
    assert isinstance(routes.find("paddock-token", "team/box", NOW), Refused)
    assert routes.runs() == set()


@pytest.mark.parametrize(
    ("headers", "query", "token"),
    [
        ({"x-api-key": "t1"}, {}, "t1"),
        ({"authorization": "Bearer t2"}, {}, "t2"),
        ({"authorization": "bearer  t3 "}, {}, "t3"),
        ({"x-goog-api-key": "t4"}, {}, "t4"),
        ({}, {"key": "t5"}, "t5"),
        ({"authorization": "Basic abc"}, {}, ""),
        ({}, {}, ""),
    ],
)
def test_the_token_is_read_wherever_a_cli_puts_its_key(
    headers: dict[str, str], query: dict[str, str], token: str
) -> None:
    assert token_of(headers, query) == token


@pytest.mark.parametrize(
    ("provider", "header"),
    [
        ("anthropic", ("x-api-key", "sk-real")),
        ("openai", ("authorization", "Bearer sk-real")),
        ("google", ("x-goog-api-key", "sk-real")),
    ],
)
def test_the_forwarded_request_carries_the_key_and_no_token(
    provider: str, header: tuple[str, str]
) -> None:
    route = _route(provider=provider, upstream="https://models.example:8443/api")
    sent = [("X-Api-Key", "paddock-token"), ("Authorization", "Bearer paddock-token"),
            ("x-goog-api-key", "paddock-token"), ("Host", "gw:3130"), ("Connection", "close"),
            ("anthropic-version", "2023-06-01"), ("content-type", "application/json"),
            ("Accept-Encoding", "gzip, br"), ("Content-Length", "12")]  # fmt: skip
    call = Call(ENDPOINTS["anthropic"][0], "/v1/messages", [("beta", "true")])
    url, headers = upstream_request(route, call, sent)
    assert url == "https://models.example:8443/api/v1/messages?beta=true"
    assert headers == [
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
        ("accept-encoding", "identity"),  # read as it passes, for its usage
        header,
    ]


def _gateway(model_port: int | None) -> Gateway:
    return Gateway(proxy="http://gw:3128", port=3128, model_port=model_port, cidrs=("192.0.2.9",))


@pytest.mark.parametrize(
    ("policy", "ports"),
    [
        ({"capabilities": {"network": "deny"}}, [3130]),
        ({"network": {"hosts": {"allow": ["github.com"]}}}, [3128, 3130]),
    ],
)
def test_every_sandbox_reaches_the_model_route_even_with_the_network_denied(
    policy: dict[str, Any], ports: list[int]
) -> None:
    spec = SandboxPolicySpec.model_validate(policy | {"network": {"dns": False}} | policy)
    cluster = ClusterNetwork(gateway=_gateway(3130))
    egress = render_network_policy("box", "team", spec, cluster)["spec"]["egress"]
    to_gateway = [rule for rule in egress if rule["to"] == [{"ipBlock": {"cidr": "192.0.2.9/32"}}]]
    assert to_gateway == [{"to": to_gateway[0]["to"], "ports": [
        {"protocol": "TCP", "port": port} for port in ports
    ]}]  # fmt: skip
    if policy.get("capabilities"):
        assert len(egress) == 1  # nothing else: the network is denied


def test_the_model_route_setting_needs_the_gateway_and_its_namespace() -> None:
    proxy = {"PADDOCK_GATEWAY_PROXY": "http://gw:3128", "PADDOCK_GATEWAY_CIDRS": "192.0.2.9"}
    url = {"PADDOCK_GATEWAY_MODEL_URL": "http://gw:3130"}
    with pytest.raises(ValidationError, match="gateway_model_url needs"):
        OperatorSettings.from_env(url | proxy)
    settings = OperatorSettings.from_env(url | proxy | {"PADDOCK_GATEWAY_NAMESPACE": "gw"})
    assert settings.gateway.model_url == "http://gw:3130"
