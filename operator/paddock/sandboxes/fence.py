"""Which NetworkPolicies fence a sandbox pod in, and what controls each. Pure.

Every sandbox pod of a namespace is under the namespace's baseline (nothing in, nothing out)
and under one fence, which its pod's ``paddock.dev/network`` label names:
- the sandboxes of a SandboxPolicy of their namespace share its fence, which the policy
  controls (deleting the policy deletes it: its pods are left isolated);
- the sandboxes under the operator's default policy from another namespace, and those under
  no policy, share one fence of their namespace, as does the baseline: the Namespace controls
  them (a NetworkPolicy cannot be controlled from another namespace);
- a sandbox with an inline policy has its own fence, which it controls.

A shared fence no sandbox uses any more is deleted (``retire``); the baseline goes with the
namespace's last sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from paddock import GROUP, VERSION
from paddock.policy.choice import PolicyChoice
from paddock.vocab import names
from paddock.vocab.ownership import controller_uid

Obj = dict[str, Any]
Reference = tuple[str, str, str]  # (kind, namespace, name)


def fence_name(choice: PolicyChoice, sandbox: str) -> str:
    """The NetworkPolicy whose rules a sandbox's pod is under."""
    if choice.inline is not None:
        return names.network_policy_name(sandbox)
    if choice.name is None:
        return names.NO_POLICY_NETWORK_POLICY
    return names.policy_network_policy_name(choice.name, choice.namespace)


def fences_of(choice: PolicyChoice, namespace: str, sandbox: str) -> set[Reference]:
    """The NetworkPolicies a sandbox uses: the baseline and its fence."""
    return {
        ("NetworkPolicy", namespace, names.BASELINE_NETWORK_POLICY),
        ("NetworkPolicy", namespace, fence_name(choice, sandbox)),
    }


@dataclass(frozen=True)
class Owner:
    """The controller of a NetworkPolicy: what its owner reference names."""

    api_version: str
    kind: str
    name: str
    uid: str

    def as_object(self) -> Obj:
        """In the shape ``owned_by`` takes."""
        meta = {"name": self.name, "uid": self.uid}
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta}


def namespace_owner(namespace: str, uid: str) -> Owner:
    return Owner("v1", "Namespace", namespace, uid)


def fence_owner(
    choice: PolicyChoice, sandbox: Obj, policy_uid: str | None, namespace_uid: str
) -> Owner:
    """What controls the sandbox's fence: itself, its namespace's SandboxPolicy, or its
    Namespace."""
    meta = sandbox["metadata"]
    if choice.inline is not None:
        return Owner(sandbox["apiVersion"], "Sandbox", meta["name"], meta["uid"])
    if choice.name is not None and choice.namespace is None and policy_uid:
        return Owner(f"{GROUP}/{VERSION}", "SandboxPolicy", choice.name, policy_uid)
    return namespace_owner(meta["namespace"], namespace_uid)


def shared_owner(obj: Obj) -> tuple[str, str] | None:
    """The kind and name of a shared fence's controller (a SandboxPolicy or the Namespace),
    with its uid checked by the caller; None for any other NetworkPolicy."""
    uid = controller_uid(obj)
    for ref in obj["metadata"].get("ownerReferences") or []:
        if str(ref.get("uid")) == uid and ref.get("kind") in ("SandboxPolicy", "Namespace"):
            return str(ref["kind"]), str(ref.get("name"))
    return None
