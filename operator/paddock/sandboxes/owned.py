"""The objects a sandbox's pod stands on: its Workspace's files ConfigMap, the NetworkPolicies
that fence it in (``fence.py``), and its volume. Deciding what to create, bring in line or
retire, and whose name is in the way. Pure."""

from __future__ import annotations

from typing import Any

from paddock import GROUP, VERSION
from paddock.api.policy import SandboxPolicySpec
from paddock.render.network_policy import render_baseline_network_policy, render_network_policy
from paddock.render.sandbox import SandboxInputs
from paddock.sandboxes.fence import Owner, fence_name, fence_owner, namespace_owner
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.plan import Create, Delete, Patch, Write
from paddock.vocab import names
from paddock.vocab.ownership import controlled_by, owned_by

Obj = dict[str, Any]
RETRY_CONFLICT = 30.0  # seconds before looking again at a name another object holds


def name_conflict(world: SandboxWorld, files: str) -> str | None:
    """Why an object the sandbox needs is in the way: it exists under the name the sandbox
    would give it (``files``: its files ConfigMap's), but something else controls it.
    Paddock never adopts, changes or deletes it."""
    uid = world.sandbox["metadata"]["uid"]
    fence = _fence_owner(world).uid
    for kind, obj, owner_uid, advice in (
        ("Pod", world.pod, uid, ""),
        ("PersistentVolumeClaim", world.pvc, uid, " (its data is left as it is)"),
        ("ConfigMap", world.files_named(files), world.workspace_uid() or "", ""),
        ("NetworkPolicy", world.baseline, world.namespace_uid, ""),
        ("NetworkPolicy", world.network_policy, fence, ""),
    ):
        if obj is not None and not controlled_by(obj, owner_uid):
            return conflict_message(kind, obj["metadata"]["name"], advice)
    return None


def conflict_message(kind: str, name: str, advice: str = "") -> str:
    return (
        f"{kind} {name} exists and does not belong to this Sandbox; Paddock leaves it "
        f"alone{advice}. Delete or rename it, or give the Sandbox another name."
    )


def owned_objects(
    world: SandboxWorld,
    inputs: SandboxInputs,
    policy: SandboxPolicySpec | None,
    configmap: Obj,
    pvc: Obj,
) -> list[Write]:
    """Create the files ConfigMap, the baseline, the fence and the PVC, or bring the fences in
    line (a policy's change reaches its shared fence once: the first of its sandboxes to
    look patches it). A PVC's spec is immutable once bound: it is never patched."""
    writes: list[Write] = []
    if world.files_named(configmap["metadata"]["name"]) is None:
        writes.append(Create(configmap))  # named by what it holds, and immutable: no drift
    baseline = owned_by(
        render_baseline_network_policy(inputs.namespace),
        namespace_owner(inputs.namespace, world.namespace_uid).as_object(),
    )
    fence = owned_by(
        render_network_policy(
            fence_name(world.policy_choice, inputs.name),
            inputs.namespace,
            policy or SandboxPolicySpec(),
            world.network,
        ),
        _fence_owner(world).as_object(),
    )
    for existing, wanted in ((world.baseline, baseline), (world.network_policy, fence)):
        if existing is None:
            writes.append(Create(wanted))
        elif pruned(existing.get("spec")) != pruned(wanted["spec"]):
            name = wanted["metadata"]["name"]
            version = existing["metadata"].get("resourceVersion")
            body = {"metadata": {"resourceVersion": version}, "spec": wanted["spec"]}
            writes.append(Patch(wanted["kind"], name, body))
    if world.pvc is None:
        writes.append(Create(pvc))
    return writes


def relabelled(world: SandboxWorld, inputs: SandboxInputs) -> list[Write]:
    """Move a running pod to the fence of its policy now (its label), without recreating
    it: the sandbox moved to another policy, or its pod predates shared fences."""
    pod = world.pod
    labels = (pod or {}).get("metadata", {}).get("labels") or {}
    if pod is None or labels.get(names.NETWORK_LABEL) == inputs.fence:
        return []
    version = pod["metadata"].get("resourceVersion")
    body = {"metadata": {"resourceVersion": version, "labels": {names.NETWORK_LABEL: inputs.fence}}}
    return [Patch("Pod", pod["metadata"]["name"], body)]


def stranded(world: SandboxWorld, files: str) -> bool:
    """Whether the pod, not yet started, mounts a files ConfigMap that is gone and is not
    the one it would mount now (made from an earlier spec of its Workspace, as that spec was
    replaced): it would never start, so it is made again."""
    pod = world.pod
    if pod is None or (pod.get("status") or {}).get("phase") != "Pending":
        return False
    mounted = [
        volume["configMap"].get("name")
        for volume in (pod.get("spec") or {}).get("volumes") or []
        if "configMap" in volume
    ]
    return any(name != files and world.files_named(name) is None for name in mounted)


def retired(world: SandboxWorld) -> list[Write]:
    """The sandbox's own fence, once it is under a shared one: deleted after its pod is
    relabelled, so that the pod is never under neither."""
    own = world.own_network_policy
    if own is None or not controlled_by(own, world.sandbox["metadata"]["uid"]):
        return []
    return [Delete.of({**own, "kind": "NetworkPolicy"})]


def workspace_owner(world: SandboxWorld) -> Obj:
    """The Workspace, as the controller of its sandboxes' files ConfigMaps."""
    assert world.workspace is not None
    meta = {"name": world.workspace.name, "uid": world.workspace.uid or ""}
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workspace", "metadata": meta}


def _fence_owner(world: SandboxWorld) -> Owner:
    policy_uid = world.policy.uid if world.policy is not None else None
    return fence_owner(world.policy_choice, world.sandbox, policy_uid, world.namespace_uid)


def pruned(value: Any) -> Any:
    """``value`` without empty lists, maps and nulls, as the API server stores it (it drops a
    NetworkPolicy's ``ingress: []``): what is rendered and what is read compare equal."""
    if isinstance(value, dict):
        kept = {key: pruned(item) for key, item in value.items()}
        return {key: item for key, item in kept.items() if item not in (None, [], {})}
    if isinstance(value, list):
        return [pruned(item) for item in value]
    return value
