"""SandboxPool: sandboxes kept Ready from one template, for runs to take at once."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field, ValidationError

from paddock.api.common import ApiModel, Conditions, KindInfo, PrinterColumn, Resource
from paddock.api.sandbox import SandboxSpec

MAX_REPLICAS = 1000


class SandboxPoolSpec(ApiModel):
    """How many sandboxes to keep Ready, and what each is."""

    replicas: int = Field(
        default=1,
        ge=0,
        le=MAX_REPLICAS,
        description="How many unclaimed sandboxes the pool keeps (kubectl scale sets it).",
    )
    template: SandboxSpec = Field(
        description="The Sandbox spec of each member: its Workspace, policy, image, storage. "
        "Each is set up as a Sandbox made from it would be (restored from the Workspace's "
        "newest snapshot where there is one)."
    )

    def template_hash(self, workspace_hash: str) -> str:
        """What a member is made from (the template and its Workspace's hash): a member of
        another hash is stale, and is replaced rather than taken."""
        material = json.dumps([self.template.to_api(), workspace_hash], sort_keys=True)
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    def unfit(self, member: dict[str, Any]) -> str | None:
        """Why a member is not what the pool promises, judged by what it is, never by its
        labels (None: it is): its spec is the template's (its policy, image, Workspace and
        the rest) and never changed since it was made (its generation, which only the API
        server sets, is 1: a spec changed and put back may have left a pod of the other),
        and no run has ever held it (its status says so, which only the operator writes)."""
        try:
            spec = SandboxSpec.model_validate(member.get("spec") or {})
        except ValidationError:
            return "its spec is invalid"
        if spec.to_api() != self.template.to_api():
            return "its spec is no longer the pool's template"
        if int(member.get("metadata", {}).get("generation") or 1) != 1:
            return "its spec was changed since it was made"
        if (member.get("status") or {}).get("everHeld"):
            return "a run has held it"
        return None


def up_to_date(member: dict[str, Any]) -> bool | None:
    """Whether the member's volume was prepared from the current Workspace, as its status
    says (the operator's UpToDate condition); None while it does not say yet."""
    for condition in (member.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "UpToDate":
            return bool(condition.get("status") == "True")
    return None


class SandboxPoolStatus(ApiModel):
    """Observed state of a SandboxPool."""

    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation this status describes."
    )
    conditions: Conditions
    replicas: int = Field(default=0, description="Unclaimed members, Ready or not.")
    ready_replicas: int = Field(default=0, description="Unclaimed members that are Ready.")
    stale_replicas: int = Field(
        default=0,
        description="Unclaimed members of an older template or Workspace, replaced as fresh "
        "ones become Ready.",
    )
    claimed: int = Field(
        default=0,
        description="Sandboxes runs took from the pool that still exist (no longer the "
        "pool's): a run's own, and a thread's.",
    )
    selector: str | None = Field(
        default=None, description="The label selector of the unclaimed members (for scale)."
    )


class SandboxPool(Resource):
    """Sandboxes kept Ready from one template; a run naming the pool (poolRef), or whose
    sandboxTemplate is the pool's template, takes one."""

    kind_info = KindInfo(
        kind="SandboxPool",
        plural="sandboxpools",
        short_name="sbxpool",
        max_name_length=57,
        name_becomes="the prefix of its members' names (Sandbox names are at most 63 characters)",
        columns=(
            PrinterColumn("Desired", ".spec.replicas", "Members to keep", type="integer"),
            PrinterColumn("Ready", ".status.readyReplicas", "Ready members", type="integer"),
            PrinterColumn("Claimed", ".status.claimed", "Members runs took", type="integer"),
            PrinterColumn("Workspace", ".spec.template.workspaceRef.name", "Workspace"),
        ),
        scale=True,
    )

    api_version: Literal["paddock.dev/v1alpha1"] = "paddock.dev/v1alpha1"
    kind: Literal["SandboxPool"] = "SandboxPool"
    spec: SandboxPoolSpec
    status: SandboxPoolStatus | None = None
