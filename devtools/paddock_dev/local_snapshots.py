"""What a CSI driver's snapshot side would do for the local cluster's two CSI StorageClasses
(kwok's node's, and the real node's ``paddock-node-csi``), so that the real snapshot controller
(external-snapshotter's, run by ``up``) serves VolumeSnapshots here.

The snapshot controller turns a VolumeSnapshot into a VolumeSnapshotContent naming the driver
and the volume's handle; a CSI driver's sidecar then takes the snapshot and fills in the
content's status. Here that is a copy of the volume's directory under ``<root>/snapshots``:

- a content of this driver gets the sidecar's finalizer; one with a volume handle and no
  status gets its copy, then ``status`` (``snapshotHandle``, ``readyToUse: true``,
  ``creationTime``, ``restoreSize``);
- a content being deleted (the controller marks it) loses its copy (``deletionPolicy:
  Delete``), its status' handle, then the finalizer;
- ``restore`` copies a ready snapshot into a new volume's directory, for a claim whose
  ``dataSource`` is a VolumeSnapshot (``kwok_agent`` provisions it). Copies keep owners and
  modes, so a restored workspace belongs to the sandbox user as the original did.

Only the standard snapshot API is spoken: the operator cannot tell this from a CSI driver.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("paddock.local_snapshots")

GROUP, VERSION = "snapshot.storage.k8s.io", "v1"
DRIVER = "local-path.paddock.dev"  # the CSI driver of the local StorageClass's volumes
NODE_DRIVER = "node-local.paddock.dev"  # the same, for the real node's (it mounts them)
DRIVERS = (DRIVER, NODE_DRIVER)
SNAPSHOT_CLASS = "paddock-local"
NODE_SNAPSHOT_CLASS = "paddock-node-csi"
FINALIZER = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
BEING_DELETED = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
RESYNC_SECONDS = 60


def manifests(driver: str = DRIVER, snapshot_class: str = SNAPSHOT_CLASS) -> list[dict[str, Any]]:
    """The CSIDriver (no attach step; on the real node the kubelet gives a volume the pod's
    fsGroup) and the default VolumeSnapshotClass of the driver."""
    spec: dict[str, Any] = {"attachRequired": False, "podInfoOnMount": False}
    if driver == NODE_DRIVER:
        spec["fsGroupPolicy"] = "File"
    return [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": driver},
            "spec": spec,
        },
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "VolumeSnapshotClass",
            "metadata": {
                "name": snapshot_class,
                "annotations": {"snapshot.storage.kubernetes.io/is-default-class": "true"},
            },
            "driver": driver,
            "deletionPolicy": "Delete",
        },
    ]


def _size(directory: Path) -> int:
    return sum(p.lstat().st_size for p in directory.rglob("*") if not p.is_symlink())


def _copy(source: Path, target: Path) -> None:
    """The directory's files, links as links, owners and modes kept; into ``target`` (made or
    filled)."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", f"{source}/.", str(target)], check=True)


class Snapshotter:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.api = client.CustomObjectsApi()

    def sync(self, content: dict[str, Any]) -> None:
        """Bring one VolumeSnapshotContent of this driver where the sidecar would."""
        meta, spec = content["metadata"], content.get("spec") or {}
        if spec.get("driver") not in DRIVERS:
            return
        if meta.get("deletionTimestamp"):
            self._delete(content)
            return
        if FINALIZER not in (meta.get("finalizers") or []):
            self._patch(content, {"metadata": {"finalizers": [*meta.get("finalizers", []),
                                                              FINALIZER]}})  # fmt: skip
        handle = (spec.get("source") or {}).get("volumeHandle")
        if handle and not content.get("status"):
            self._take(content, Path(handle))

    def _take(self, content: dict[str, Any], volume: Path) -> None:
        name = content["metadata"]["name"]
        target = self.root / "snapshots" / name
        if not volume.is_dir():
            log.warning("snapshot %s: volume %s is not here", name, volume)
            return
        started = time.monotonic()
        _copy(volume, target)
        status = {
            "snapshotHandle": str(target),
            "readyToUse": True,
            "creationTime": time.time_ns(),
            "restoreSize": _size(target),
        }
        self.api.patch_cluster_custom_object_status(
            GROUP, VERSION, "volumesnapshotcontents", name, {"status": status}
        )
        log.info("snapshot %s of %s (%.2fs)", name, volume, time.monotonic() - started)

    def _delete(self, content: dict[str, Any]) -> None:
        meta, spec = content["metadata"], content.get("spec") or {}
        bound = ((spec.get("volumeSnapshotRef") or {}).get("uid")) or ""
        pre_provisioned = bool((spec.get("source") or {}).get("snapshotHandle"))
        if BEING_DELETED not in (meta.get("annotations") or {}) and (bound or not pre_provisioned):
            return  # the controller has not let it go yet
        handle = (content.get("status") or {}).get("snapshotHandle")
        if spec.get("deletionPolicy") == "Delete" and handle:
            path = Path(handle)
            if path.parent == self.root / "snapshots":  # only ever our own copies
                shutil.rmtree(path, ignore_errors=True)
            self.api.patch_cluster_custom_object_status(
                GROUP, VERSION, "volumesnapshotcontents", meta["name"],
                {"status": {"snapshotHandle": None, "readyToUse": None, "restoreSize": None}},
            )  # fmt: skip
        finalizers = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        if finalizers != (meta.get("finalizers") or []):
            self._patch(content, {"metadata": {"finalizers": finalizers}})

    def _patch(self, content: dict[str, Any], body: dict[str, Any]) -> None:
        meta = content["metadata"]
        body["metadata"]["resourceVersion"] = meta["resourceVersion"]
        try:
            self.api.patch_cluster_custom_object(
                GROUP, VERSION, "volumesnapshotcontents", meta["name"], body
            )
        except ApiException as exc:
            if exc.status not in (404, 409):  # gone, or changed: its next event comes
                raise

    def watch(self) -> None:
        """Sync each content as it changes, and every one again each minute (as a CSI
        sidecar's resync does): a content left for later (its volume not seen yet) or a watch
        that went quiet is taken up again."""
        stream = watch.Watch().stream(
            self.api.list_cluster_custom_object, GROUP, VERSION, "volumesnapshotcontents",
            timeout_seconds=RESYNC_SECONDS,
        )  # fmt: skip
        for event in stream:
            if event["type"] in ("ADDED", "MODIFIED"):
                self.sync(event["object"])


def snapshot_directory(namespace: str, name: str) -> Path | None:
    """The copy a ready VolumeSnapshot of this driver stands for, or None (not ready yet)."""
    api = client.CustomObjectsApi()
    try:
        snapshot: Any = api.get_namespaced_custom_object(
            GROUP, VERSION, namespace, "volumesnapshots", name
        )
        status = snapshot.get("status") or {}
        if not status.get("readyToUse") or not status.get("boundVolumeSnapshotContentName"):
            return None
        content: Any = api.get_cluster_custom_object(
            GROUP, VERSION, "volumesnapshotcontents", status["boundVolumeSnapshotContentName"]
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    handle = (content.get("status") or {}).get("snapshotHandle")
    if content["spec"].get("driver") not in DRIVERS or not handle:
        return None
    return Path(handle)


def restore(snapshot: Path, volume: Path) -> None:
    _copy(snapshot, volume)
