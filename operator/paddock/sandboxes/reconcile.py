"""Reconciling Workspaces and Sandboxes: compare what the spec asks for with what exists, close
the gap, and say where things stand. Level-based and idempotent: safe to run at any time, as
often as the handlers like; a second run creates nothing twice."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from paddock.api.common import parse_duration
from paddock.api.errors import describe
from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxPhase, SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.conditions import get_condition, is_true, set_condition
from paddock.kube import client as kube
from paddock.render import names
from paddock.render.network_policy import render_network_policy
from paddock.render.projections import render_projection
from paddock.render.sandbox import (
    CONFIGMAP_LIMIT,
    SandboxInputs,
    configmap_size,
    render_files_configmap,
    render_sandbox_pod,
    render_workspace_pvc,
)
from paddock.render.workspace_hash import workspace_hash
from paddock.sandboxes.observe import observe

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)
RETRY_MISSING = 15.0  # seconds before looking again for a missing Workspace, policy or Secret


@dataclass
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str


@dataclass
class Outcome:
    """The status to write, the Events to post, and whether to look again soon."""

    status: Obj
    events: list[Event] = field(default_factory=list)
    retry_after: float | None = None


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def owned_by(obj: Obj, owner: Obj) -> Obj:
    """Set ``owner`` as the controller of ``obj``: deleting the owner deletes the object."""
    meta = owner["metadata"]
    obj["metadata"]["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return obj


# --- Workspace ---------------------------------------------------------------------------------


def secret_refs(spec: WorkspaceSpec) -> list[tuple[str, str]]:
    """Every (Secret, key) the workspace refers to."""
    refs = [(s.secret_key_ref.name, s.secret_key_ref.key) for s in spec.secrets]
    if spec.source and spec.source.git and spec.source.git.secret_ref:
        refs.append((spec.source.git.secret_ref.name, spec.source.git.secret_ref.key))
    for skill in spec.skills:
        if skill.git and skill.git.secret_ref:
            refs.append((skill.git.secret_ref.name, skill.git.secret_ref.key))
        if skill.mcp:
            refs += [
                (h.secret_key_ref.name, h.secret_key_ref.key)
                for h in skill.mcp.headers
                if h.secret_key_ref
            ]
    return refs


def _missing_secrets_message(missing: list[str], namespace: str) -> str:
    listed = ", ".join(missing)
    return (
        f"Secret keys not found in namespace {namespace}: {listed}. Create them (only the "
        "names are read here; values go to the sandbox container only)."
    )


def reconcile_workspace(body: Obj, default_image: str) -> Outcome:
    meta, old = body["metadata"], body.get("status") or {}
    generation = meta.get("generation")
    conditions: list[Obj] = list(old.get("conditions") or [])
    status: Obj = {"observedGeneration": generation}
    events: list[Event] = []
    try:
        spec = WorkspaceSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        message = "The spec is invalid: " + "; ".join(describe(exc))
        status["conditions"] = set_condition(
            conditions, "Ready", False, "InvalidSpec", message, generation=generation
        )
        return Outcome(status, [Event("Warning", "InvalidSpec", message)])

    projection = render_projection(spec)
    status["hash"] = workspace_hash(spec, spec.image or default_image)
    missing = kube.missing_secret_keys(meta["namespace"], secret_refs(spec))
    if missing:
        message = _missing_secrets_message(missing, meta["namespace"])
        conditions = set_condition(
            conditions, "Ready", False, "SecretNotFound", message, generation=generation
        )
        events.append(Event("Warning", "SecretNotFound", message))
        retry: float | None = RETRY_MISSING
    else:
        conditions = set_condition(
            conditions, "Ready", True, "Valid", "The workspace is valid.", generation=generation
        )
        retry = None
    if projection.warnings:
        conditions = set_condition(
            conditions,
            "AllHarnessesSupported",
            False,
            "HarnessLimits",
            " ".join(projection.warnings),
            generation=generation,
        )
    else:
        conditions = set_condition(
            conditions,
            "AllHarnessesSupported",
            True,
            "Supported",
            "Every harness can use everything in this workspace.",
            generation=generation,
        )
    status["conditions"] = conditions
    if not is_true(list(old.get("conditions") or []), "Ready") and not missing:
        events.append(Event("Normal", "Valid", f"Workspace hash {status['hash']}."))
    return Outcome(status, events, retry)


# --- Sandbox -----------------------------------------------------------------------------------


@dataclass
class _Failure:
    phase: SandboxPhase
    reason: str
    message: str
    retry_after: float | None


def _load_reference(
    kind: str, model: type[M], namespace: str, name: str, field_name: str
) -> M | _Failure:
    """The spec of a referenced Workspace or SandboxPolicy, or why it cannot be had (reasons
    ``<Kind>NotFound`` and ``<Kind>Invalid``; the short kind name, e.g. PolicyNotFound)."""
    short = kind.removeprefix("Sandbox")
    obj = kube.get(kind, namespace, name)
    if obj is None:
        return _Failure(
            SandboxPhase.PENDING,
            f"{short}NotFound",
            f"{kind} {name} not found in namespace {namespace}. Create it, or fix {field_name}.",
            RETRY_MISSING,
        )
    try:
        return model.model_validate(obj.get("spec") or {})
    except ValidationError as exc:
        return _Failure(
            SandboxPhase.PENDING,
            f"{short}Invalid",
            f"{kind} {name} is invalid: " + "; ".join(describe(exc)),
            RETRY_MISSING,
        )


def _resolve(body: Obj, default_image: str) -> tuple[SandboxInputs, SandboxPolicySpec] | _Failure:
    """The sandbox's spec, Workspace and policy, or why they cannot be had."""
    meta = body["metadata"]
    namespace = meta["namespace"]
    try:
        spec = SandboxSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        return _Failure(
            SandboxPhase.FAILED,
            "InvalidSpec",
            "The spec is invalid: " + "; ".join(describe(exc)),
            None,
        )
    ws_spec = _load_reference(
        "Workspace", WorkspaceSpec, namespace, spec.workspace_ref.name, "spec.workspaceRef.name"
    )
    if isinstance(ws_spec, _Failure):
        return ws_spec
    policy = spec.policy or SandboxPolicySpec()
    if spec.policy_ref is not None:
        referenced = _load_reference(
            "SandboxPolicy",
            SandboxPolicySpec,
            namespace,
            spec.policy_ref.name,
            "spec.policyRef.name",
        )
        if isinstance(referenced, _Failure):
            return referenced
        policy = referenced
    missing = kube.missing_secret_keys(namespace, secret_refs(ws_spec))
    if missing:
        return _Failure(
            SandboxPhase.PENDING,
            "SecretNotFound",
            _missing_secrets_message(missing, namespace),
            RETRY_MISSING,
        )
    image = spec.image or ws_spec.image or default_image
    inputs = SandboxInputs(
        name=meta["name"],
        namespace=namespace,
        sandbox=spec,
        workspace=ws_spec,
        image=image,
        workspace_hash=workspace_hash(ws_spec, image),
    )
    return inputs, policy


