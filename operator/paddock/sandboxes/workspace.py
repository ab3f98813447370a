"""Deciding a Workspace's status: valid or not, its hash, whether every harness can use it.
Pure; the service reads the Secrets it names."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from paddock.api.common import stored_status
from paddock.api.conditions import Notice, is_true, set_condition
from paddock.api.errors import describe
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import WorkspaceReason as R
from paddock.api.workspace import WorkspaceSpec, WorkspaceStatus
from paddock.render.projections import render_projection
from paddock.render.workspace_hash import workspace_hash
from paddock.sandboxes.plan import Loaded, Plan
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]
RETRY_MISSING = 15.0  # seconds before looking again for a missing Workspace, policy or Secret


def load_spec(body: Obj) -> Loaded[WorkspaceSpec]:
    try:
        spec = WorkspaceSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        return Loaded(body["metadata"]["name"], error="; ".join(describe(exc)))
    return Loaded(body["metadata"]["name"], spec)


def missing_secrets_message(missing: list[str], namespace: str) -> str:
    return (
        f"Secret keys not found in namespace {namespace}: {', '.join(missing)}. Create them "
        "(only the names are read here; values go to the sandbox container only)."
    )


def decide_workspace(
    body: Obj, spec: Loaded[WorkspaceSpec], missing: list[str], default_image: str, now: datetime
) -> Plan:
    meta = body["metadata"]
    generation = meta.get("generation")
    old = stored_status(WorkspaceStatus, body)
    # The snapshots are listed by their own reconcile (``workspace_snapshots.py``).
    status = WorkspaceStatus(
        observed_generation=generation, conditions=old.conditions, snapshots=old.snapshots
    )

    def condition(type_: C, value: bool, reason: R, message: str) -> None:
        status.conditions = set_condition(
            status.conditions, type_, value, reason, message, generation=generation, now=now
        )

    if spec.spec is None:
        message = f"The spec is invalid: {spec.error}"
        condition(C.READY, False, R.INVALID_SPEC, message)
        return Plan(status, notices=[Notice(R.INVALID_SPEC, message)])
    status.hash = workspace_hash(spec.spec, spec.spec.image or default_image)
    notices, retry = [], None
    if missing:
        message = missing_secrets_message(missing, meta["namespace"])
        condition(C.READY, False, R.SECRET_NOT_FOUND, message)
        notices.append(Notice(R.SECRET_NOT_FOUND, message))
        retry = RETRY_MISSING
    else:
        condition(C.READY, True, R.VALID, "The workspace is valid.")
        if not is_true(old.conditions, C.READY):
            notices.append(Notice(R.VALID, f"Workspace hash {status.hash}."))
    warnings = render_projection(spec.spec).warnings
    if warnings:
        condition(C.ALL_HARNESSES_SUPPORTED, False, R.HARNESS_LIMITS, " ".join(warnings))
    else:
        message = "Every harness can use everything in this workspace."
        condition(C.ALL_HARNESSES_SUPPORTED, True, R.SUPPORTED, message)
    return Plan(status, notices=notices, retry_after=retry)


def unused_files(configmaps: list[Obj], current: str, pods: list[Obj], uid: str) -> list[Obj]:
    """Of the Workspace's files ConfigMaps, those it controls that are not the ``current``
    one and that no pod mounts."""
    mounted = {
        volume["configMap"].get("name")
        for pod in pods
        for volume in (pod.get("spec") or {}).get("volumes") or []
        if "configMap" in volume
    }
    return [
        configmap
        for configmap in configmaps
        if controlled_by(configmap, uid)
        and configmap["metadata"]["name"] != current
        and configmap["metadata"]["name"] not in mounted
    ]
