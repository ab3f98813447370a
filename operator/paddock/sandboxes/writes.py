"""Applying a Workspace's, Sandbox's or pool's plan: each write made once (a create whose name
is taken is told apart from one this operator made already), an archive's transfer started,
then the status written, only what changed. The doing half of ``service.py``'s reconciles."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from paddock.api.conditions import Notice
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.kube.errors import ConflictError
from paddock.sandboxes.archives import ArchiveStore
from paddock.sandboxes.owned import pruned
from paddock.sandboxes.plan import Create, Delete, Patch, Plan, Transfer, Write
from paddock.sandboxes.reporting import with_health
from paddock.vocab.ownership import controller_uid

Obj = dict[str, Any]


ARCHIVES = ArchiveStore()  # the workspace archives in the object store, where configured


@dataclass
class Outcome:
    """What the handler reports once the plan is applied: Events, and when to look again."""

    notices: list[Notice] = field(default_factory=list)
    retry_after: float | None = None
    message: str = ""


_SHARED_LOCKS = tuple(threading.Lock() for _ in range(64))  # taken inside a Sandbox's lock


def report_status(kind: str, body: Obj, plan: Plan) -> Outcome:
    """Write the plan's status (only what changed) once its writes are made."""
    meta = body["metadata"]
    namespace = meta["namespace"]
    status = _changed(body.get("status") or {}, with_health(kind, body, plan.status))
    if status:
        stored = kube.patch_status(kind, namespace, meta["name"], status)
        if stored is not None:
            CACHE.seen("MODIFIED", stored)  # the next reconcile starts from what it wrote
    message = str(getattr(plan.status, "message", "") or "")
    return Outcome(plan.notices, plan.retry_after, message)


def make_write(sandbox: Obj, write: Write) -> bool:
    """Make the write; False for a create whose name is taken."""
    namespace = sandbox["metadata"]["namespace"]
    if isinstance(write, Transfer):
        ARCHIVES.start(namespace, sandbox, write)
    elif isinstance(write, Create | Patch) and _kind(write) in ("NetworkPolicy", "ConfigMap"):
        # Shared by sandboxes that decide at once: one at a time, and not again. A name
        # taken is read, so that the next decision knows whose it is.
        kind, name = _kind(write), _name(write)
        with _SHARED_LOCKS[hash((namespace, name)) % len(_SHARED_LOCKS)]:
            known = CACHE.peek(kind, namespace, name)
            if known is not None and _made_already(known, write):
                return True
            if not _write_once(namespace, write):
                return _taken(namespace, write)
    else:
        return _write_once(namespace, write)
    return True


def _write_once(namespace: str, write: Write) -> bool:
    if isinstance(write, Create):
        made = kube.create(write.obj)
        if made is None:
            return False
        CACHE.seen("ADDED", made)  # before its watch event: the next look sees it
    elif isinstance(write, Patch):
        CACHE.seen("MODIFIED", kube.patch(write.kind, namespace, write.name, write.body))
    elif isinstance(write, Delete) and write.resource_version:
        with contextlib.suppress(ConflictError):  # changed since (taken): not deleted
            kube.delete(write.kind, namespace, write.name, write.uid, write.resource_version)
    elif isinstance(write, Delete):
        kube.delete(write.kind, namespace, write.name, write.uid)
    return True


class NameTakenError(Exception):
    """A shared object's name is held by an object that is not the one it would be."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"{kind} {name}")
        self.kind, self.name = kind, name


def _taken(namespace: str, write: Create | Patch) -> bool:
    """A shared object's create found its name taken: True if by the object it would be
    (another operator made it: kept, as its watch will show it), False if by none any more
    (decide again); else ``NameTakenError``, since no watch would show that object."""
    kind, name = _kind(write), _name(write)
    found = kube.get(kind, namespace, name)
    if found is None:
        return False
    if isinstance(write, Create) and controller_uid(found) == controller_uid(write.obj):
        CACHE.seen("ADDED", found)
        return True
    raise NameTakenError(kind, name)


def _kind(write: Create | Patch) -> str:
    return str(write.obj["kind"]) if isinstance(write, Create) else write.kind


def _name(write: Create | Patch) -> str:
    return str(write.obj["metadata"]["name"]) if isinstance(write, Create) else write.name


def _made_already(known: Obj, write: Create | Patch) -> bool:
    """Whether another sandbox's reconcile made the write since this one read ``known``:
    created it, or patched it to what this one wants."""
    if isinstance(write, Create):
        return True
    return bool(pruned(known.get("spec")) == pruned(write.body.get("spec")))


def _changed(old: Obj, status: BaseModel) -> Obj:
    """The fields of the new status that differ from the stored one (a merge patch); a field
    set to None on purpose is removed."""
    new: Obj = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    for name in status.model_fields_set:
        alias = type(status).model_fields[name].alias or name
        if getattr(status, name) is None and old.get(alias) is not None:
            new[alias] = None
    return {key: value for key, value in new.items() if old.get(key) != value}
