"""A status as it is reported: with the health GitOps tools read (``api/health.py``) derived
from the kind's own phase and conditions, at the one place every Workspace, SandboxPolicy,
Sandbox and SandboxPool status is written."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from paddock.api import health
from paddock.api.common import Condition
from paddock.times import utcnow


def with_health(kind: str, body: dict[str, Any], status: BaseModel) -> BaseModel:
    """``status`` with Reconciling and Stalled (and a policy's Ready) set; a status without
    conditions as it is."""
    conditions: list[Condition] | None = getattr(status, "conditions", None)
    if conditions is None:
        return status
    if kind == "Sandbox":
        found = health.of_sandbox(getattr(status, "phase", None), conditions)
    elif kind == "SandboxPolicy":
        found = health.of_policy(conditions)
    elif kind == "Workspace":
        found = health.of_workspace(conditions)
    else:
        found = health.of_pool(conditions)
    generation = body["metadata"].get("generation")
    updated = health.with_health(conditions, found, generation, utcnow())
    return status.model_copy(update={"conditions": updated})
