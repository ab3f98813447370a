"""Workspace snapshots on the real API server, with the real snapshot controller and the local
cluster's snapshot driver, and the operator running: the first sandbox of a workspace is
snapshotted after setup, the next one is restored from it without setup, snapshots expire
with their max age and go when the Workspace changes, a volume that cannot be snapshotted is
reported and works, and a sandbox can be forked from another's snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from support.kube import Cluster
from support.runs import command_run, log_events, of_type, wait_for_run
from support.sandboxes import (
    condition,
    events_for,
    get,
    merge_patch,
    posted,
    sandbox,
    secret,
    setup_containers,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

SECRET_VALUE = "snapshot-secret-never-in-a-snapshot-93b1"


def _snapshot_ready(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """The Sandbox's status once its SnapshotReady condition is True."""
    return _status_when(
        cluster, namespace, name, _snapshot_is_ready, f"sandbox {name}'s snapshot ready"
    )


def _snapshot_is_ready(status: dict[str, Any]) -> bool:
    found = [c for c in status["conditions"] if c["type"] == "SnapshotReady"]
    return bool(found) and found[0]["status"] == "True"


def _status_when(
    cluster: Cluster, namespace: str, name: str, holds: Any, what: str
) -> dict[str, Any]:
    """The Sandbox's status once ``holds(status)`` is true."""

    def check() -> dict[str, Any] | None:
        status = status_of(cluster, namespace, "sandbox", name)
        return status if status.get("conditions") and holds(status) else None

    return wait_for(check, 120, what=what)


