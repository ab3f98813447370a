"""Snapshots: the VolumeSnapshots Paddock took (labelled with their Workspace), and the
StorageClasses and VolumeSnapshotClasses that say whether a sandbox's volume can be
snapshotted. Read from watches only; a cluster that does not serve snapshot.storage.k8s.io has
none of them, and its sandboxes report SnapshotsUnsupported.

A snapshot's events reach the Sandbox it was taken of (SnapshotReady) and its Workspace,
whose reconcile (through its own queue, so a max age expires on time without a timer per
Workspace) deletes the snapshots it no longer wants and lists the rest in its status."""

from __future__ import annotations

from typing import Any

import kopf

from paddock import metrics
from paddock.handlers.reporting import report
from paddock.sandboxes import service, workspace_snapshots
from paddock.settings import OperatorSettings
from paddock.vocab.names import SNAPSHOT_OF_LABEL, WORKSPACE_LABEL

SNAPSHOT_GROUP = "snapshot.storage.k8s.io"


@kopf.on.event(SNAPSHOT_GROUP, "v1", "volumesnapshots", labels={WORKSPACE_LABEL: kopf.PRESENT})
async def snapshot_seen(
    type: str | None,
    body: kopf.Body,
    labels: kopf.Labels,
    namespace: str | None,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    service.watched(type, dict(body))
    if labels.get(SNAPSHOT_OF_LABEL):
        memo.reconciles.ask((namespace or "", labels[SNAPSHOT_OF_LABEL]))
    memo.workspace_snapshots.ask((namespace or "", labels[WORKSPACE_LABEL]))


@kopf.on.event("storage.k8s.io", "v1", "storageclasses")
@kopf.on.event(SNAPSHOT_GROUP, "v1", "volumesnapshotclasses")
async def snapshot_support_seen(type: str | None, body: kopf.Body, **_: Any) -> None:
    service.watched(type, dict(body))


def workspace_snapshots_named(
    namespace: str, name: str, config: OperatorSettings, attempt: int = 0
) -> float | None:
    """Reconcile a Workspace's snapshots (from its queue): the seconds after which to look
    again (the next expiry, or a restore still reading one)."""
    with metrics.reconciling("WorkspaceSnapshots"):
        reconciled = workspace_snapshots.reconcile_workspace_snapshots(namespace, name, config)
    if reconciled is None:
        return None
    report(*reconciled, retry=False)
    return reconciled[1].retry_after
