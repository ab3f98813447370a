"""Portable snapshots as pure decisions: where a snapshot goes (a VolumeSnapshot, or an archive
in the object store) for each store setting, Ready held while an archive is made, a new volume
filled from an archive before it is Ready, a failed or impossible unpack given up for a cold
start, and archives in a Workspace's lifetime."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from test_snapshot_decide import (
    CLUSTER,
    NOW,
    body,
    conditions,
    created,
    current_hash,
    lifetime,
    ready_world,
    snapshot,
    spec,
    stamp,
    world,
)

from paddock.sandboxes.decide import decide_sandbox
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.plan import Create, Delete, Plan, Transfer, TransferState
from paddock.sandboxes.snapshots import Target, Unsupported, snapshot_target
from paddock.vocab import names
from support.pods import BOUND, ready_pod

Obj = dict[str, Any]
ON_OTHER = {"storage": {"storageClassName": "other"}}  # a class no VolumeSnapshotClass fits


def archive(name: str, **kw: Any) -> Obj:
    found = snapshot(name, **kw)
    del found["metadata"]["annotations"][names.STORAGE_CLASS_ANNOTATION]
    return {**found, "kind": "WorkspaceArchive"}


def transfers(plan: Plan, action: str) -> list[Transfer]:
    return [w for w in plan.writes if isinstance(w, Transfer) and w.action == action]


def test_the_store_setting_says_where_a_snapshot_goes() -> None:
    fast, other = "fast", "other"
    auto, volume, store = (replace(CLUSTER, store=s) for s in ("auto", "volume", "object"))
    assert snapshot_target(spec(), fast, auto) == Target("snaps")  # a class fits: a snapshot
    assert snapshot_target(spec(), other, auto) == Target(None)  # none fits: an archive
    assert isinstance(snapshot_target(spec(), other, volume), Unsupported)
    assert snapshot_target(spec(), fast, store) == Target(None)  # always an archive
    named = spec(storage={"volumeSnapshotClassName": "nope"})
    missing = snapshot_target(named, fast, auto)  # a named class that is missing stays an error
    assert isinstance(missing, Unsupported)
    assert missing.reason == "SnapshotClassNotFound"


def archiving_world(
    store: str = "auto", archives: tuple[Obj, ...] = (), **spec: Any
) -> SandboxWorld:
    base = ready_world([], **(spec or ON_OTHER))
    return replace(base, snapshots=replace(CLUSTER, store=store, archives=archives))


def test_an_archive_is_made_after_setup_and_ready_waits_for_it() -> None:
    plan = decide_sandbox(archiving_world(), "img", NOW)
    (take,) = transfers(plan, "take")
    assert take.pod == "sbx"
    made = take.archive
    assert (made["kind"], made["metadata"]["name"]) == ("WorkspaceArchive", "sbx-uid-1-setup")
    owner = made["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Workspace", "ws-uid")
    assert made["metadata"]["labels"][names.WORKSPACE_HASH_LABEL] == current_hash()
    assert not [
        w for w in plan.writes if isinstance(w, Create) and w.obj["kind"] == "VolumeSnapshot"
    ]
    status = plan.status.to_api()
    assert (status["phase"], conditions(plan)["Ready"]["reason"]) == ("SettingUp", "SnapshotTaking")
    assert status["snapshot"] == "sbx-uid-1-setup"
    unsupported = decide_sandbox(archiving_world("volume"), "img", NOW)
    assert not transfers(unsupported, "take")
    assert conditions(unsupported)["SnapshotReady"]["reason"] == "SnapshotsUnsupported"


def _later(status: Obj, made: Obj) -> SandboxWorld:
    base = archiving_world(archives=(made,))
    return replace(base, sandbox=body(status, **ON_OTHER))


def test_ready_is_held_while_the_archive_is_made_and_released_when_it_is_stored_or_fails() -> None:
    first = decide_sandbox(archiving_world(), "img", NOW)
    status = first.status.to_api()
    name = status["snapshot"]
    pending = archive(name, ready=False)
    del pending["status"]["creationTime"]
    held = decide_sandbox(_later(status, pending), "img", NOW)
    assert held.status.to_api()["phase"] == "SettingUp"
    assert not transfers(held, "take")  # made once
    stored = decide_sandbox(_later(status, archive(name)), "img", NOW)
    assert stored.status.to_api()["phase"] == "Ready"
    assert conditions(stored)["SnapshotReady"]["reason"] == "SnapshotTaken"
    assert "archive" in conditions(stored)["SnapshotReady"]["message"]
    failed = archive(name, ready=False, error={"message": "tar exited with 2"})
    plan = decide_sandbox(_later(status, failed), "img", NOW)
    assert plan.status.to_api()["phase"] == "Ready"
    assert conditions(plan)["SnapshotReady"]["reason"] == "SnapshotFailed"
    assert "tar exited with 2" in conditions(plan)["SnapshotReady"]["message"]


def test_a_new_volume_starts_from_the_newest_archive_of_the_hash_in_any_storage_class() -> None:
    here = current_hash()
    archives = (
        archive("old", hash_=here, ago=timedelta(hours=2)),
        archive("new", hash_=here, ago=timedelta(hours=1)),
        archive("other-hash", hash_="x", ago=timedelta(minutes=1)),
    )
    new = replace(
        world(body(**ON_OTHER)), snapshots=replace(CLUSTER, store="auto", archives=archives)
    )
    plan = decide_sandbox(new, "img", NOW)
    pvc = created(plan, "PersistentVolumeClaim")
    assert pvc["metadata"]["annotations"] == {names.RESTORE_ARCHIVE_ANNOTATION: "new"}
    assert "dataSource" not in pvc["spec"]
    assert [c["name"] for c in created(plan, "Pod")["spec"]["initContainers"]] == ["gate"]
    assert plan.status.to_api()["restoredFrom"] == "new"
    # "volume" restores from no archive, "object" from no VolumeSnapshot.
    volume_only = replace(new, snapshots=replace(CLUSTER, store="volume", archives=archives))
    assert "restoredFrom" not in decide_sandbox(volume_only, "img", NOW).status.to_api()
    on_fast = replace(
        world(body()),
        snapshots=replace(CLUSTER, store="object", snapshots=(snapshot("v", hash_=here),)),
    )
    assert "restoredFrom" not in decide_sandbox(on_fast, "img", NOW).status.to_api()


def unpacking_world(transfer: TransferState | None = None, **annotations: str) -> SandboxWorld:
    here = current_hash()
    stored = archive("a", hash_=here)
    first = decide_sandbox(
        replace(world(body()), snapshots=replace(CLUSTER, store="auto", archives=(stored,))),
        "img",
        NOW,
    )
    made = {w.obj["kind"]: w.obj for w in first.writes if isinstance(w, Create)}
    made |= {w.obj["metadata"]["name"]: w.obj for w in first.writes if isinstance(w, Create)}
    claim = made["PersistentVolumeClaim"]
    meta = {
        **claim["metadata"],
        "uid": "pvc-uid",
        "creationTimestamp": stamp(timedelta(seconds=30)),
    }
    meta["annotations"] = {**meta["annotations"], **annotations}
    return replace(
        world(body(first.status.to_api()), pvc={**claim, "metadata": meta, **BOUND}),
        snapshots=replace(CLUSTER, store="auto", archives=(stored,)),
        pod=ready_pod(),
        files=(made["ConfigMap"],),
        baseline=made["paddock-baseline"],
        network_policy=made["paddock-no-policy"],
        transfer=transfer,
    )


def test_the_archive_is_unpacked_once_the_pod_runs_and_the_sandbox_is_ready_after() -> None:
    plan = decide_sandbox(unpacking_world(), "img", NOW)
    (unpack,) = transfers(plan, "unpack")
    assert (unpack.archive["metadata"]["name"], unpack.pvc_uid, unpack.pod) == (
        "a",
        "pvc-uid",
        "sbx",
    )
    assert plan.status.to_api()["phase"] == "SettingUp"
    assert (conditions(plan)["Ready"]["reason"], conditions(plan)["Restored"]["status"]) == (
        "Restoring",
        "Unknown",
    )
    assert (
        "SetupComplete" not in conditions(plan)
        or conditions(plan)["SetupComplete"]["status"] != "True"
    )
    running = decide_sandbox(unpacking_world(TransferState("unpack", "a", True)), "img", NOW)
    assert not transfers(running, "unpack")  # not twice at once
    done = decide_sandbox(unpacking_world(TransferState("unpack", "a", False)), "img", NOW)
    recorded = decide_sandbox(unpacking_world(**{names.UNPACKED_ANNOTATION: "true"}), "img", NOW)
    for ready in (done, recorded):
        assert ready.status.to_api()["phase"] == "Ready"
        assert not transfers(ready, "unpack")
        assert conditions(ready)["Restored"]["reason"] == "Restored"
        assert (
            conditions(ready)["SetupComplete"]["message"]
            == "Restored from archive a: setup did not run."
        )


def test_a_failed_unpack_or_a_vanished_archive_is_given_up_for_a_cold_start() -> None:
    failed = unpacking_world(TransferState("unpack", "a", False, "not found in the object store"))
    gone = replace(unpacking_world(), snapshots=replace(CLUSTER, store="auto"))
    for stuck in (failed, gone):
        plan = decide_sandbox(stuck, "img", NOW)
        deleted = sorted(w.kind for w in plan.writes if isinstance(w, Delete))
        assert deleted == ["PersistentVolumeClaim", "Pod"]
        assert conditions(plan)["Restored"]["reason"] == "RestoreFailed"
        assert "rchive a " in conditions(plan)["Restored"]["message"]
        assert [n.reason for n in plan.notices] == ["RestoreFailed"]
    assert "not found" in conditions(decide_sandbox(failed, "img", NOW))["Restored"]["message"]


def test_archives_live_as_snapshots_do_and_one_being_unpacked_is_kept() -> None:
    expired = archive("old", ago=timedelta(hours=2), max_age=3600)
    result = lifetime([expired])
    assert [(d.kind, d.name) for d in result.deletes] == [("WorkspaceArchive", "old")]
    assert "archive old is past its snapshotMaxAge" in result.notices[0].message
    pvc = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "x", "annotations": {names.RESTORE_ARCHIVE_ANNOTATION: "old"}},
        "spec": {},
        "status": {"phase": "Bound"},
    }
    assert lifetime([expired], [pvc]).deletes == []  # still being unpacked
    pvc["metadata"]["annotations"][names.UNPACKED_ANNOTATION] = "true"
    assert [d.name for d in lifetime([expired], [pvc]).deletes] == ["old"]
