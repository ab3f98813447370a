"""The VolumeSnapshot of a sandbox's workspace volume, and the parts of a snapshot that say
what it can be restored for. Only the workspace PVC is ever snapshotted: HOME, run journals
and the files ConfigMap are other volumes, and secrets reach the pod as env only."""

from __future__ import annotations

from typing import Any

from paddock.render import names
from paddock.render.ownership import controller_reference

Obj = dict[str, Any]
SNAPSHOT_API = "snapshot.storage.k8s.io/v1"


def render_volume_snapshot(
    *,
    name: str,
    sandbox: Obj,
    workspace: Obj,
    workspace_hash: str,
    snapshot_class: str,
    storage_class: str,
    max_age_seconds: int,
    image: str,
) -> Obj:
    """A snapshot of ``sandbox``'s workspace PVC, controlled by ``workspace`` so that it
    outlives the sandbox; the Workspace's reconcile deletes it when it is no longer wanted."""
    meta = sandbox["metadata"]
    owner = controller_reference(workspace)
    owner["blockOwnerDeletion"] = False  # a Workspace is deleted at once; its snapshots follow
    return {
        "apiVersion": SNAPSHOT_API,
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": {
                **names.MANAGED_BY,
                names.WORKSPACE_LABEL: workspace["metadata"]["name"],
                names.WORKSPACE_HASH_LABEL: workspace_hash,
                names.SNAPSHOT_OF_LABEL: meta["name"],
            },
            "annotations": {
                names.MAX_AGE_ANNOTATION: str(max_age_seconds),
                names.STORAGE_CLASS_ANNOTATION: storage_class,
                # With the Workspace's spec, the image gives the hash it would have now.
                names.IMAGE_ANNOTATION: image,
            },
            "ownerReferences": [owner],
        },
        "spec": {
            "volumeSnapshotClassName": snapshot_class,
            "source": {"persistentVolumeClaimName": names.pvc_name(meta["name"])},
        },
    }


def snapshot_hash(snapshot: Obj) -> str | None:
    """The workspace hash the snapshot's volume was prepared from (None: not one of Paddock's,
    or unlabelled)."""
    return (snapshot["metadata"].get("labels") or {}).get(names.WORKSPACE_HASH_LABEL)


def ready_to_use(snapshot: Obj) -> bool:
    status = snapshot.get("status") or {}
    deleting = snapshot["metadata"].get("deletionTimestamp")
    return bool(status.get("readyToUse")) and not deleting and not status.get("error")


def restored_from(pvc: Obj | None) -> str | None:
    """The VolumeSnapshot a PVC's volume is restored from (its immutable ``dataSource``)."""
    source = ((pvc or {}).get("spec") or {}).get("dataSource") or {}
    if source.get("kind") == "VolumeSnapshot":
        return str(source.get("name"))
    return None


_SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_SUFFIXES |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity_bytes(value: str | int) -> float | None:
    """A storage quantity (``10Gi``, ``500M``, ``1e9``) in bytes; None when it is not one."""
    text = str(value).strip()
    number = text.rstrip("kMGTPEi")
    suffix = text[len(number) :]
    if suffix not in _SUFFIXES:
        return None
    try:
        return float(number) * _SUFFIXES[suffix]
    except ValueError:
        return None


def restore_size(requested: str | int, snapshot: Obj) -> str:
    """The size of a volume restored from ``snapshot``: as requested, or the snapshot's
    ``restoreSize`` when that is larger (a smaller volume cannot hold it)."""
    size = (snapshot.get("status") or {}).get("restoreSize")
    if size is None:
        return str(requested)
    have, need = quantity_bytes(requested), quantity_bytes(size)
    return str(size) if have is not None and need is not None and need > have else str(requested)
