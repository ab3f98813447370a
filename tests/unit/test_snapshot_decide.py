"""Snapshots as pure decisions: which VolumeSnapshotClass fits a volume, which snapshot a new
volume is restored from, when a restore is given up for a cold start, when Ready waits for
the snapshot after setup, and which of a Workspace's snapshots are deleted."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.sandboxes.decide import decide_sandbox
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.plan import Create, Delete, Loaded, Plan
from paddock.sandboxes.snapshot_lifetime import decide_lifetime
from paddock.sandboxes.snapshots import (
    SnapshotCluster,
    Unsupported,
    Wanted,
    restore_failure,
    restore_source,
    snapshot_class,
)
from paddock.vocab import names
from support.pods import BOUND, ready_pod

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
DRIVER = "csi.example.com"
HASH = "hash-current"


def stamp(ago: timedelta) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def storage_class(name: str, provisioner: str = DRIVER, default: bool = False) -> Obj:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": provisioner,
    }


def snapshot_class_obj(name: str, driver: str = DRIVER, default: bool = False) -> Obj:
    annotations = {"snapshot.storage.kubernetes.io/is-default-class": "true"} if default else {}
    return {"metadata": {"name": name, "annotations": annotations}, "driver": driver}


def snapshot(
    name: str,
    *,
    ago: timedelta = timedelta(minutes=5),
    hash_: str = HASH,
    ready: bool = True,
    of: str = "origin",
    klass: str = "fast",
    max_age: int = 86400,
    **status: Any,
) -> Obj:
    return {
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": name,
            "namespace": "team",
            "uid": f"uid-{name}",
            "creationTimestamp": stamp(ago),
            "labels": {
                names.WORKSPACE_LABEL: "ws",
                names.WORKSPACE_HASH_LABEL: hash_,
                names.SNAPSHOT_OF_LABEL: of,
            },
            "annotations": {
                names.STORAGE_CLASS_ANNOTATION: klass,
                names.MAX_AGE_ANNOTATION: str(max_age),
                names.IMAGE_ANNOTATION: "img",
            },
        },
        "status": {"readyToUse": ready, "creationTime": stamp(ago), **status},
    }


CLUSTER = SnapshotCluster(
    (storage_class("fast", default=True), storage_class("other", "other.example.com")),
    (snapshot_class_obj("snaps", default=True), snapshot_class_obj("more")),
)


def spec(**fields: Any) -> SandboxSpec:
    return SandboxSpec.model_validate({"workspaceRef": {"name": "ws"}, **fields})


# --- which class fits ------------------------------------------------------------------------


def test_the_default_snapshot_class_of_the_volumes_driver_fits() -> None:
    assert snapshot_class(spec(), "fast", CLUSTER) == "snaps"


def test_a_named_snapshot_class_is_used_when_it_fits() -> None:
    named = spec(storage={"volumeSnapshotClassName": "more"})
    assert snapshot_class(named, "fast", CLUSTER) == "more"


def test_no_class_of_the_driver_is_unsupported_and_says_which_class() -> None:
    found = snapshot_class(spec(), "other", CLUSTER)
    assert isinstance(found, Unsupported)
    assert found.reason == "SnapshotsUnsupported"
    assert "other" in found.message
    assert "other.example.com" in found.message
    assert isinstance(snapshot_class(spec(), "fast", SnapshotCluster()), Unsupported)


def test_a_named_class_that_is_missing_or_of_another_driver_is_reported() -> None:
    missing = snapshot_class(spec(storage={"volumeSnapshotClassName": "nope"}), "fast", CLUSTER)
    assert isinstance(missing, Unsupported)
    assert missing.reason == "SnapshotClassNotFound"
    mismatched = snapshot_class(
        spec(storage={"volumeSnapshotClassName": "snaps"}), "other", CLUSTER
    )
    assert isinstance(mismatched, Unsupported)
    assert mismatched.reason == "SnapshotsUnsupported"


# --- which snapshot a new volume starts from -------------------------------------------------


def choose(snapshots: list[Obj], sandbox_spec: SandboxSpec | None = None, **kw: Any) -> Any:
    cluster = replace(CLUSTER, snapshots=tuple(snapshots))
    return restore_source(sandbox_spec or spec(), HASH, "fast", cluster, kw.get("forked"), NOW)


def test_the_newest_ready_snapshot_of_the_same_hash_and_class_is_restored() -> None:
    found = choose(
        [
            snapshot("old", ago=timedelta(hours=3)),
            snapshot("new", ago=timedelta(hours=1)),
            snapshot("newest-not-ready", ago=timedelta(minutes=1), ready=False),
            snapshot("other-hash", ago=timedelta(minutes=2), hash_="hash-old"),
            snapshot("other-class", ago=timedelta(minutes=2), klass="other"),
            snapshot("failed", ago=timedelta(minutes=2), error={"message": "disk full"}),
        ]
    )
    assert found["metadata"]["name"] == "new"


def test_a_snapshot_older_than_the_max_age_is_not_restored() -> None:
    old = [snapshot("old", ago=timedelta(hours=2))]
    assert choose(old, spec(lifecycle={"snapshotMaxAge": "90m"})) is None
    assert choose(old, spec(lifecycle={"snapshotMaxAge": "3h"}))["metadata"]["name"] == "old"


def test_snapshot_none_never_restores() -> None:
    assert choose([snapshot("s")], spec(lifecycle={"snapshot": "none"})) is None


def test_a_fork_takes_what_it_names_whatever_its_age_and_hash_or_waits() -> None:
    by_sandbox = spec(restoreFrom={"sandboxName": "origin"})
    old = snapshot("old", ago=timedelta(days=30), hash_="hash-old")
    assert choose([old], by_sandbox)["metadata"]["name"] == "old"
    assert isinstance(choose([], by_sandbox), Wanted)
    by_name = spec(restoreFrom={"volumeSnapshotName": "mine"})
    assert choose([], by_name, forked=snapshot("mine", hash_="x"))["metadata"]["name"] == "mine"
    waiting = choose([], by_name, forked=snapshot("mine", ready=False))
    assert isinstance(waiting, Wanted)
    assert "mine" in waiting.message
    assert isinstance(choose([], by_name), Wanted)


def restoring_pvc(ago: timedelta, phase: str = "Pending") -> Obj:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "sbx-workspace", "uid": "pvc-uid", "creationTimestamp": stamp(ago)},
        "spec": {"dataSource": {"kind": "VolumeSnapshot", "name": "s"}},
        "status": {"phase": phase},
    }


def test_a_restore_is_given_up_when_its_snapshot_goes_fails_or_takes_too_long() -> None:
    pvc = restoring_pvc(timedelta(seconds=30))
    assert restore_failure(pvc, snapshot("s"), NOW, 300) is None
    assert "deleted" in str(restore_failure(pvc, None, NOW, 300))
    failed = snapshot("s", error={"message": "disk full"})
    assert "disk full" in str(restore_failure(pvc, failed, NOW, 300))
    late = restoring_pvc(timedelta(seconds=301))
    assert "within 300s" in str(restore_failure(late, snapshot("s"), NOW, 300))
    bound = restoring_pvc(timedelta(hours=1), phase="Bound")
    assert restore_failure(bound, None, NOW, 300) is None  # done: nothing more to read


# --- the Sandbox's decision ------------------------------------------------------------------


def body(status: Obj | None = None, **spec_fields: Any) -> Obj:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {
            "name": "sbx",
            "namespace": "team",
            "uid": "uid-1",
            "generation": 1,
            "creationTimestamp": stamp(timedelta(minutes=10)),
        },
        "spec": {"workspaceRef": {"name": "ws"}, **spec_fields},
        "status": status or {},
    }


def world(sandbox: Obj, snapshots: list[Obj] = (), **parts: Any) -> SandboxWorld:  # type: ignore[assignment]
    base = SandboxWorld(
        sandbox,
        Loaded("sbx", SandboxSpec.model_validate(sandbox["spec"])),
        Loaded("ws", WorkspaceSpec(setup=["make"]), uid="ws-uid"),
        snapshots=replace(CLUSTER, snapshots=tuple(snapshots)),
    )
    return replace(base, **parts)


def created(plan: Plan, kind: str) -> Obj:
    (obj,) = [w.obj for w in plan.writes if isinstance(w, Create) and w.obj["kind"] == kind]
    return obj


def conditions(plan: Plan) -> dict[str, Obj]:
    return {c["type"]: c for c in plan.status.to_api()["conditions"]}


def current_hash() -> str:
    plan = decide_sandbox(world(body()), "img", NOW)
    return str(plan.status.to_api()["workspaceHash"])


def test_a_new_sandbox_restores_the_matching_snapshot_with_no_init_container() -> None:
    match = snapshot("ready-one", hash_=current_hash())
    plan = decide_sandbox(world(body(), [match]), "img", NOW)
    pvc = created(plan, "PersistentVolumeClaim")
    assert pvc["spec"]["dataSource"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": "ready-one",
    }
    assert [c["name"] for c in created(plan, "Pod")["spec"]["initContainers"]] == ["gate"]
    assert plan.status.to_api()["restoredFrom"] == "ready-one"
    assert conditions(plan)["Restored"]["reason"] == "Restoring"


def test_without_a_match_the_volume_is_empty_set_up_and_says_why() -> None:
    plan = decide_sandbox(world(body(), [snapshot("x", hash_="other")]), "img", NOW)
    assert "dataSource" not in created(plan, "PersistentVolumeClaim")["spec"]
    assert [c["name"] for c in created(plan, "Pod")["spec"]["initContainers"]][-2:] == [
        "setup",
        "gate",
    ]
    assert conditions(plan)["Restored"]["reason"] == "NoSnapshot"


def restoring_world(age: timedelta, snapshots: list[Obj]) -> SandboxWorld:
    first = decide_sandbox(world(body(), snapshots), "img", NOW)
    status = first.status.to_api()
    made = {w.obj["kind"]: w.obj for w in first.writes if isinstance(w, Create)}
    made |= {w.obj["metadata"]["name"]: w.obj for w in first.writes if isinstance(w, Create)}
    pod = {**made["Pod"], "metadata": {**made["Pod"]["metadata"], "uid": "pod-uid"}}
    claim = made["PersistentVolumeClaim"]
    meta = {**claim["metadata"], "uid": "pvc-uid", "creationTimestamp": stamp(age)}
    pvc = {**claim, "metadata": meta, "status": {"phase": "Pending"}}
    return world(
        body(status),
        snapshots,
        pvc=pvc,
        pod=pod,
        files=(made["ConfigMap"],),
        baseline=made["paddock-baseline"],
        network_policy=made["paddock-no-policy"],
    )


def test_a_failed_restore_deletes_the_volume_and_pod_then_starts_cold() -> None:
    match = snapshot("s", hash_=current_hash())
    stuck = restoring_world(timedelta(minutes=6), [match])
    plan = decide_sandbox(stuck, "img", NOW)
    assert sorted(w.kind for w in plan.writes if isinstance(w, Delete)) == [
        "PersistentVolumeClaim",
        "Pod",
    ]
    assert conditions(plan)["Restored"]["reason"] == "RestoreFailed"
    assert [n.reason for n in plan.notices] == ["RestoreFailed"]  # a Warning Event
    assert plan.notices[0].type == "Warning"
    # Once the volume is gone, a cold one, even though the snapshot is still there.
    after = replace(stuck, sandbox=body(plan.status.to_api()), pvc=None, pod=None)
    cold = decide_sandbox(after, "img", NOW)
    assert "dataSource" not in created(cold, "PersistentVolumeClaim")["spec"]
    assert "initContainers" in created(cold, "Pod")["spec"]


def ready_world(
    snapshots: list[Obj], status: Obj | None = None, **spec_fields: Any
) -> SandboxWorld:
    first = decide_sandbox(world(body(**spec_fields), snapshots), "img", NOW)
    made = {w.obj["kind"]: w.obj for w in first.writes if isinstance(w, Create)}
    made |= {w.obj["metadata"]["name"]: w.obj for w in first.writes if isinstance(w, Create)}
    return world(
        body(status or first.status.to_api(), **spec_fields),
        snapshots,
        pvc={**made["PersistentVolumeClaim"], **BOUND},
        pod=ready_pod(),
        files=(made["ConfigMap"],),
        baseline=made["paddock-baseline"],
        network_policy=made["paddock-no-policy"],
    )


def test_ready_waits_until_the_snapshot_after_setup_is_cut() -> None:
    plan = decide_sandbox(ready_world([]), "img", NOW)
    taken = created(plan, "VolumeSnapshot")
    assert taken["metadata"]["name"] == "sbx-uid-1-setup"
    assert taken["spec"] == {
        "volumeSnapshotClassName": "snaps",
        "source": {"persistentVolumeClaimName": "sbx-workspace"},
    }
    owner = taken["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Workspace", "ws-uid", True)
    status = plan.status.to_api()
    assert (status["phase"], conditions(plan)["Ready"]["reason"]) == ("SettingUp", "SnapshotTaking")
    assert status["snapshot"] == "sbx-uid-1-setup"
    # Cut but not ready yet: Ready; ready later: SnapshotReady.
    cut = snapshot("sbx-uid-1-setup", ready=False)
    later = ready_world([cut], status)
    plan = decide_sandbox(later, "img", NOW)
    assert plan.status.to_api()["phase"] == "Ready"
    assert not [w for w in plan.writes if isinstance(w, Create)]  # taken once
    assert conditions(plan)["SnapshotReady"]["status"] == "False"
    done = replace(
        later, snapshots=replace(CLUSTER, snapshots=(snapshot(cut["metadata"]["name"]),))
    )
    assert (
        conditions(decide_sandbox(done, "img", NOW))["SnapshotReady"]["reason"] == "SnapshotTaken"
    )


def test_snapshot_none_takes_none_and_unsupported_says_so_once() -> None:
    plan = decide_sandbox(ready_world([], lifecycle={"snapshot": "none"}), "img", NOW)
    assert plan.status.to_api()["phase"] == "Ready"
    assert "SnapshotReady" not in conditions(plan)
    unsupported = replace(ready_world([]), snapshots=SnapshotCluster())
    plan = decide_sandbox(unsupported, "img", NOW)
    assert plan.status.to_api()["phase"] == "Ready"
    assert conditions(plan)["SnapshotReady"]["reason"] == "SnapshotsUnsupported"
    again = replace(unsupported, sandbox=body(plan.status.to_api()))
    plan = decide_sandbox(again, "img", NOW)
    assert not [n for n in plan.notices if n.reason == "SnapshotsUnsupported"]


def test_after_run_snapshots_each_finished_run_once() -> None:
    taken = snapshot("sbx-uid-1-setup")
    base = ready_world([taken], lifecycle={"snapshot": "after-run"})
    ready = decide_sandbox(base, "img", NOW).status.to_api()
    annotated = body(ready, lifecycle={"snapshot": "after-run"})
    annotated["metadata"]["annotations"] = {names.LAST_RUN_ANNOTATION: "run12345"}
    plan = decide_sandbox(replace(base, sandbox=annotated), "img", NOW)
    assert created(plan, "VolumeSnapshot")["metadata"]["name"] == "sbx-uid-1-run-run12345"
    annotated["status"] = plan.status.to_api()
    again = decide_sandbox(replace(base, sandbox=annotated), "img", NOW)
    assert not [w for w in again.writes if isinstance(w, Create)]


# --- a Workspace's snapshots -----------------------------------------------------------------


def lifetime(snapshots: list[Obj], pvcs: list[Obj] = (), keep: int = 3) -> Any:  # type: ignore[assignment]
    # The Workspace's hash now, for the image each snapshot was set up in.
    return decide_lifetime(snapshots, lambda image: HASH, list(pvcs), NOW, keep)


def test_expired_superseded_and_surplus_snapshots_are_deleted() -> None:
    result = lifetime(
        [
            snapshot("expired", ago=timedelta(hours=2), max_age=3600),
            snapshot("stale", hash_="hash-old"),
            *(snapshot(f"keep-{i}", ago=timedelta(minutes=i)) for i in range(1, 5)),
        ]
    )
    assert sorted(d.name for d in result.deletes) == ["expired", "keep-4", "stale"]
    assert [s.name for s in result.listed] == ["keep-1", "keep-2", "keep-3"]
    assert {n.reason for n in result.notices} == {"SnapshotDeleted"}
    # The next look: when the oldest kept one expires (a day after it was taken).
    assert result.retry_after == (timedelta(days=1) - timedelta(minutes=3)).total_seconds()


def test_staleness_is_judged_for_the_image_the_snapshot_was_set_up_in() -> None:
    hashes = {"img": HASH, "other-img": "hash-for-other-img"}
    kept = snapshot("same-spec-other-image", hash_="hash-for-other-img")
    kept["metadata"]["annotations"][names.IMAGE_ANNOTATION] = "other-img"
    result = decide_lifetime([kept], hashes.get, [], NOW, 3)
    assert result.deletes == []
    unknown = decide_lifetime([snapshot("s", hash_="x")], lambda image: None, [], NOW, 3)
    assert unknown.deletes == []  # an invalid Workspace: nothing is judged stale


def test_a_snapshot_being_restored_from_is_kept_until_the_restore_is_done() -> None:
    expired = snapshot("s", ago=timedelta(hours=2), max_age=3600)
    pvc = restoring_pvc(timedelta(seconds=10))
    waiting = lifetime([expired], [pvc])
    assert waiting.deletes == []
    assert waiting.retry_after == 10.0
    bound = restoring_pvc(timedelta(seconds=10), phase="Bound")
    assert [d.name for d in lifetime([expired], [bound]).deletes] == ["s"]


def test_sandboxes_set_up_together_take_one_snapshot_not_one_each() -> None:
    base = ready_world([])
    other = snapshot("other-sbx-setup", ready=False, hash_=current_hash())
    del other["status"]["creationTime"]  # being taken by another sandbox
    plan = decide_sandbox(replace(base, snapshots=replace(CLUSTER, snapshots=(other,))), "img", NOW)
    assert not [w for w in plan.writes if isinstance(w, Create)]
    assert plan.status.to_api()["phase"] == "Ready"
    failed = snapshot("other-sbx-setup", hash_=current_hash(), error={"message": "x"})
    plan = decide_sandbox(
        replace(base, snapshots=replace(CLUSTER, snapshots=(failed,))), "img", NOW
    )
    assert created(plan, "VolumeSnapshot")  # a failed one stands for nothing


def test_a_pending_restore_is_looked_at_again_at_its_deadline() -> None:
    match = snapshot("s", hash_=current_hash())
    waiting = decide_sandbox(restoring_world(timedelta(seconds=100), [match]), "img", NOW)
    assert waiting.retry_after == 201.0  # 300 s after the claim was made, and a second
    assert conditions(waiting)["Restored"]["reason"] == "Restoring"
