"""Which sandbox a run uses: the one it names, or one made from its template.

``reuse: thread`` finds the thread's sandbox again by a key hashed from the namespace, the
thread, the Workspace's hash, the policy and the image, so a changed Workspace or image gets a
fresh sandbox instead of a stale one. ``reuse: none`` makes a sandbox owned by the run, removed
when the run ends.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from paddock import GROUP
from paddock.api.agentrun import AgentRunSpec, Reuse
from paddock.api.sandbox import SandboxPhase
from paddock.kube import client as kube
from paddock.render.names import ACTIVITY_ANNOTATION, MANAGED_BY

THREAD_KEY_LABEL = f"{GROUP}/thread-key"
RUN_LABEL = f"{GROUP}/run"
SANDBOX_CONTAINER = "sandbox"

Obj = dict[str, Any]


@dataclass(frozen=True)
class ReadySandbox:
    name: str
    pod: str
    workspace: str


@dataclass(frozen=True)
class Waiting:
    name: str | None
    reason: str
    message: str


@dataclass(frozen=True)
class Unusable:
    name: str
    reason: str
    message: str


def thread_key(namespace: str, spec: AgentRunSpec, workspace_hash: str) -> str:
    template = spec.sandbox_template
    assert template is not None
    policy = template.policy.model_dump(mode="json") if template.policy else None
    material = json.dumps(
        [
            namespace,
            spec.thread_id,
            workspace_hash,
            template.policy_ref.name if template.policy_ref else None,
            policy,
            template.image,
        ],
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def template_sandbox_name(run: Obj, spec: AgentRunSpec, workspace_hash: str) -> str:
    meta = run["metadata"]
    if spec.effective_reuse == Reuse.THREAD:
        return f"thread-{thread_key(meta['namespace'], spec, workspace_hash)}"
    # One per run; the uid keeps names unique when a run is deleted and created again.
    return f"{meta['name'][:40].rstrip('-.')}-{meta['uid'][:8]}"


def _sandbox_object(run: Obj, spec: AgentRunSpec, name: str, key: str | None) -> Obj:
    meta = run["metadata"]
    assert spec.sandbox_template is not None
    labels = {**MANAGED_BY}
    metadata: Obj = {"name": name, "namespace": meta["namespace"], "labels": labels}
    if key is not None:
        labels[THREAD_KEY_LABEL] = key
    else:
        labels[RUN_LABEL] = meta["uid"]
        metadata["ownerReferences"] = [
            {
                "apiVersion": run["apiVersion"],
                "kind": "AgentRun",
                "name": meta["name"],
                "uid": meta["uid"],
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Sandbox",
        "metadata": metadata,
        "spec": spec.sandbox_template.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


def touch(namespace: str, name: str, now: datetime | None = None) -> None:
    """Mark the sandbox active: keeps it from idling out, and resumes it when paused idle."""
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube.patch(
        "Sandbox", namespace, name, {"metadata": {"annotations": {ACTIVITY_ANNOTATION: stamp}}}
    )


def resolve(run: Obj, spec: AgentRunSpec) -> ReadySandbox | Waiting | Unusable:
    namespace = run["metadata"]["namespace"]
    if spec.sandbox_ref is not None:
        name = spec.sandbox_ref.name
        sandbox = kube.get("Sandbox", namespace, name)
        if sandbox is None:
            return Waiting(
                name, "SandboxNotFound", f"Sandbox {name} not found in namespace {namespace}"
            )
    else:
        assert spec.sandbox_template is not None
        workspace = kube.get("Workspace", namespace, spec.sandbox_template.workspace_ref.name)
        workspace_hash = ((workspace or {}).get("status") or {}).get("hash") or ""
        if spec.effective_reuse == Reuse.THREAD and not workspace_hash:
            return Waiting(
                None,
                "WorkspaceNotReady",
                f"waiting for Workspace {spec.sandbox_template.workspace_ref.name} to be "
                "validated (its hash names the thread's sandbox)",
            )
        name = template_sandbox_name(run, spec, workspace_hash)
        sandbox = kube.get("Sandbox", namespace, name)
        if sandbox is None:
            key = None
            if spec.effective_reuse == Reuse.THREAD:
                key = thread_key(namespace, spec, workspace_hash)
            kube.create(_sandbox_object(run, spec, name, key))
            return Waiting(name, "SandboxCreated", f"created Sandbox {name}; waiting for Ready")
    status = sandbox.get("status") or {}
    phase, message = status.get("phase"), status.get("message") or ""
    if phase == SandboxPhase.READY:
        return ReadySandbox(
            name, status.get("podName") or name, sandbox["spec"]["workspaceRef"]["name"]
        )
    if phase == SandboxPhase.FAILED:
        return Unusable(name, "SandboxFailed", f"Sandbox {name} failed: {message}")
    if phase == SandboxPhase.PAUSED:
        if (sandbox.get("spec") or {}).get("paused"):
            return Waiting(name, "SandboxPaused", f"Sandbox {name} is paused (spec.paused)")
        touch(namespace, name)  # paused for being idle: activity resumes it
        return Waiting(name, "SandboxResuming", f"Sandbox {name} was idle; resuming it")
    detail = f"phase {phase or 'Pending'}" + (f": {message}" if message else "")
    return Waiting(name, "SandboxNotReady", f"waiting for Sandbox {name} to be Ready ({detail})")