def _live(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    """The object, unless it is missing or being deleted."""
    found = get(cluster, namespace, kind, name)
    return None if found is None or found["metadata"].get("deletionTimestamp") else found


def _init_containers(cluster: Cluster, namespace: str, pod: str) -> list[str]:
    found = get(cluster, namespace, "pod", pod) or {}
    return setup_containers(found)


def _snapshots(cluster: Cluster, namespace: str, workspace_name: str) -> list[dict[str, Any]]:
    return list(status_of(cluster, namespace, "workspace", workspace_name).get("snapshots") or [])


def test_the_next_sandbox_of_a_workspace_is_restored_without_setup(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app", setup=["echo prepared >> setup-runs.txt"]), namespace)
    cluster.apply(sandbox("first", "app", storage={"size": "1Gi"}), namespace)
    first = _snapshot_ready(cluster, namespace, "first")
    assert first["phase"] == "Ready"
    assert "restoredFrom" not in first
    assert condition(first, "Restored")["reason"] == "NoSnapshot"
    assert _init_containers(cluster, namespace, "first") == ["project", "setup"]
    taken = first["snapshot"]
    snapshot = get(cluster, namespace, "volumesnapshot", taken)
    assert snapshot is not None
    ws = get(cluster, namespace, "workspace", "app")
    assert ws is not None
    # It belongs to the Workspace (outliving the sandbox), and is of the workspace volume only.
    owners = snapshot["metadata"]["ownerReferences"]
    assert [(o["kind"], o["uid"]) for o in owners] == [("Workspace", ws["metadata"]["uid"])]
    assert snapshot["spec"]["source"] == {"persistentVolumeClaimName": "first-workspace"}
    labels = snapshot["metadata"]["labels"]
    assert labels["paddock.dev/workspace-hash"] == ws["status"]["hash"] == first["workspaceHash"]
    listed = wait_for(lambda: _snapshots(cluster, namespace, "app") or None, 60, what="listed")
    assert [(s["name"], s["ready"], s["workspaceHash"]) for s in listed] == [
        (taken, True, ws["status"]["hash"])
    ]

    cluster.kubectl("delete", "sandbox", "first", "-n", namespace, "--wait=true")
    restored_before = _restored_starts()
    cluster.apply(sandbox("second", "app", storage={"size": "1Gi"}), namespace)
    second = wait_for_phase(cluster, namespace, "second", "Ready")
    assert second["restoredFrom"] == taken
    assert condition(second, "Restored")["status"] == "True"
    assert condition(second, "SetupComplete")["reason"] == "Restored"
    assert _init_containers(cluster, namespace, "second") == []  # no clone, project or setup
    assert "setupSeconds" not in second["timings"]
    pvc = get(cluster, namespace, "pvc", "second-workspace") or {}
    assert pvc["spec"]["dataSource"]["name"] == taken
    assert "snapshot" not in second  # a copy of a snapshot is not snapshotted again
    assert posted(cluster, namespace, "first", "SnapshotTaken")
    wait_for(lambda: _restored_starts() > restored_before, 30, what="the restored start counted")
    # A run in it hears how its sandbox started.
    cluster.apply(command_run("check", "second", "echo hi"), namespace)
    assert wait_for_run(cluster, namespace, "check")["phase"] == "Succeeded"
    (ready,) = of_type(log_events(cluster, namespace, "check"), "sandbox.ready")
    assert ready["data"]["outcome"] == "sandbox.restored"
    assert ready["data"]["restoredFrom"] == taken


def _restored_starts() -> float:
    """Sandboxes Ready from a snapshot, as the in-process operator's histogram counts them."""
    count = REGISTRY.get_sample_value("paddock_sandbox_ready_seconds_count", {"start": "restored"})
    return count or 0.0


def test_an_expired_snapshot_is_deleted_and_the_next_sandbox_starts_cold(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    lifecycle = {"snapshotMaxAge": "20s"}
    cluster.apply(sandbox("first", "app", lifecycle=lifecycle), namespace)
    taken = _snapshot_ready(cluster, namespace, "first")["snapshot"]
    wait_for(
        lambda: get(cluster, namespace, "volumesnapshot", taken) is None,
        90,
        what="the snapshot deleted after its max age",
    )
    # The Workspace's status follows the snapshot's deletion event (a moment later).
    wait_for(
        lambda: _snapshots(cluster, namespace, "app") == [],
        30,
        what="the Workspace's status to drop the deleted snapshot",
    )
    first = _status_when(
        cluster,
        namespace,
        "first",
        lambda s: condition(s, "SnapshotReady")["reason"] == "SnapshotDeleted",
        "the sandbox told its snapshot is gone",
    )
    assert first["phase"] == "Ready"
    cluster.apply(sandbox("second", "app", lifecycle=lifecycle), namespace)
    second = wait_for_phase(cluster, namespace, "second", "Ready")
    assert "restoredFrom" not in second
    assert condition(second, "Restored")["reason"] == "NoSnapshot"
    assert "project" in _init_containers(cluster, namespace, "second")  # set up again


def _deletes_refused(namespace: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and its binding) refusing every VolumeSnapshot delete in
    ``namespace``: the API server's own refusal, as a cluster's policy engine would give it."""
    name = f"no-snapshot-deletes-{namespace}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["snapshot.storage.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["DELETE"],
                        "resources": ["volumesnapshots"],
                    }
                ]
            },
            "validations": [{"expression": "false", "message": "snapshots are kept here"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    return [policy, binding]


def test_a_refused_snapshot_delete_is_a_warning_on_the_workspace_and_retried(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    refusing = _deletes_refused(namespace)
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"kind": "List", "apiVersion": "v1",
                                                          "items": refusing}))  # fmt: skip
    try:
        cluster.apply(workspace("app"), namespace)
        cluster.apply(sandbox("first", "app", lifecycle={"snapshotMaxAge": "10s"}), namespace)
        taken = _snapshot_ready(cluster, namespace, "first")["snapshot"]
        warned = wait_for(
            lambda: [
                e for e in events_for(cluster, namespace, "app")
                if e["reason"] == "SnapshotDeleteRefused"
            ],
            90, what="a Warning that the expired snapshot's delete was refused",
        )  # fmt: skip
        assert warned[0]["type"] == "Warning"
        assert taken in warned[0]["message"]
        assert "snapshots are kept here" in warned[0]["message"]
        assert get(cluster, namespace, "volumesnapshot", taken) is not None
        deleted = [
            e for e in events_for(cluster, namespace, "app") if e["reason"] == "SnapshotDeleted"
        ]
        assert deleted == []  # not said to be deleted while it is not
    finally:
        for item in reversed(refusing):
            cluster.kubectl("delete", item["kind"], item["metadata"]["name"], "--wait=true")
    wait_for(
        lambda: get(cluster, namespace, "volumesnapshot", taken) is None,
        90,
        what="the snapshot deleted once the API server lets it be",
    )


def test_a_changed_workspace_starts_cold_and_its_old_snapshot_goes(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app", setup=["true"]), namespace)
    cluster.apply(sandbox("first", "app"), namespace)
    taken = _snapshot_ready(cluster, namespace, "first")["snapshot"]
    old_hash = status_of(cluster, namespace, "workspace", "app")["hash"]
    cluster.apply(workspace("app", setup=["true", "echo again"]), namespace)
    wait_for(
        lambda: get(cluster, namespace, "volumesnapshot", taken) is None,
        60,
        what="the snapshot of the old hash deleted",
    )
    new_hash = status_of(cluster, namespace, "workspace", "app")["hash"]
    assert new_hash != old_hash
    cluster.apply(sandbox("second", "app"), namespace)
    second = _snapshot_ready(cluster, namespace, "second")
    assert "restoredFrom" not in second
    assert _init_containers(cluster, namespace, "second") == ["project", "setup"]
    snapshot = get(cluster, namespace, "volumesnapshot", second["snapshot"]) or {}
    assert snapshot["metadata"]["labels"]["paddock.dev/workspace-hash"] == new_hash


def test_a_volume_that_cannot_be_snapshotted_is_reported_and_works(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    # A statically provisioned volume of a class no VolumeSnapshotClass serves.
    storage_class = f"{namespace}-static"
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"{namespace}-static"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": storage_class,
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": f"/tmp/{namespace}-static"},  # never mounted
            },
        },
        namespace,  # ignored: a PersistentVolume belongs to no namespace
    )
    try:
        cluster.apply(workspace("app"), namespace)
        storage = {"size": "1Gi", "storageClassName": storage_class}
        cluster.apply(sandbox("plain", "app", storage=storage), namespace)
        status = wait_for_phase(cluster, namespace, "plain", "Ready")
        snapshot = condition(status, "SnapshotReady")
        assert (snapshot["status"], snapshot["reason"]) == ("False", "SnapshotsUnsupported")
        assert storage_class in snapshot["message"]
        assert "snapshot" not in status
        said = posted(cluster, namespace, "plain", "SnapshotsUnsupported")
        assert len(said) == 1, said
    finally:
        cluster.kubectl("delete", "pv", f"{namespace}-static", "--wait=false")


def test_a_sandbox_forks_from_another_sandboxs_latest_snapshot(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(workspace("other", setup=["true"]), namespace)
    cluster.apply(sandbox("origin", "app"), namespace)
    taken = _snapshot_ready(cluster, namespace, "origin")["snapshot"]
    # Of another Workspace, and whatever the hash: a fork starts from what it names.
    fork = sandbox("fork", "other", restoreFrom={"sandboxName": "origin"})
    cluster.apply(fork, namespace)
    forked = wait_for_phase(cluster, namespace, "fork", "Ready")
    assert forked["restoredFrom"] == taken
    assert _init_containers(cluster, namespace, "fork") == []
    assert condition(forked, "UpToDate")["reason"] == "WorkspaceChanged"
    by_name = sandbox("by-name", "app", restoreFrom={"volumeSnapshotName": taken})
    cluster.apply(by_name, namespace)
    assert wait_for_phase(cluster, namespace, "by-name", "Ready")["restoredFrom"] == taken
    # A fork of a snapshot that does not exist waits, saying so.
    cluster.apply(sandbox("waits", "app", restoreFrom={"volumeSnapshotName": "nope"}), namespace)
    waiting = _status_when(
        cluster, namespace, "waits", lambda s: s.get("phase") == "Pending", "the fork waiting"
    )
    assert condition(waiting, "Ready")["reason"] == "SnapshotNotReady"
    assert "nope" in waiting["message"]
    assert get(cluster, namespace, "pvc", "waits-workspace") is None


def test_after_run_snapshots_hold_no_secret_and_no_run_journal(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(secret("creds", token=SECRET_VALUE), namespace)
    secrets = [{"name": "TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}}]
    cluster.apply(workspace("app", secrets=secrets), namespace)
    cluster.apply(sandbox("box", "app", lifecycle={"snapshot": "after-run"}), namespace)
    setup_snapshot = _snapshot_ready(cluster, namespace, "box")["snapshot"]
    script = 'echo "$TOKEN" > /dev/null; echo made > "$PADDOCK_WORKSPACE/made.txt"; echo "$TOKEN"'
    cluster.apply(command_run("writes", "box", script), namespace)
    assert wait_for_run(cluster, namespace, "writes")["phase"] == "Succeeded"
    status = _status_when(
        cluster,
        namespace,
        "box",
        lambda s: s.get("snapshot") != setup_snapshot and _snapshot_is_ready(s),
        "the snapshot after the run ready",
    )
    copy = _snapshot_directory(cluster, namespace, status["snapshot"])
    assert (copy / "made.txt").read_text() == "made\n"  # the run's work is in it
    for path in copy.rglob("*"):
        if path.is_file():
            assert SECRET_VALUE not in path.read_text(errors="replace"), path
    assert not [p for p in copy.rglob("*") if "journal" in p.name or p.name == "run"]
    ws = get(cluster, namespace, "workspace", "app") or {}
    assert SECRET_VALUE not in str(ws)
    assert SECRET_VALUE not in str(status)


def _snapshot_directory(cluster: Cluster, namespace: str, name: str) -> Path:
    """The local driver's copy a ready VolumeSnapshot stands for (its content's handle)."""
    snapshot = get(cluster, namespace, "volumesnapshot", name) or {}
    content = snapshot["status"]["boundVolumeSnapshotContentName"]
    found = json.loads(
        cluster.kubectl("get", "volumesnapshotcontent", content, "-o", "json").stdout
    )
    return Path(found["status"]["snapshotHandle"])


def test_a_paused_sandbox_resumes_from_its_volume_not_a_snapshot(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("box", "app"), namespace)
    taken = _snapshot_ready(cluster, namespace, "box")["snapshot"]
    merge_patch(cluster, namespace, "sandbox", "box", {"spec": {"lifecycle": {"paused": True}}})
    wait_for_phase(cluster, namespace, "box", "Paused")
    merge_patch(cluster, namespace, "sandbox", "box", {"spec": {"lifecycle": {"paused": False}}})
    resumed = wait_for_phase(cluster, namespace, "box", "Ready")
    assert resumed["snapshot"] == taken  # no second snapshot: the volume was kept
    assert "restoredFrom" not in resumed


@pytest.fixture
def short_restore_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator started after this gives a restore 5 s."""
    monkeypatch.setenv("PADDOCK_RESTORE_TIMEOUT_SECONDS", "5")


def test_a_restore_that_does_not_finish_in_time_falls_back_to_a_cold_start(
    cluster: Cluster, namespace: str, short_restore_timeout: None, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("first", "app"), namespace)
    taken = _snapshot_ready(cluster, namespace, "first")["snapshot"]
    # Its pod fits no node, so its claim (WaitForFirstConsumer) is never restored.
    stuck = sandbox("stuck", "app", nodeSelector={"paddock.dev/no-such-node": "x"})
    cluster.apply(stuck, namespace)
    status = _status_when(
        cluster,
        namespace,
        "stuck",
        lambda s: condition(s, "Restored")["reason"] == "RestoreFailed",
        "the restore given up",
    )
    assert taken in condition(status, "Restored")["message"]
    assert "within 5s" in condition(status, "Restored")["message"]
    warned = wait_for(
        lambda: [
            e for e in events_for(cluster, namespace, "stuck") if e["reason"] == "RestoreFailed"
        ],
        30,
        what="a RestoreFailed Event",
    )
    assert warned[0]["type"] == "Warning"
    # A new, empty claim replaces the one from the snapshot, and the pod will set it up.
    wait_for(
        lambda: (
            (p := get(cluster, namespace, "pvc", "stuck-workspace"))
            and "dataSource" not in p["spec"]
            and not p["metadata"].get("deletionTimestamp")
        ),
        60,
        what="a cold claim",
    )
    pod = wait_for(lambda: get(cluster, namespace, "pod", "stuck"), 60, what="the new pod")
    assert "project" in setup_containers(pod)
    assert "restoredFrom" not in status_of(cluster, namespace, "sandbox", "stuck")
