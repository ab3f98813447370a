"""The Workspace and Sandbox service: gather what a reconcile needs (from the API), decide
(``decide.py``, ``workspace.py``: pure), apply the plan. Level-based and idempotent: safe to run
at any time, as often as the handlers like; a second run creates nothing twice."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from paddock.api.conditions import Notice
from paddock.api.errors import describe
from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.kube import client as kube
from paddock.render import names
from paddock.sandboxes.decide import SandboxWorld, decide_sandbox
from paddock.sandboxes.plan import Create, Delete, Loaded, Patch, Plan, Write
from paddock.sandboxes.workspace import decide_workspace, load_spec
from paddock.times import utcnow

Obj = dict[str, Any]


@dataclass
class Outcome:
    """What the handler reports once the plan is applied: Events, and when to look again."""

    notices: list[Notice] = field(default_factory=list)
    retry_after: float | None = None
    message: str = ""


def reconcile_workspace(body: Obj, default_image: str) -> Outcome:
    meta = body["metadata"]
    spec = load_spec(body)
    missing = (
        kube.missing_secret_keys(meta["namespace"], spec.spec.secret_refs()) if spec.spec else []
    )
    plan = decide_workspace(body, spec, missing, default_image, utcnow())
    return _apply("Workspace", body, plan)


def reconcile_sandbox(body: Obj, default_image: str) -> Outcome:
    plan = decide_sandbox(gather_sandbox(body), default_image, utcnow())
    return _apply("Sandbox", body, plan)


def reconcile_sandbox_named(
    namespace: str, name: str, default_image: str
) -> tuple[Obj, Outcome] | None:
    """Reconcile the Sandbox of that name, when it still exists (a pod or PVC changed): the
    Sandbox as read, and the outcome."""
    body = kube.get("Sandbox", namespace, name)
    return None if body is None else (body, reconcile_sandbox(body, default_image))


def _load(kind: str, model: type[Any], namespace: str, name: str) -> Loaded[Any]:
    obj = kube.get(kind, namespace, name)
    if obj is None:
        return Loaded(name)
    try:
        return Loaded(name, model.model_validate(obj.get("spec") or {}))
    except ValidationError as exc:
        return Loaded(name, error="; ".join(describe(exc)))


def gather_sandbox(body: Obj) -> SandboxWorld:
    """The Sandbox's references and owned objects, as they are now."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    try:
        spec = SandboxSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        return SandboxWorld(body, Loaded(name, error="; ".join(describe(exc))))
    workspace: Loaded[WorkspaceSpec] = _load(
        "Workspace", WorkspaceSpec, namespace, spec.workspace_ref.name
    )
    policy: Loaded[SandboxPolicySpec] | None = None
    if spec.policy_ref is not None:
        policy = _load("SandboxPolicy", SandboxPolicySpec, namespace, spec.policy_ref.name)
    missing = (
        kube.missing_secret_keys(namespace, workspace.spec.secret_refs()) if workspace.spec else []
    )
    return SandboxWorld(
        body,
        Loaded(name, spec),
        workspace,
        policy,
        missing,
        pod=kube.get("Pod", namespace, names.pod_name(name)),
        pvc=kube.get("PersistentVolumeClaim", namespace, names.pvc_name(name)),
        configmap=kube.get("ConfigMap", namespace, names.files_configmap_name(name)),
        network_policy=kube.get("NetworkPolicy", namespace, names.network_policy_name(name)),
    )


def _apply(kind: str, body: Obj, plan: Plan) -> Outcome:
    """Make the plan's writes, then the status (only what changed)."""
    meta = body["metadata"]
    namespace = meta["namespace"]
    for write in plan.writes:
        _write(namespace, write)
    status = _changed(body.get("status") or {}, plan.status)
    if status:
        kube.patch_status(kind, namespace, meta["name"], status)
    message = str(getattr(plan.status, "message", "") or "")
    return Outcome(plan.notices, plan.retry_after, message)


def _write(namespace: str, write: Write) -> None:
    if isinstance(write, Create):
        kube.create(write.obj)
    elif isinstance(write, Patch):
        kube.patch(write.kind, namespace, write.name, write.body)
    elif isinstance(write, Delete):
        kube.delete(write.kind, namespace, write.name)


def _changed(old: Obj, status: BaseModel) -> Obj:
    """The fields of the new status that differ from the stored one (a merge patch)."""
    new: Obj = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return {key: value for key, value in new.items() if old.get(key) != value}
