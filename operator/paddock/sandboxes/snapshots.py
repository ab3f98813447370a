"""Deciding a Sandbox's snapshots: whether the cluster can snapshot its volume, which snapshot
a new volume is restored from, whether a restore has failed, and when to take a snapshot.
Pure; the world it reads comes from the watches of StorageClasses, VolumeSnapshotClasses and
Paddock's VolumeSnapshots, and from the operator's index of its archives in the object store.

"Fits" is the CSI rule: a VolumeSnapshotClass can snapshot a volume when its ``driver`` is the
provisioner of the volume's StorageClass. Nothing here is specific to one driver. Where no class
fits (or the operator is told to), a snapshot is an archive in the object store instead, of
the same hash, max age and lifetime, restorable into a volume of any StorageClass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from paddock.api.fields import parse_duration
from paddock.api.reasons import SandboxReason as R
from paddock.api.sandbox import SandboxSpec, SnapshotWhen
from paddock.render.snapshot import (
    described,
    is_archive,
    ready_to_use,
    render_archive,
    render_volume_snapshot,
    snapshot_hash,
)
from paddock.times import parse_time
from paddock.vocab.names import SNAPSHOT_OF_LABEL, STORAGE_CLASS_ANNOTATION, snapshot_name

Obj = dict[str, Any]
DEFAULT_STORAGE_CLASS = "storageclass.kubernetes.io/is-default-class"
DEFAULT_SNAPSHOT_CLASS = "snapshot.storage.kubernetes.io/is-default-class"


@dataclass(frozen=True)
class SnapshotCluster:
    """What the cluster offers for snapshots, as the watches show it."""

    storage_classes: tuple[Obj, ...] = ()
    snapshot_classes: tuple[Obj, ...] = ()
    snapshots: tuple[Obj, ...] = ()  # Paddock's VolumeSnapshots in the sandbox's namespace
    archives: tuple[Obj, ...] = ()  # its Workspace's archives: stored, being made, or failed
    # Where snapshots are taken and restored from: "volume" (VolumeSnapshots only), "object"
    # (archives only), or "auto" (a VolumeSnapshot where a class fits the volume, else an
    # archive). "auto" with no object store configured is "volume".
    store: str = "volume"

    def restorable(self) -> tuple[Obj, ...]:
        """The snapshots a new volume may start from, as the store setting allows."""
        volumes = self.snapshots if self.store != "object" else ()
        return volumes + (self.archives if self.store != "volume" else ())

    def named(self, name: str) -> Obj | None:
        return next(
            (s for s in self.snapshots + self.archives if s["metadata"]["name"] == name), None
        )


@dataclass(frozen=True)
class Unsupported:
    reason: R
    message: str


@dataclass(frozen=True)
class Wanted:
    """A snapshot the sandbox waits for (a fork's source that is not ready yet)."""

    message: str


def _default(objs: tuple[Obj, ...], annotation: str) -> Obj | None:
    return next(
        (o for o in objs if (o["metadata"].get("annotations") or {}).get(annotation) == "true"),
        None,
    )


def storage_class_of(spec: SandboxSpec, pvc: Obj | None, cluster: SnapshotCluster) -> str | None:
    """The StorageClass the workspace volume has (or will get): the PVC's, the spec's, or the
    cluster's default."""
    stored = ((pvc or {}).get("spec") or {}).get("storageClassName")
    if stored or spec.storage.storage_class_name:
        return str(stored or spec.storage.storage_class_name)
    default = _default(cluster.storage_classes, DEFAULT_STORAGE_CLASS)
    return None if default is None else str(default["metadata"]["name"])


def snapshot_class(
    spec: SandboxSpec, storage_class: str | None, cluster: SnapshotCluster
) -> str | Unsupported:
    """The VolumeSnapshotClass that snapshots the sandbox's volume, or why there is none."""
    if storage_class is None:
        return Unsupported(
            R.SNAPSHOTS_UNSUPPORTED,
            "The workspace volume has no StorageClass (none named, no cluster default), so no "
            "VolumeSnapshotClass can be matched to it; the sandbox works without snapshots.",
        )
    found = next(
        (c for c in cluster.storage_classes if c["metadata"]["name"] == storage_class), None
    )
    provisioner = None if found is None else found.get("provisioner")
    fitting = tuple(c for c in cluster.snapshot_classes if c.get("driver") == provisioner)
    named = spec.storage.volume_snapshot_class_name
    if named:
        chosen = next((c for c in cluster.snapshot_classes if c["metadata"]["name"] == named), None)
        if chosen is None:
            return Unsupported(
                R.SNAPSHOT_CLASS_NOT_FOUND,
                f"VolumeSnapshotClass {named} (spec.storage.volumeSnapshotClassName) does not "
                "exist; the sandbox works without snapshots. Create it or fix the name.",
            )
        if chosen not in fitting:
            return Unsupported(
                R.SNAPSHOTS_UNSUPPORTED,
                f"VolumeSnapshotClass {named} is for driver {chosen.get('driver')}, but "
                f"StorageClass {storage_class} provisions with {provisioner}; the sandbox works "
                "without snapshots.",
            )
        return named
    if not fitting:
        return Unsupported(
            R.SNAPSHOTS_UNSUPPORTED,
            f"No VolumeSnapshotClass for the provisioner of StorageClass {storage_class} "
            f"({provisioner or 'unknown'}), or the cluster does not serve "
            "snapshot.storage.k8s.io/v1; the sandbox works without snapshots.",
        )
    chosen = _default(fitting, DEFAULT_SNAPSHOT_CLASS) or fitting[0]
    return str(chosen["metadata"]["name"])


@dataclass(frozen=True)
class Target:
    """Where a snapshot goes: a VolumeSnapshot of ``snapshot_class``, or (None) an archive in
    the object store."""

    snapshot_class: str | None


def snapshot_target(
    spec: SandboxSpec, storage_class: str | None, cluster: SnapshotCluster
) -> Target | Unsupported:
    """Where the sandbox's snapshot goes, or why it cannot be taken."""
    if cluster.store == "object":
        return Target(None)
    chosen = snapshot_class(spec, storage_class, cluster)
    if isinstance(chosen, Unsupported):
        if cluster.store == "auto" and chosen.reason == R.SNAPSHOTS_UNSUPPORTED:
            return Target(None)  # a class that was named and is missing stays an error
        return chosen
    return Target(chosen)


def taken_at(snapshot: Obj) -> datetime | None:
    """When the snapshot's point in time was cut (the API server's ``creationTime``)."""
    return parse_time((snapshot.get("status") or {}).get("creationTime"))


def _newest(snapshots: list[Obj]) -> Obj | None:
    dated = [(taken_at(s), s["metadata"]["name"], s) for s in snapshots if taken_at(s)]
    return max(dated, key=lambda item: (item[0], item[1]))[2] if dated else None


def _labelled(snapshot: Obj, key: str) -> str | None:
    return (snapshot["metadata"].get("labels") or {}).get(key)


def restore_source(
    spec: SandboxSpec,
    workspace_hash: str,
    storage_class: str | None,
    cluster: SnapshotCluster,
    forked: Obj | None,
    now: datetime,
) -> Obj | Wanted | None:
    """The snapshot a new workspace volume starts from: the fork's (waiting for it if it is
    not ready), else the newest ready snapshot of the same workspace hash and StorageClass no
    older than ``snapshotMaxAge``; None: set up from scratch."""
    source = spec.restore_from
    if source is not None and source.volume_snapshot_name:
        name = source.volume_snapshot_name
        if forked is None:
            return Wanted(f"Waiting for VolumeSnapshot {name} (spec.restoreFrom): not found.")
        return forked if ready_to_use(forked) else Wanted(f"VolumeSnapshot {name} is not ready.")
    if source is not None and source.sandbox_name:
        of = [
            s
            for s in cluster.restorable()
            if _labelled(s, SNAPSHOT_OF_LABEL) == source.sandbox_name
        ]
        newest = _newest([s for s in of if ready_to_use(s)])
        if newest is None:
            return Wanted(f"Sandbox {source.sandbox_name} has no ready snapshot yet.")
        return newest
    if spec.lifecycle.snapshot == SnapshotWhen.NONE:
        return None
    max_age = parse_duration(spec.lifecycle.snapshot_max_age)
    candidates = [
        s
        for s in cluster.restorable()
        if ready_to_use(s)
        and snapshot_hash(s) == workspace_hash
        and _fits(s, storage_class)
        and (taken_at(s) or now) >= now - max_age
    ]
    return _newest(candidates)


def _fits(snapshot: Obj, storage_class: str | None) -> bool:
    """Whether a volume of ``storage_class`` can start from the snapshot: an archive fits any,
    a VolumeSnapshot one of the StorageClass it was taken in."""
    if is_archive(snapshot):
        return True
    taken_in = (snapshot["metadata"].get("annotations") or {}).get(STORAGE_CLASS_ANNOTATION)
    return storage_class is not None and taken_in == storage_class


def restore_deadline(pvc: Obj, now: datetime, timeout: float) -> float:
    """Seconds until a restore still pending is given up (a second past the timeout)."""
    created = parse_time(pvc["metadata"].get("creationTimestamp")) or now
    return max((created + timedelta(seconds=timeout) - now).total_seconds(), 0.0) + 1.0


def restore_failure(pvc: Obj, source: Obj | None, now: datetime, timeout: float) -> str | None:
    """Why the restore of ``pvc`` from its snapshot (``source``, None: gone) will not finish,
    or None while it may still (or has: the PVC is bound)."""
    if (pvc.get("status") or {}).get("phase") == "Bound":
        return None
    name = pvc["spec"]["dataSource"]["name"]
    if source is None:
        return f"VolumeSnapshot {name} was deleted before the volume was restored from it."
    error = (source.get("status") or {}).get("error")
    if error:
        return f"VolumeSnapshot {name} failed: {error.get('message') or 'no message'}."
    created = parse_time(pvc["metadata"].get("creationTimestamp"))
    if created is not None and now - created > timedelta(seconds=timeout):
        return f"The volume was not restored from VolumeSnapshot {name} within {timeout:.0f}s."
    return None


@dataclass(frozen=True)
class SnapshotStep:
    """What to do about the sandbox's snapshots now: one to take, the SnapshotReady condition,
    the snapshot the status names, and whether Ready waits for the snapshot to be cut."""

    create: Obj | None = None
    archive: Obj | None = None  # an archive to make, in place of a VolumeSnapshot
    condition: tuple[bool, R, str] | None = None
    name: str | None = None
    hold: str | None = None


@dataclass(frozen=True)
class Moment:
    """Where the sandbox stands for snapshots: the last one taken (``taken``), whether the
    volume was just set up (not restored) and is Ready for the first time, the last finished
    run (``last_run``, for after-run), and the volume's workspace hash and StorageClass."""

    taken: str | None
    just_set_up: bool
    last_run: str | None
    volume_hash: str
    storage_class: str | None
    image: str = ""  # the sandbox's image, which its workspace hash includes


def snapshot_step(
    sandbox: Obj,
    workspace: Obj,
    spec: SandboxSpec,
    moment: Moment,
    cluster: SnapshotCluster,
    now: datetime,
    timeout: float,
) -> SnapshotStep:
    when = spec.lifecycle.snapshot
    meta = sandbox["metadata"]
    label = None
    if when != SnapshotWhen.NONE and moment.taken is None and moment.just_set_up:
        label = "setup"
    elif when == SnapshotWhen.AFTER_RUN and moment.last_run:
        run_label = f"run-{moment.last_run}"
        if snapshot_name(meta["name"], meta["uid"], run_label) != moment.taken:
            label = run_label
    if label == "setup" and _covered(spec, moment, cluster, now):
        label = None  # another sandbox's snapshot of the same setup is there, or being taken
    if label is None:
        return _state(moment, cluster, now, timeout)
    target = snapshot_target(spec, moment.storage_class, cluster)
    if isinstance(target, Unsupported):
        return SnapshotStep(condition=(False, target.reason, target.message), name=moment.taken)
    name = snapshot_name(meta["name"], meta["uid"], label)
    common: Obj = {
        "name": name,
        "sandbox": sandbox,
        "workspace": workspace,
        "workspace_hash": moment.volume_hash,
        "max_age_seconds": int(parse_duration(spec.lifecycle.snapshot_max_age).total_seconds()),
        "image": moment.image,
    }
    hold = None
    if target.snapshot_class is None:
        message = f"Archiving the workspace volume into the object store as {name}."
        hold = message if label == "setup" else None
        return SnapshotStep(
            None, render_archive(**common), (False, R.SNAPSHOT_TAKING, message), name, hold
        )
    snapshot = render_volume_snapshot(
        **common, snapshot_class=target.snapshot_class, storage_class=str(moment.storage_class)
    )
    message = f"Taking VolumeSnapshot {name} of the workspace volume."
    hold = message if label == "setup" else None
    return SnapshotStep(snapshot, None, (False, R.SNAPSHOT_TAKING, message), name, hold)


def _covered(spec: SandboxSpec, moment: Moment, cluster: SnapshotCluster, now: datetime) -> bool:
    """Whether a snapshot after setup would repeat one that exists: of the same workspace hash
    and StorageClass, young enough to be restored from, and not failed (many sandboxes of one
    workspace set up at once take one snapshot, not one each)."""
    max_age = parse_duration(spec.lifecycle.snapshot_max_age)
    for snapshot in cluster.restorable():
        meta = snapshot["metadata"]
        status = snapshot.get("status") or {}
        if (
            snapshot_hash(snapshot) == moment.volume_hash
            and _fits(snapshot, moment.storage_class)
            and not meta.get("deletionTimestamp")
            and not status.get("error")
            and (taken_at(snapshot) or now) >= now - max_age
        ):
            return True
    return False


def _state(moment: Moment, cluster: SnapshotCluster, now: datetime, timeout: float) -> SnapshotStep:
    """The SnapshotReady condition of the snapshot taken last, as the watch shows it."""
    name = moment.taken
    if name is None:
        return SnapshotStep()
    found = cluster.named(name)
    if found is None:
        message = (
            f"Snapshot {name} was deleted (expired, superseded, or removed), or its archive "
            "did not finish before the operator restarted."
        )
        return SnapshotStep(condition=(False, R.SNAPSHOT_GONE, message), name=name)
    what = described(found)
    error = (found.get("status") or {}).get("error")
    if error:
        message = f"{what} failed: {error.get('message') or 'no message'}."
        return SnapshotStep(condition=(False, R.SNAPSHOT_FAILED, message), name=name)
    if ready_to_use(found):
        message = f"{what} is ready: new sandboxes of this workspace start from it."
        return SnapshotStep(condition=(True, R.SNAPSHOT_TAKEN, message), name=name)
    if is_archive(found):
        message = f"Archiving the workspace volume into the object store as {name}."
    else:
        message = f"Taking VolumeSnapshot {name} of the workspace volume."
    created = parse_time(found["metadata"].get("creationTimestamp")) or now
    waiting = moment.just_set_up and taken_at(found) is None
    # An archive being made holds Ready until it is stored (the transfer has its own limit).
    in_time = is_archive(found) or now - created < timedelta(seconds=timeout)
    hold = message if waiting and in_time else None
    return SnapshotStep(condition=(False, R.SNAPSHOT_TAKING, message), name=name, hold=hold)
