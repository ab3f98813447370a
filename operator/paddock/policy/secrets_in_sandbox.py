"""Where secret values would be in a sandbox's environment, decided: for a policy that refuses
them there (``secrets.inSandbox: refuse``). What the Workspace puts in every pod of its
sandboxes (its ``secrets``, an MCP server's secret header), and what a run adds (its
``secrets``, a ``modelKey`` no gateway holds, what its sandbox's pod started with). A clone
or git skill token is used by the init containers only, and a route's header is the gateway's:
neither is in the sandbox's environment. Pure: the callers gather and act."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paddock.api.agentrun import AgentRunSpec
from paddock.api.workspace import WorkspaceSpec

INSTEAD = (
    "hold them at the egress gateway instead: an HTTP API's secret header as a route of the "
    "Workspace (spec.routes), a model key as the run's spec.modelKey (an MCP server's secret "
    "header is the gateway's wherever there is one); a secret no route can carry (a variable) "
    "cannot be used under this policy"
)


def of_workspace(workspace: WorkspaceSpec, gateway: bool = False) -> list[str]:
    """What of the Workspace puts a secret value in its sandboxes' environment (``gateway``:
    an egress gateway holds its MCP servers' secret headers instead)."""
    found = [f"the Workspace's secret {s.name}" for s in workspace.secrets]
    for skill in workspace.skills:
        if skill.mcp is not None and not gateway:
            found += [
                f"the secret header {h.name} of the MCP server {skill.name}"
                for h in skill.mcp.headers
                if h.secret_key_ref is not None
            ]
    return found


def of_run(
    spec: AgentRunSpec,
    workspace: WorkspaceSpec,
    routed: bool,
    pod: Mapping[str, Any] | None,
    held: bool = False,
) -> list[str]:
    """What would put a secret value in the run's sandbox's environment: its own, its
    Workspace's, and the secret variables its sandbox's pod started with (``routed``: its model
    key is a gateway's; ``held``: a gateway holds the MCP servers' secret headers)."""
    found = [f"the run's secret {s.name}" for s in spec.secrets]
    if spec.model_key is not None and not routed:
        found.append("the run's modelKey, which no egress gateway holds")
    found += of_workspace(workspace, held)
    named = {s.name for s in workspace.secrets}
    for container in ((pod or {}).get("spec") or {}).get("containers") or []:
        for env in container.get("env") or []:
            if (env.get("valueFrom") or {}).get("secretKeyRef") and env["name"] not in named:
                found.append(f"the sandbox's pod's env {env['name']}, as it started")
    return list(dict.fromkeys(found))


def refusal(found: list[str], policy: str | None, operator: bool = False) -> str | None:
    """Why secret values may not be in the sandbox, or None: ``policy``, the label of its
    policy when that refuses them; ``operator``, the operator refuses them everywhere."""
    if not found or (policy is None and not operator):
        return None
    who = (
        f"policy {policy} (secrets.inSandbox: refuse)"
        if policy is not None
        else "the operator (PADDOCK_SECRETS_IN_SANDBOX=refuse, the chart's policy.secretsInSandbox)"
    )
    return (
        f"Secret values would be in the sandbox's environment ({'; '.join(found)}), which "
        f"{who} refuses: {INSTEAD}."
    )
