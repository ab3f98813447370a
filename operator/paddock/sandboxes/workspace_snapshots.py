"""A Workspace's upkeep: delete the snapshots it no longer wants (VolumeSnapshots and archives)
and list the rest in its status; delete the files ConfigMaps of its earlier specs that no pod
mounts any more."""

from __future__ import annotations

import logging
from typing import Any

from paddock.api.conditions import Notice
from paddock.api.reasons import WorkspaceReason
from paddock.api.workspace import WorkspaceSpec
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.kube.errors import ConflictError, KubeError
from paddock.objectstore.errors import ObjectStoreError
from paddock.render.files import render_files_configmap
from paddock.render.projections import render_projection
from paddock.render.snapshot import ARCHIVE_KIND, described
from paddock.render.workspace_hash import workspace_hash
from paddock.sandboxes.plan import Delete
from paddock.sandboxes.snapshot_lifetime import Lifetime, decide_lifetime
from paddock.sandboxes.workspace import load_spec, unused_files
from paddock.sandboxes.writes import ARCHIVES, Outcome
from paddock.settings import OperatorSettings
from paddock.times import utcnow
from paddock.vocab import names
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]
DELETE_RETRY = 30.0  # seconds before a refused snapshot delete is tried again
log = logging.getLogger("paddock.sandboxes")


def reconcile_workspace_snapshots(
    namespace: str, name: str, config: OperatorSettings
) -> tuple[Obj, Outcome] | None:
    """Delete the Workspace's snapshots it no longer wants and list the rest in its status:
    the Workspace as read and the outcome; None when it is gone (its snapshots go with it)."""
    body = CACHE.get("Workspace", namespace, name)
    if body is None:
        _delete_archives_of(namespace, name)
        return None
    uid = body["metadata"]["uid"]
    snapshots = [s for s in CACHE.listed("VolumeSnapshot", namespace) if controlled_by(s, uid)]
    archives = ARCHIVES.archives(namespace, name) if ARCHIVES.configured else []
    # An archive of an earlier Workspace of the name is another's: as its VolumeSnapshots
    # went with it, so do its archives.
    orphans = [a for a in archives if not controlled_by(a, uid)]
    snapshots += [a for a in archives if controlled_by(a, uid)]
    pvcs = CACHE.listed("PersistentVolumeClaim", namespace)
    spec = load_spec(body).spec

    def hash_now(image: str | None) -> str | None:
        if spec is None or image is None:
            return None  # an invalid Workspace, or a snapshot not of Paddock's: none is stale
        return workspace_hash(spec, image)

    lifetime = decide_lifetime(snapshots, hash_now, pvcs, utcnow(), config.snapshots.kept)
    for orphan in orphans:
        meta = orphan["metadata"]
        lifetime.deletes.append(Delete(str(orphan["kind"]), meta["name"], meta.get("uid", "")))
        why = f"{described(orphan)} is of an earlier Workspace named {name}; deleted."
        lifetime.notices.append(Notice(WorkspaceReason.SNAPSHOT_DELETED, why))
    notices, retry_after = _delete_unwanted(namespace, name, lifetime)
    if spec is not None:
        _delete_unused_files(namespace, name, uid, spec)
    locations = {a["metadata"]["name"]: ARCHIVES.location(a) for a in archives}
    for item in lifetime.listed:
        item.location = locations.get(item.name)
    listed = [item.to_api() for item in lifetime.listed]
    if (body.get("status") or {}).get("snapshots", []) != listed:
        stored = kube.patch_status("Workspace", namespace, name, {"snapshots": listed})
        if stored is not None:
            CACHE.seen("MODIFIED", stored)
    return body, Outcome(notices, retry_after)


def _delete_archives_of(namespace: str, workspace: str) -> None:
    """A deleted Workspace's archives (its VolumeSnapshots go by garbage collection); one the
    store refuses is left, and logged (the Workspace is gone: no object to report on)."""
    if not ARCHIVES.configured:
        return
    for archive in ARCHIVES.archives(namespace, workspace):
        try:
            ARCHIVES.delete(namespace, workspace, archive["metadata"]["name"])
        except ObjectStoreError as exc:
            log.warning(
                "archive %s of deleted Workspace %s/%s left: %s",
                archive["metadata"]["name"],
                namespace,
                workspace,
                exc.message,
            )


def _delete_unwanted(
    namespace: str, workspace: str, lifetime: Lifetime
) -> tuple[list[Notice], float | None]:
    """Delete the snapshots the Workspace no longer wants: the Event of each deleted, a
    Warning for each the API server (or the object store) refused (looked at again later),
    and when to look again."""
    notices: list[Notice] = []
    retry_after = lifetime.retry_after
    for delete, notice in zip(lifetime.deletes, lifetime.notices, strict=True):
        what = "archive" if delete.kind == ARCHIVE_KIND else delete.kind
        try:
            if delete.kind == ARCHIVE_KIND:
                ARCHIVES.delete(namespace, workspace, delete.name)
            else:
                kube.delete(delete.kind, namespace, delete.name, delete.uid)
        except ConflictError:  # the name is another snapshot's now: not ours to delete
            continue
        except (KubeError, ObjectStoreError) as exc:
            refused = f"{what} {delete.name} could not be deleted: {exc.message}"
            notices.append(Notice(WorkspaceReason.SNAPSHOT_DELETE_REFUSED, refused + "; retrying."))
            retry_after = min(retry_after or DELETE_RETRY, DELETE_RETRY)
            continue
        notices.append(notice)
    return notices, retry_after


def _delete_unused_files(namespace: str, workspace: str, uid: str, spec: WorkspaceSpec) -> None:
    """The Workspace's files ConfigMaps of an earlier spec that no pod mounts any more (the
    current one stays as long as the Workspace). A refusal is logged: nothing mounts it."""
    configmaps = [
        c
        for c in CACHE.listed("ConfigMap", namespace)
        if (c["metadata"].get("labels") or {}).get(names.WORKSPACE_LABEL) == workspace
    ]
    current = render_files_configmap(namespace, workspace, spec, render_projection(spec))
    pods = CACHE.listed("Pod", namespace)
    for configmap in unused_files(configmaps, current["metadata"]["name"], pods, uid):
        meta = configmap["metadata"]
        try:
            kube.delete("ConfigMap", namespace, meta["name"], meta["uid"])
        except KubeError as exc:
            log.warning("unused ConfigMap %s/%s left: %s", namespace, meta["name"], exc.message)