def _idle(spec: SandboxSpec, meta: Obj, old: Obj, now: datetime) -> tuple[bool, str | None]:
    """Whether the sandbox is paused for idleness, and its last activity time."""
    activity = max(
        (
            t
            for t in (
                _parse_time((meta.get("annotations") or {}).get(names.ACTIVITY_ANNOTATION)),
                _parse_time((old.get("timings") or {}).get("readyAt")),
            )
            if t is not None
        ),
        default=None,
    )
    last = activity.strftime("%Y-%m-%dT%H:%M:%SZ") if activity else None
    paused = get_condition(list(old.get("conditions") or []), "Paused")
    if paused and paused.get("status") == "True" and paused.get("reason") == "IdleTimeout":
        since = _parse_time(paused.get("lastTransitionTime"))
        # Activity after the idle pause (a run, an exec, the annotation) resumes it.
        return not (activity and since and activity > since), last
    if spec.lifecycle.idle_timeout and activity:
        return now - activity > parse_duration(spec.lifecycle.idle_timeout), last
    return False, last


def _ensure_objects(
    inputs: SandboxInputs, policy: SandboxPolicySpec, configmap: Obj, body: Obj
) -> Obj:
    """Create the ConfigMap, PVC and NetworkPolicy, or bring them in line; return the PVC.
    An object that is as it should be costs one read, no write."""
    kube.ensure(owned_by(configmap, body), "data")
    network_policy = render_network_policy(inputs.name, inputs.namespace, policy)
    kube.ensure(owned_by(network_policy, body), "spec")
    pvc = owned_by(render_workspace_pvc(inputs), body)
    existing = kube.get("PersistentVolumeClaim", inputs.namespace, names.pvc_name(inputs.name))
    if existing is None:
        kube.create(pvc)
        return pvc
    return existing  # a PVC's spec is immutable once bound: never patched


