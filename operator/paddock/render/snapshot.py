"""The snapshot of a sandbox's workspace volume, and the parts of a snapshot that say what it
can be restored for. A snapshot is a VolumeSnapshot, or an archive of the volume's files in the
object store (where VolumeSnapshots are unavailable), described by an object of the same shape
(kind ``WorkspaceArchive``, never sent to the API server) so that one set of rules decides both.
Only the workspace PVC is ever snapshotted: HOME, run journals and the files ConfigMap are
other volumes, and secrets reach the pod as env only."""

from __future__ import annotations

from typing import Any

from paddock import API_VERSION
from paddock.vocab import names
from paddock.vocab.ownership import controller_reference

Obj = dict[str, Any]
SNAPSHOT_API = "snapshot.storage.k8s.io/v1"
ARCHIVE_KIND = "WorkspaceArchive"


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
    snapshot = _snapshot(name, sandbox, workspace, workspace_hash, max_age_seconds, image)
    snapshot["metadata"]["annotations"][names.STORAGE_CLASS_ANNOTATION] = storage_class
    return snapshot | {
        "apiVersion": SNAPSHOT_API,
        "kind": "VolumeSnapshot",
        "spec": {
            "volumeSnapshotClassName": snapshot_class,
            "source": {"persistentVolumeClaimName": names.pvc_name(sandbox["metadata"]["name"])},
        },
    }


def render_archive(
    *,
    name: str,
    sandbox: Obj,
    workspace: Obj,
    workspace_hash: str,
    max_age_seconds: int,
    image: str,
) -> Obj:
    """The archive to make of ``sandbox``'s workspace volume in the object store: what its
    manifest records once it is stored (then with ``status``). Of any StorageClass: an archive
    is files, restored into whatever volume the next sandbox has."""
    archive = _snapshot(name, sandbox, workspace, workspace_hash, max_age_seconds, image)
    return archive | {"apiVersion": API_VERSION, "kind": ARCHIVE_KIND}


def _snapshot(
    name: str, sandbox: Obj, workspace: Obj, workspace_hash: str, max_age_seconds: int, image: str
) -> Obj:
    meta = sandbox["metadata"]
    owner = controller_reference(workspace)
    owner["blockOwnerDeletion"] = False  # a Workspace is deleted at once; its snapshots follow
    return {
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
                # With the Workspace's spec, the image gives the hash it would have now.
                names.IMAGE_ANNOTATION: image,
            },
            "ownerReferences": [owner],
        },
    }


def is_archive(snapshot: Obj) -> bool:
    return snapshot.get("kind") == ARCHIVE_KIND


def described(snapshot: Obj) -> str:
    """How a message names the snapshot: "VolumeSnapshot NAME" or "archive NAME"."""
    kind = "archive" if is_archive(snapshot) else "VolumeSnapshot"
    return f"{kind} {snapshot['metadata']['name']}"


def snapshot_hash(snapshot: Obj) -> str | None:
    """The workspace hash the snapshot's volume was prepared from (None: not one of Paddock's,
    or unlabelled)."""
    return (snapshot["metadata"].get("labels") or {}).get(names.WORKSPACE_HASH_LABEL)


def ready_to_use(snapshot: Obj) -> bool:
    status = snapshot.get("status") or {}
    deleting = snapshot["metadata"].get("deletionTimestamp")
    return bool(status.get("readyToUse")) and not deleting and not status.get("error")


def restored_from(pvc: Obj | None) -> str | None:
    """The snapshot a PVC's volume is restored from: the VolumeSnapshot of its immutable
    ``dataSource``, or the archive its annotation names."""
    source = ((pvc or {}).get("spec") or {}).get("dataSource") or {}
    if source.get("kind") == "VolumeSnapshot":
        return str(source.get("name"))
    return archive_restored(pvc)


def archive_restored(pvc: Obj | None) -> str | None:
    """The archive a PVC's volume is (being) filled from, if any."""
    annotations = ((pvc or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(names.RESTORE_ARCHIVE_ANNOTATION)


def restoring(pvc: Obj) -> str | None:
    """The snapshot a PVC's volume is still being restored from (None: restored, or not a
    restore): a VolumeSnapshot until the claim is bound, an archive until it is unpacked."""
    annotations = pvc["metadata"].get("annotations") or {}
    if archive_restored(pvc) is not None:
        unpacked = annotations.get(names.UNPACKED_ANNOTATION) == "true"
        return None if unpacked else archive_restored(pvc)
    bound = (pvc.get("status") or {}).get("phase") == "Bound"
    return None if bound else restored_from(pvc)


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
