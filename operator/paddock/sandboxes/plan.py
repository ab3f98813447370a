"""What a reconcile reads and what it decides: the observed objects going in, and the plan
coming out (the status to write, the objects to create, patch or delete, the Events to post,
when to look again). Pure data; ``service.py`` gathers the one and applies the other."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from paddock.api.conditions import Notice
from paddock.api.policy import Decision
from paddock.runs.scrubbing import Scrubber

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Loaded(Generic[M]):
    """A spec as read from the API: valid (``spec``), invalid (``error`` says why), or not
    found (neither)."""

    name: str
    spec: M | None = None
    error: str | None = None
    uid: str | None = None  # of the object read (valid or not)


@dataclass(frozen=True)
class Create:
    obj: Obj


@dataclass(frozen=True)
class Patch:
    """A merge patch of an object the reconciled object owns; ``body`` carries the
    resourceVersion it was read at, so the patch fails if the object changed since."""

    kind: str
    name: str
    body: Obj


@dataclass(frozen=True)
class Delete:
    """A delete of an owned object, only if it is still the object read (``uid``)."""

    kind: str
    name: str
    uid: str
    resource_version: str = ""  # set: only if it has not changed at all since it was read

    @classmethod
    def of(cls, obj: Obj) -> Delete:
        """A delete of ``obj``, as it was read."""
        meta = obj["metadata"]
        return cls(obj["kind"], meta["name"], meta["uid"])

    @classmethod
    def unchanged(cls, obj: Obj) -> Delete:
        """A delete of ``obj`` only as it was read (a pool's member a run may have taken
        since: the take changed it, and the delete is refused)."""
        meta = obj["metadata"]
        return cls(obj["kind"], meta["name"], meta["uid"], str(meta.get("resourceVersion") or ""))


@dataclass(frozen=True)
class Transfer:
    """Copy the workspace volume's files through the sandbox's pod (in the background):
    ``take`` archives them into the object store as ``archive``; ``unpack`` fills the volume
    (the PVC of ``pvc_uid``) from it."""

    action: str  # "take" or "unpack"
    archive: Obj
    pod: str
    pvc_uid: str = ""


@dataclass(frozen=True)
class TransferState:
    """The sandbox's last transfer, as the operator knows it: running, done, or failed."""

    action: str
    archive: str
    running: bool
    error: str | None = None

    def done(self, action: str, archive: str) -> bool:
        found = (self.action, self.archive) == (action, archive)
        return found and not self.running and self.error is None


Write = Create | Patch | Delete | Transfer


@dataclass
class Plan:
    """The status to write, the writes to make first, the Events to post, and the seconds
    until the object should be looked at again (None: only when something changes)."""

    status: BaseModel
    writes: list[Write] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    retry_after: float | None = None
    policy_decisions: list[Decision] = field(default_factory=list)  # gate verdicts acted on


def scrubbed(plan: Plan, scrubber: Scrubber) -> Plan:
    """The plan with the secret values ``scrubber`` knows masked in its status and Events:
    they can carry what the sandbox printed (a failed setup step's output, a transfer's
    error), and whoever may read the Sandbox or its Events may not read its Secrets."""
    if not scrubber.forms:
        return plan
    status = type(plan.status).model_validate(scrubber(plan.status.model_dump(by_alias=True)))
    notices = [Notice(n.reason, scrubber.text(n.message)) for n in plan.notices]
    return replace(plan, status=status, notices=notices)
