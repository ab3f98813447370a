"""Where a run's model key would be, and who refuses it there: every place that would put a
model key in the sandbox (a modelKey no gateway holds, a secret under a name an agent CLI
reads its key from, the run's or its Workspace's) is named, and a policy's
``modelKey.inSandbox: refuse`` or the operator's PADDOCK_MODEL_KEY_IN_SANDBOX=refuse ends the
run before it starts, saying what to change. (The operator ends such a run on the local control
plane in tests/integration/test_agentrun.py; the chart turns the setting on with its gateway.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paddock.agentruns.asking import Asking
from paddock.agentruns.sandbox import PolicyChoice, ReadySandbox
from paddock.agentruns.start import Context, StartWorld, may_start
from paddock.api.agentrun import AgentRunSpec
from paddock.api.policy import SandboxPolicySpec
from paddock.api.reasons import RunReason as R
from paddock.api.workspace import WorkspaceSpec
from paddock.policy import model_keys
from paddock.settings import OperatorSettings

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
KEY = {"secretKeyRef": {"name": "llm", "key": "key"}}


def _secret(name: str, source: str = "llm") -> dict[str, Any]:
    return {"name": name, "secretKeyRef": {"name": source, "key": "key"}}


# The Secrets' values: "copy" holds the same key as "llm" (the modelKey's) under another name.
VALUES = {("llm", "key"): "sk-model", ("copy", "key"): "sk-model", ("gh", "key"): "ghp",
          ("npm", "key"): "npm"}  # fmt: skip


def _run(**fields: Any) -> AgentRunSpec:
    base = {"sandboxRef": {"name": "box"}, "harness": "claude-code", "prompt": "p"}
    return AgentRunSpec.model_validate(base | fields)


@pytest.mark.parametrize(
    ("run", "workspace", "routed", "found"),
    [
        ({"modelKey": KEY}, {}, True, []),
        ({"modelKey": KEY}, {}, False, ["the run's modelKey, which no egress gateway holds"]),
        ({"secrets": [_secret("ANTHROPIC_API_KEY")]}, {}, True,
         ["the run's secret ANTHROPIC_API_KEY"]),
        ({"secrets": [_secret("OPENAI_API_KEY")]}, {}, True, ["the run's secret OPENAI_API_KEY"]),
        ({"secrets": [_secret("openrouter_api_key")]}, {}, True,  # the case of a name aside
         ["the run's secret openrouter_api_key"]),
        ({}, {"secrets": [_secret("GEMINI_API_KEY")]}, True,
         ["Workspace app's secret GEMINI_API_KEY"]),
        ({}, {"secrets": [_secret("AWS_BEARER_TOKEN_BEDROCK")]}, True,
         ["Workspace app's secret AWS_BEARER_TOKEN_BEDROCK"]),
        # Not a model key: another secret.
        ({"secrets": [_secret("GITHUB_TOKEN", "gh")]}, {"secrets": [_secret("NPM_TOKEN", "npm")]},
         False, []),
        ({"modelKey": KEY, "secrets": [_secret("ANTHROPIC_AUTH_TOKEN")]},
         {"secrets": [_secret("GOOGLE_API_KEY")]}, False,
         ["the run's modelKey, which no egress gateway holds",
          "the run's secret ANTHROPIC_AUTH_TOKEN", "Workspace app's secret GOOGLE_API_KEY"]),
        # The modelKey's own Secret key, or its value, under any other name or as a header.
        ({"modelKey": KEY, "secrets": [_secret("MODEL")]}, {}, True,
         ["the run's secret MODEL, which holds the run's model key"]),
        ({"modelKey": KEY, "secrets": [_secret("COPY", "copy")]}, {}, True,
         ["the run's secret COPY, which holds the run's model key"]),
        ({"modelKey": KEY}, {"skills": [{"name": "tools", "mcp": {
            "url": "https://mcp.example/mcp",
            "headers": [{"name": "X-Key", "secretKeyRef": {"name": "llm", "key": "key"}}]}}]},
         True, ["Workspace app's Secret llm key key, which holds the run's model key"]),
    ],
)  # fmt: skip
def test_every_place_that_would_put_a_model_key_in_the_sandbox_is_named(
    run: dict[str, Any], workspace: dict[str, Any], routed: bool, found: list[str]
) -> None:
    spec, ws = _run(**run), WorkspaceSpec.model_validate(workspace)
    exposed = model_keys.exposures(spec, ws, "app", None)
    assert model_keys.placements(spec, exposed, routed, VALUES) == found


def test_the_secrets_a_sandboxs_pod_started_with_count_as_the_sandboxs() -> None:
    """A Workspace whose key was taken out since: the pod still holds what it started with."""
    pod = {"spec": {"containers": [{"name": "sandbox", "env": [
        {"name": "HOME", "value": "/home/paddock"},
        {"name": "ANTHROPIC_API_KEY", "valueFrom": {"secretKeyRef": {"name": "old", "key": "k"}}},
        {"name": "PADDOCK_MCP_0_H0", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "key"}}},
    ]}]}}  # fmt: skip
    spec = _run(modelKey=KEY)
    exposed = model_keys.exposures(spec, WorkspaceSpec(), "app", pod)
    assert model_keys.placements(spec, exposed, True, VALUES) == [
        "the sandbox's pod's env ANTHROPIC_API_KEY",
        "the sandbox's pod's env PADDOCK_MCP_0_H0, which holds the run's model key",
    ]


def test_a_key_in_the_sandbox_is_refused_by_the_policy_or_by_the_operator_alone() -> None:
    found = ["the run's secret ANTHROPIC_API_KEY"]
    assert model_keys.refusal(found, None, False) is None
    assert model_keys.refusal([], "team/strict", True) is None
    by_policy = model_keys.refusal(found, "team/strict", False)
    assert by_policy is not None
    assert "the run's secret ANTHROPIC_API_KEY" in by_policy
    assert "policy team/strict (modelKey.inSandbox: refuse)" in by_policy
    assert "spec.modelKey" in by_policy
    assert "gateway.enabled" in by_policy
    by_operator = model_keys.refusal(found, None, True)
    assert by_operator is not None
    assert "PADDOCK_MODEL_KEY_IN_SANDBOX=refuse" in by_operator


def _under(name: str, refuse: str, refuse_keys: bool = False) -> Any:
    """Whether a run without a modelKey (its key is in the Workspace's env) may start in a
    sandbox of policy ``name`` whose modelKey.inSandbox is ``refuse``."""
    policy = SandboxPolicySpec.model_validate({"modelKey": {"inSandbox": refuse}})
    workspace = WorkspaceSpec.model_validate({"secrets": [_secret("ANTHROPIC_API_KEY")]})
    pod = {"metadata": {"name": "box"}, "spec": {"containers": [{"name": "sandbox"}]}}
    world = StartWorld("team-keys", workspace=workspace, policy=policy, pod=pod)
    box = ReadySandbox("box", "box", "app", policy=PolicyChoice(name=name))
    context = Context(Asking([], {}, NOW, timedelta(minutes=5)), NOW, True, refuse_keys)
    return may_start(world, _run(), box, policy, context)[1]


def test_a_run_under_a_refusing_policy_or_operator_ends_before_it_starts() -> None:
    held = _under("strict", "refuse")
    assert held is not None
    assert held.reason == R.KEY_IN_SANDBOX_REFUSED
    assert "Workspace app's secret ANTHROPIC_API_KEY" in held.message
    # A policy that allows it yields to the operator's refusal, never the other way.
    assert _under("lax", "allow") is None
    held = _under("lax", "allow", refuse_keys=True)
    assert held is not None
    assert held.reason == R.KEY_IN_SANDBOX_REFUSED
    assert "PADDOCK_MODEL_KEY_IN_SANDBOX" in held.message


def test_the_operator_allows_keys_in_sandboxes_unless_told() -> None:
    assert OperatorSettings().model_key_in_sandbox == "allow"
    told = OperatorSettings.model_validate({"model_key_in_sandbox": "refuse"})
    assert told.model_key_in_sandbox == "refuse"