def reconcile_sandbox(body: Obj, default_image: str, now: datetime | None = None) -> Outcome:
    now = now or datetime.now(UTC)
    meta, old = body["metadata"], body.get("status") or {}
    namespace, name, generation = meta["namespace"], meta["name"], meta.get("generation")
    conditions: list[Obj] = list(old.get("conditions") or [])
    status: Obj = {"observedGeneration": generation}
    events: list[Event] = []

    def finish(
        phase: SandboxPhase, reason: str, message: str, retry: float | None = None
    ) -> Outcome:
        status["phase"] = phase.value
        status["message"] = message
        status["conditions"] = conditions
        if old.get("phase") != phase.value or old.get("message") != message:
            warning = reason in _WARNING_REASONS
            events.append(Event("Warning" if warning else "Normal", reason, message))
        return Outcome(status, events, retry)

    if meta.get("deletionTimestamp"):
        return finish(SandboxPhase.TERMINATING, "Deleting", "The sandbox is being deleted.")

    resolved = _resolve(body, default_image)
    if isinstance(resolved, _Failure):
        conditions = set_condition(
            conditions, "Ready", False, resolved.reason, resolved.message, generation=generation
        )
        return finish(resolved.phase, resolved.reason, resolved.message, resolved.retry_after)
    inputs, policy = resolved

    projection = render_projection(inputs.workspace)
    configmap = render_files_configmap(inputs, projection)
    if configmap_size(configmap) > CONFIGMAP_LIMIT:
        message = (
            "The Workspace's instructions, skills and setup add up to more than 900 KiB; move "
            "large files into the repository or a git skill."
        )
        conditions = set_condition(
            conditions, "Ready", False, "WorkspaceTooLarge", message, generation=generation
        )
        return finish(SandboxPhase.FAILED, "WorkspaceTooLarge", message)

    pvc = _ensure_objects(inputs, policy, configmap, body)
    status["pvcName"] = names.pvc_name(name)
    status["podName"] = names.pod_name(name)
    prepared = is_true(conditions, "SetupComplete")
    prepared_hash = old.get("workspaceHash") if prepared else inputs.workspace_hash
    status["workspaceHash"] = prepared_hash
    if prepared and prepared_hash != inputs.workspace_hash:
        conditions = set_condition(
            conditions,
            "UpToDate",
            False,
            "WorkspaceChanged",
            "The Workspace changed after this sandbox was prepared; its volume keeps the old "
            "result. Delete and recreate the Sandbox to prepare it again.",
            generation=generation,
        )
    else:
        conditions = set_condition(
            conditions,
            "UpToDate",
            True,
            "UpToDate",
            "Prepared from the current Workspace.",
            generation=generation,
        )

    idle_paused, last_activity = _idle(inputs.sandbox, meta, old, now)
    if last_activity:
        status["lastActivityTime"] = last_activity
    pod = kube.get("Pod", namespace, names.pod_name(name))
    if inputs.sandbox.lifecycle.paused or idle_paused:
        if pod is not None:
            kube.delete("Pod", namespace, names.pod_name(name))
        reason = "Paused" if inputs.sandbox.lifecycle.paused else "IdleTimeout"
        message = (
            "Paused: the pod is deleted and the workspace volume kept. Set "
            "spec.lifecycle.paused to false to resume."
            if reason == "Paused"
            else f"Paused after {inputs.sandbox.lifecycle.idle_timeout} without activity; "
            f"annotate {names.ACTIVITY_ANNOTATION} with the current time, or start a run, "
            "to resume."
        )
        conditions = set_condition(
            conditions, "Paused", True, reason, message, generation=generation
        )
        conditions = set_condition(
            conditions, "Ready", False, reason, message, generation=generation
        )
        return finish(SandboxPhase.PAUSED, reason, message)
    conditions = set_condition(
        conditions, "Paused", False, "Running", "The sandbox is not paused.", generation=generation
    )

    observation = observe(pod, pvc)
    if observation.recreate_pod and pod is not None:
        kube.delete("Pod", namespace, names.pod_name(name))
    elif pod is None:
        kube.create(owned_by(render_sandbox_pod(inputs, projection, prepared=prepared), body))

    if observation.volume_bound is not None:
        conditions = set_condition(
            conditions,
            "VolumeBound",
            observation.volume_bound,
            "Bound" if observation.volume_bound else "Pending",
            f"PersistentVolumeClaim {names.pvc_name(name)}",
            generation=generation,
        )
    if observation.setup_complete is not None and not prepared:
        conditions = set_condition(
            conditions,
            "SetupComplete",
            observation.setup_complete,
            "Prepared" if observation.setup_complete else observation.reason,
            "The workspace is cloned and set up."
            if observation.setup_complete
            else observation.message,
            generation=generation,
        )
    conditions = set_condition(
        conditions,
        "Ready",
        observation.ready,
        observation.reason,
        observation.message,
        generation=generation,
    )
    timings = dict(old.get("timings") or {})
    if observation.ready and "readyAt" not in timings:
        created = _parse_time(meta.get("creationTimestamp"))
        ready_at = _parse_time(observation.ready_at) or now
        timings["readyAt"] = ready_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        if created:
            timings["readySeconds"] = max((ready_at - created).total_seconds(), 0.0)
        if observation.setup_seconds is not None:
            timings["setupSeconds"] = observation.setup_seconds
    if timings:
        status["timings"] = timings
    return finish(observation.phase, observation.reason, observation.message)


_WARNING_REASONS = {
    "InvalidSpec",
    "WorkspaceNotFound",
    "WorkspaceInvalid",
    "PolicyNotFound",
    "PolicyInvalid",
    "SecretNotFound",
    "WorkspaceTooLarge",
    "CloneFailed",
    "ProjectionFailed",
    "SetupFailed",
    "InitFailed",
    "ImagePullFailed",
    "PodEvicted",
    "PodFailed",
    "VolumeNotBound",
    "Unschedulable",
}
