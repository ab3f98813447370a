"""Where a run's model API key would be, decided: the places that would put it in the sandbox
(a ``modelKey`` no egress gateway holds, a secret under a name any agent CLI reads its key
from, the run's or its Workspace's), and the refusal when a policy or the operator's setting
keeps keys out of sandboxes. Pure: the run's start gathers and acts."""

from __future__ import annotations

from paddock.api.agentrun import AgentRunSpec
from paddock.api.workspace import WorkspaceSpec

# The variables the agent CLIs read their model key from (Claude Code, Codex, OpenCode by
# provider, Gemini CLI): a value under one of these names is a model key in the sandbox.
KEY_VARIABLES = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
    }
)
CHANGE = (
    "give the key as the run's spec.modelKey with an egress gateway to hold it (the Helm "
    "chart's gateway.enabled), and take it out of secrets"
)


def placements(spec: AgentRunSpec, workspace: WorkspaceSpec, name: str, routed: bool) -> list[str]:
    """What would put a model key in the sandbox, each said for a person (empty: nothing).
    ``routed``: a gateway's model route would hold the run's modelKey."""
    found = []
    if spec.model_key is not None and not routed:
        found.append("the run's modelKey, which no egress gateway holds")
    # (env cannot carry one: a credential's name with a value is refused by the schema)
    for whose, secrets in (("the run's", spec.secrets), (f"Workspace {name}'s", workspace.secrets)):
        found += [f"{whose} secret {s.name}" for s in secrets if s.name in KEY_VARIABLES]
    return found


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
