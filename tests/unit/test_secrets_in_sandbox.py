"""What puts a secret value in a sandbox's environment, for a policy that refuses it there."""

from __future__ import annotations

from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.policy import secrets_in_sandbox

REF = {"name": "s", "key": "k"}
WORKSPACE = WorkspaceSpec.model_validate({
    "source": {"git": {"url": "https://example.com/r.git", "secretRef": REF}},
    "secrets": [{"name": "DB_PASSWORD", "secretKeyRef": REF}],
    "skills": [{"name": "docs", "mcp": {"url": "https://mcp.example.com", "headers": [
        {"name": "Authorization", "secretKeyRef": REF, "bearer": True},
        {"name": "X-Team", "value": "blue"}]}}],
    "routes": [{"name": "api", "url": "https://api.example.com",
                "allow": [{"methods": ["GET"], "paths": ["/**"]}],
                "headers": [{"name": "X-Key", "secretKeyRef": REF}]}],
})  # fmt: skip


def _run(**spec: Any) -> AgentRunSpec:
    return AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "box"}, "harness": "claude-code", "prompt": "hi", **spec}
    )


def test_a_workspaces_variables_and_mcp_headers_are_in_the_sandbox_not_its_clone_or_routes() -> (
    None
):
    assert secrets_in_sandbox.of_workspace(WORKSPACE) == [
        "the Workspace's secret DB_PASSWORD",
        "the secret header Authorization of the MCP server docs",
    ]
    only_routes = WorkspaceSpec.model_validate({"routes": WORKSPACE.to_api()["routes"]})
    assert secrets_in_sandbox.of_workspace(only_routes) == []
    # Where a gateway serves routes, the MCP server's secret header is the gateway's.
    assert secrets_in_sandbox.of_workspace(WORKSPACE, gateway=True) == [
        "the Workspace's secret DB_PASSWORD"
    ]
    # A run without a model key of the gateway's: its MCP headers are the gateway's all the same.
    assert secrets_in_sandbox.of_run(_run(), WORKSPACE, False, None, held=True) == [
        "the Workspace's secret DB_PASSWORD"
    ]


def test_a_run_adds_its_own_an_unrouted_model_key_and_what_its_pod_started_with() -> None:
    spec = _run(secrets=[{"name": "TOKEN", "secretKeyRef": REF}], modelKey={"secretKeyRef": REF})
    pod = {"spec": {"containers": [{"env": [
        {"name": "OLD", "valueFrom": {"secretKeyRef": REF}},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": REF}},
        {"name": "PLAIN", "value": "x"}]}]}}  # fmt: skip
    found = secrets_in_sandbox.of_run(spec, WorkspaceSpec(), False, pod)
    assert found == [
        "the run's secret TOKEN",
        "the run's modelKey, which no egress gateway holds",
        "the sandbox's pod's env OLD, as it started",
        "the sandbox's pod's env DB_PASSWORD, as it started",
    ]
    routed = secrets_in_sandbox.of_run(
        _run(modelKey={"secretKeyRef": REF}), WorkspaceSpec(), True, None
    )
    assert routed == []


def test_the_refusal_names_the_policy_what_is_refused_and_what_to_route_instead() -> None:
    assert secrets_in_sandbox.refusal([], "team/p") is None
    said = secrets_in_sandbox.refusal(["the run's secret TOKEN"], "team/p")
    assert said is not None
    assert "policy team/p (secrets.inSandbox: refuse)" in said
    assert "the run's secret TOKEN" in said
    assert "spec.routes" in said
    assert "spec.modelKey" in said


def test_the_operator_refuses_them_whatever_the_policy_says() -> None:
    found = ["the run's secret TOKEN"]
    assert secrets_in_sandbox.refusal(found, None) is None
    said = secrets_in_sandbox.refusal(found, None, operator=True)
    assert said is not None
    assert "PADDOCK_SECRETS_IN_SANDBOX=refuse" in said
    assert "policy.secretsInSandbox" in said
