"""The local cluster serves VolumeSnapshots for its kwok node's StorageClass: the real snapshot
controller, and the local driver's snapshot side (``paddock_dev/local_snapshots.py``), through
the standard API only: a snapshot of a claim becomes ready, a claim from it starts with its
data, and deleting it removes the copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.kube import Cluster
from support.sandboxes import get, kwok_pod_dir
from support.waiting import wait_for

CLASS = "paddock-local"


def _claim(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            **spec,
        },
    }


def _pod_using(name: str, claim: str) -> dict[str, Any]:
    """A kwok pod, so that the claim (WaitForFirstConsumer) is bound."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def _volume_directory(cluster: Cluster, namespace: str, claim: str) -> Path:
    def bound() -> str | None:
        pvc = get(cluster, namespace, "pvc", claim) or {}
        return (
            pvc.get("spec", {}).get("volumeName")
            if pvc.get("status", {}).get("phase") == "Bound"
            else None
        )

    volume_name = wait_for(bound, 60, what=f"claim {claim} bound")
    volume = json.loads(cluster.kubectl("get", "pv", volume_name, "-o", "json").stdout)
    assert volume["spec"]["csi"]["driver"] == "local-path.paddock.dev"
    return Path(volume["spec"]["csi"]["volumeHandle"])


def _snapshot(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": name},
        "spec": {"volumeSnapshotClassName": CLASS, "source": {"persistentVolumeClaimName": claim}},
    }


def test_a_snapshot_is_taken_restored_into_a_new_claim_and_deleted(
    cluster: Cluster, namespace: str
) -> None:
    cluster.apply(_claim("first"), namespace)
    cluster.apply(_pod_using("first", "first"), namespace)
    first = _volume_directory(cluster, namespace, "first")
    (first / "notes").mkdir()
    (first / "notes" / "setup.txt").write_text("set up once\n")

    cluster.apply(_snapshot("after-setup", "first"), namespace)

    def ready() -> dict[str, Any] | None:
        status = (get(cluster, namespace, "volumesnapshot", "after-setup") or {}).get("status")
        return status if status and status.get("readyToUse") else None

    status = wait_for(ready, 60, what="the VolumeSnapshot ready to use")
    content_name = status["boundVolumeSnapshotContentName"]
    content = json.loads(
        cluster.kubectl("get", "volumesnapshotcontent", content_name, "-o", "json").stdout
    )
    copy = Path(content["status"]["snapshotHandle"])
    assert (copy / "notes" / "setup.txt").read_text() == "set up once\n"
    # A snapshot is of that moment: later writes to the volume are not in it.
    (first / "notes" / "later.txt").write_text("after the snapshot\n")

    source = {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": "after-setup",
    }
    cluster.apply(_claim("second", dataSource=source), namespace)
    cluster.apply(_pod_using("second", "second"), namespace)
    second = _volume_directory(cluster, namespace, "second")
    assert second != first
    assert (second / "notes" / "setup.txt").read_text() == "set up once\n"
    assert not (second / "notes" / "later.txt").exists()

    cluster.kubectl("delete", "-n", namespace, "volumesnapshot", "after-setup", "--wait=true")
    wait_for(
        lambda: (
            cluster.kubectl("get", "volumesnapshotcontent", content_name, check=False).returncode
            != 0
        ),
        60,
        what="the VolumeSnapshotContent deleted",
    )
    assert not copy.exists()
    assert (second / "notes" / "setup.txt").is_file()  # a restored volume is its own


def test_a_kwok_pod_runs_only_once_its_claimed_volume_is_mounted(
    cluster: Cluster, namespace: str
) -> None:
    """As a kubelet mounts volumes before it starts containers: the moment a kwok pod is seen
    Running, its mount is there (a run launched at once finds its workspace)."""
    cluster.apply(_claim("mounted"), namespace)
    cluster.apply(_pod_using("mounted", "mounted"), namespace)
    wait_for(
        lambda: (
            (get(cluster, namespace, "pod", "mounted") or {}).get("status", {}).get("phase")
            == "Running"
        ),
        60,
        what="the pod Running",
    )
    mount = kwok_pod_dir(namespace, "mounted") / "fs" / "data"
    assert mount.is_symlink()
    assert mount.resolve() == _volume_directory(cluster, namespace, "mounted")
