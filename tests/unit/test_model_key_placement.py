"""Where a run's model key would be, and who refuses it there: every place that would put a
model key in the sandbox (a modelKey no gateway holds, a secret under a name an agent CLI
reads its key from, the run's or its Workspace's) is named, and a policy's
``modelKey.inSandbox: refuse`` or the operator's PADDOCK_MODEL_KEY_IN_SANDBOX=refuse ends the
run before it starts, saying what to change. (The operator ends such a run on the local control
plane in tests/integration/test_agentrun.py; the chart turns the setting on with its gateway.)"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from paddock.agentruns import spending
from paddock.agentruns.sandbox import PolicyChoice, ReadySandbox
from paddock.api.agentrun import AgentRunSpec
from paddock.api.reasons import RunReason as R
from paddock.api.workspace import WorkspaceSpec
from paddock.kube.cache import CACHE
from paddock.policy import model_keys
from paddock.settings import OperatorSettings

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
KEY = {"secretKeyRef": {"name": "llm", "key": "key"}}


def _secret(name: str) -> dict[str, Any]:
    return {"name": name, "secretKeyRef": {"name": "llm", "key": "key"}}


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
        ({}, {"secrets": [_secret("GEMINI_API_KEY")]}, True,
         ["Workspace app's secret GEMINI_API_KEY"]),
        ({}, {"secrets": [_secret("CLAUDE_CODE_OAUTH_TOKEN")]}, True,
         ["Workspace app's secret CLAUDE_CODE_OAUTH_TOKEN"]),
        ({}, {"secrets": [_secret("CODEX_API_KEY")]}, True,
         ["Workspace app's secret CODEX_API_KEY"]),
        # Not a model key: another secret.
        ({"secrets": [_secret("GITHUB_TOKEN")]}, {"secrets": [_secret("NPM_TOKEN")]}, False, []),
        ({"modelKey": KEY, "secrets": [_secret("ANTHROPIC_AUTH_TOKEN")]},
         {"secrets": [_secret("GOOGLE_API_KEY")]}, False,
         ["the run's modelKey, which no egress gateway holds",
          "the run's secret ANTHROPIC_AUTH_TOKEN", "Workspace app's secret GOOGLE_API_KEY"]),
    ],
)  # fmt: skip
def test_every_place_that_would_put_a_model_key_in_the_sandbox_is_named(
    run: dict[str, Any], workspace: dict[str, Any], routed: bool, found: list[str]
) -> None:
    spec, ws = _run(**run), WorkspaceSpec.model_validate(workspace)
    assert model_keys.placements(spec, ws, "app", routed) == found


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


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPolicy",
        "metadata": {"name": name, "namespace": "team-keys", "resourceVersion": "1"},
        "spec": spec,
    }  # fmt: skip


def test_a_run_under_a_refusing_policy_or_operator_ends_before_it_starts() -> None:
    strict = _policy("strict", {"modelKey": {"inSandbox": "refuse"}})
    lax = _policy("lax", {"modelKey": {"inSandbox": "allow"}})
    workspace = {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "Workspace",
        "metadata": {"name": "app", "namespace": "team-keys", "resourceVersion": "1"},
        "spec": {"secrets": [_secret("ANTHROPIC_API_KEY")]},
    }  # fmt: skip
    for obj in (strict, lax, workspace):
        CACHE.seen("ADDED", obj)
    try:
        under = {name: ReadySandbox("box", "box", "app", policy=PolicyChoice(name=name))
                 for name in ("strict", "lax")}  # fmt: skip
        routed = _run(modelKey=KEY)
        _, held = spending.may_start("team-keys", routed, under["strict"], True, NOW)
        assert held is not None
        assert held.reason == R.KEY_IN_SANDBOX_REFUSED
        assert "Workspace app's secret ANTHROPIC_API_KEY" in held.message
        # A policy that allows it yields to the operator's refusal, never the other way.
        assert spending.may_start("team-keys", routed, under["lax"], True, NOW)[1] is None
        _, held = spending.may_start("team-keys", routed, under["lax"], True, NOW, True)
        assert held is not None
        assert held.reason == R.KEY_IN_SANDBOX_REFUSED
        assert "PADDOCK_MODEL_KEY_IN_SANDBOX" in held.message
    finally:
        for obj in (strict, lax, workspace):
            CACHE.seen("DELETED", obj)


def test_the_operator_allows_keys_in_sandboxes_unless_told() -> None:
    assert OperatorSettings().model_key_in_sandbox == "allow"
    told = OperatorSettings.model_validate({"model_key_in_sandbox": "refuse"})
    assert told.model_key_in_sandbox == "refuse"
