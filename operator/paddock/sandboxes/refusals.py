"""What a refusal by the API server means for a Sandbox: the plan once one of its writes was
refused. Pure."""

from __future__ import annotations

from datetime import datetime

from paddock.api.common import stored_status
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import SandboxReason as R
from paddock.api.sandbox import SandboxPhase, SandboxStatus
from paddock.sandboxes.draft import StatusDraft
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.owned import RETRY_CONFLICT, conflict_message
from paddock.sandboxes.plan import Create, Patch, Plan, Transfer, Write

_REFUSED = {
    "Pod": R.POD_REFUSED,
    "PersistentVolumeClaim": R.VOLUME_REFUSED,
    "ConfigMap": R.FILES_REFUSED,
    "NetworkPolicy": R.NETWORK_POLICY_REFUSED,
}


def refused(
    world: SandboxWorld,
    plan: Plan,
    write: Write,
    message: str,
    *,
    invalid: bool,
    now: datetime,
    retry_after: float,
) -> Plan:
    """The plan once the API server refused one of its writes: Ready=False with the server's
    own words, a Warning Event, and another look after ``retry_after``. An object the server
    finds invalid fails the sandbox until its spec changes; any other refusal (a quota, an
    admission webhook, RBAC) leaves it Pending."""
    if isinstance(write, Create):
        verb, kind, name = "create", write.obj["kind"], write.obj["metadata"]["name"]
    elif isinstance(write, Transfer):  # started in the background, so not refused here
        verb, kind, name = write.action, write.archive["kind"], write.archive["metadata"]["name"]
    else:
        verb = "update" if isinstance(write, Patch) else "delete"
        kind, name = write.kind, write.name
    reason = _REFUSED.get(kind, R.POD_REFUSED)
    text = f"The API server refused to {verb} {kind} {name}: {message}"
    meta = world.sandbox["metadata"]
    status = plan.status.model_copy(deep=True)
    assert isinstance(status, SandboxStatus)
    old = stored_status(SandboxStatus, world.sandbox)
    draft = StatusDraft(old, meta.get("generation"), now, status)
    draft.condition(C.READY, False, reason, text)
    phase = SandboxPhase.FAILED if invalid else SandboxPhase.PENDING
    return draft.finish(phase, reason, text, None, retry_after)


def taken(world: SandboxWorld, plan: Plan, kind: str, name: str, now: datetime) -> Plan:
    """The plan once a create of a shared object (its files, a fence) found the name held by
    an object that is not the one it would be, which no watch shows: a name conflict, looked
    at again in ``RETRY_CONFLICT``, as one the decision saw."""
    message = conflict_message(kind, name)
    meta = world.sandbox["metadata"]
    status = plan.status.model_copy(deep=True)
    assert isinstance(status, SandboxStatus)
    draft = StatusDraft(
        stored_status(SandboxStatus, world.sandbox), meta.get("generation"), now, status
    )
    draft.condition(C.READY, False, R.NAME_CONFLICT, message)
    return draft.finish(SandboxPhase.PENDING, R.NAME_CONFLICT, message, None, RETRY_CONFLICT)
