"""Where a run's model API key would be, decided: the places that would put it in the sandbox
(a ``modelKey`` no egress gateway holds; a secret the sandbox gets under a name an agent CLI
reads a model key from; a secret the sandbox gets that is, or holds the same value as, the
run's modelKey), and the refusal when a policy or the operator's setting keeps keys out of
sandboxes. Pure: the run's start gathers the secrets the sandbox gets (the run's, its
Workspace's as it is now, and its pod's as the pod started) and their values, and acts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.common import SecretRef
from paddock.api.workspace import WorkspaceSpec

# The variables the agent CLIs read a model key from (Claude Code, directly or on Bedrock or
# Foundry; Codex, directly or on Azure; Gemini CLI; OpenCode by provider), compared without
# case: a secret under one of these names is a model key in the sandbox.
KEY_VARIABLES = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_FOUNDRY_API_KEY",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "AZURE_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "GOOGLE_GENERATIVE_AI_API_KEY",
        "OPENROUTER_API_KEY",
        "GROQ_API_KEY",
        "MISTRAL_API_KEY",
        "DEEPSEEK_API_KEY",
        "XAI_API_KEY",
        "TOGETHER_API_KEY",
        "FIREWORKS_API_KEY",
        "CEREBRAS_API_KEY",
        "PERPLEXITY_API_KEY",
        "COHERE_API_KEY",
    }
)
CHANGE = (
    "give the key as the run's spec.modelKey with an egress gateway to hold it (the Helm "
    "chart's gateway.enabled), and take it out of every secret the sandbox gets (a sandbox "
    "whose pod started with it must be started again)"
)


@dataclass(frozen=True)
class Exposure:
    """A secret the sandbox gets: where (said for a person), the variable it is put in (None:
    not a variable, e.g. a clone token), and its Secret reference."""

    where: str
    variable: str | None
    ref: SecretRef


def exposures(
    spec: AgentRunSpec, workspace: WorkspaceSpec, name: str, pod: Mapping[str, Any] | None
) -> list[Exposure]:
    """Every secret the run's sandbox gets: the run's own, its Workspace's (variables, clone
    and skill tokens, MCP headers), and the secret variables its pod started with."""
    found = [Exposure(f"the run's secret {s.name}", s.name, s.secret_key_ref.pair)
             for s in spec.secrets]  # fmt: skip
    named = {s.secret_key_ref.pair: s.name for s in workspace.secrets}
    for ref in workspace.secret_refs():
        variable = named.get(ref)
        said = f"secret {variable}" if variable else f"Secret {ref[0]} key {ref[1]}"
        found.append(Exposure(f"Workspace {name}'s {said}", variable, ref))
    for container in ((pod or {}).get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            selector = (env.get("valueFrom") or {}).get("secretKeyRef")
            if selector:
                ref = (str(selector.get("name")), str(selector.get("key")))
                found.append(Exposure(f"the sandbox's pod's env {env['name']}", env["name"], ref))
    return found


def placements(
    spec: AgentRunSpec, exposed: list[Exposure], routed: bool, values: Mapping[SecretRef, str]
) -> list[str]:
    """What would put a model key in the sandbox, each said once for a person (empty:
    nothing). ``routed``: a gateway's model route would hold the run's modelKey; ``values``:
    the Secrets' values, by reference, as far as they were read."""
    found = []
    key_ref = spec.model_key.secret_key_ref.pair if spec.model_key is not None else None
    key = values.get(key_ref) if key_ref is not None else None
    if key_ref is not None and not routed:
        found.append("the run's modelKey, which no egress gateway holds")
    for exposure in exposed:
        if exposure.variable is not None and exposure.variable.upper() in KEY_VARIABLES:
            found.append(exposure.where)
        elif key_ref is not None and (
            exposure.ref == key_ref or (key and values.get(exposure.ref) == key)
        ):
            found.append(f"{exposure.where}, which holds the run's model key")
    return list(dict.fromkeys(found))


def refusal(found: list[str], policy: str | None, operator_refuses: bool) -> str | None:
    """Why the run may not start with its key in the sandbox, or None. ``policy``: the label
    of the run's policy when it refuses keys in sandboxes."""
    if not found or (policy is None and not operator_refuses):
        return None
    who = (
        f"policy {policy} (modelKey.inSandbox: refuse)"
        if policy is not None
        else "the operator (PADDOCK_MODEL_KEY_IN_SANDBOX=refuse, the chart's "
        "policy.modelKeyInSandbox)"
    )
    return (
        f"A model key would be in the sandbox ({'; '.join(found)}), which {who} refuses: {CHANGE}."
    )
