"""What sandboxes share, kept from the watches: which Workspace a pod's files ConfigMap is of,
and the deletion of a shared fence no Sandbox uses any more."""

from __future__ import annotations

import logging
from typing import Any

from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.kube.errors import ConflictError, KubeError
from paddock.sandboxes.fence import shared_owner
from paddock.vocab import names
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]
log = logging.getLogger("paddock.sandboxes")


def files_workspace(pod: Obj) -> str | None:
    """The Workspace whose files ConfigMap a pod mounts, as the watch shows that ConfigMap."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = (volume.get("configMap") or {}).get("name")
        found = (
            CACHE.peek("ConfigMap", pod["metadata"].get("namespace") or "", name) if name else None
        )
        if found is not None:
            return (found["metadata"].get("labels") or {}).get(names.WORKSPACE_LABEL)
    return None


def retire_fence(namespace: str, name: str) -> None:
    """A shared NetworkPolicy no Sandbox uses any more (``fence.py``): deleted, if it is
    still as the watch showed it and its controller is the namespace's SandboxPolicy or
    Namespace it names (a policy's own goes with the policy). A refusal is logged: the
    object selects no pod, and the next Sandbox to use it takes it up again."""
    obj = CACHE.peek("NetworkPolicy", namespace, name)
    owner = shared_owner(obj) if obj is not None else None
    if obj is None or owner is None:
        return
    kind, owner_name = owner
    found = CACHE.peek(kind, "" if kind == "Namespace" else namespace, owner_name)
    if found is None or not controlled_by(obj, found["metadata"]["uid"]):
        return
    meta = obj["metadata"]
    try:
        kube.delete("NetworkPolicy", namespace, name, meta["uid"], meta.get("resourceVersion"))
    except ConflictError:
        return  # changed since: a Sandbox that uses it again patched it
    except KubeError as exc:
        log.warning("unused NetworkPolicy %s/%s left: %s", namespace, name, exc.message)
