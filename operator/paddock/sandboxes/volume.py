"""The workspace volume of a Sandbox: created empty or restored from a snapshot (a
VolumeSnapshot, or an archive unpacked into it through the pod before it is Ready), given up on
when a restore fails (for a cold start), and snapshotted after setup or runs. Pure: part of
``decide.py``'s decision."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from paddock import GROUP, VERSION
from paddock.api.conditions import get_condition, is_true
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import SandboxReason as R
from paddock.api.sandbox import SandboxPhase, SnapshotWhen
from paddock.render.sandbox import SandboxInputs, render_workspace_pvc
from paddock.render.snapshot import archive_restored, restored_from, restoring
from paddock.sandboxes.draft import StatusDraft
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.observe import Observation
from paddock.sandboxes.plan import Create, Delete, Plan, Transfer, Write
from paddock.sandboxes.snapshots import (
    Moment,
    Wanted,
    restore_deadline,
    restore_failure,
    restore_source,
    snapshot_step,
    storage_class_of,
)
from paddock.vocab import names
from paddock.vocab.ownership import owned_by

Obj = dict[str, Any]
RETRY_WANTED = 10.0  # seconds between looks at a fork's snapshot that is not ready


def plan_volume(draft: StatusDraft, world: SandboxWorld, inputs: SandboxInputs) -> Obj | Plan:
    """The workspace PVC (as it is, or to be created when it has no resourceVersion), or the
    plan while there can be none: a fork waiting for its snapshot, an old volume going away, a
    failed restore being given up."""
    pvc = world.pvc
    if pvc is None:
        return _new_volume(draft, world, inputs)
    if pvc["metadata"].get("deletionTimestamp"):
        message = "Waiting for the previous workspace volume to be deleted."
        draft.condition(C.READY, False, R.STARTING, message)
        writes: list[Write] = [] if world.pod is None else [Delete.of(world.pod)]
        return draft.finish(SandboxPhase.PROVISIONING, R.STARTING, message, writes)
    source = restored_from(pvc)
    if source is None:
        return pvc
    draft.status.restored_from = source
    if archive_restored(pvc) is not None:
        failure = unpack_failure(pvc, world, draft.now)
        if failure is None:
            return pvc
    else:
        snapshot = world.snapshots.named(source)
        if snapshot is None and world.forked and world.forked["metadata"]["name"] == source:
            snapshot = world.forked
        failure = restore_failure(pvc, snapshot, draft.now, world.restore_timeout)
    if failure is not None:
        message = f"{failure} Setting the workspace up from scratch instead."
        draft.condition(C.RESTORED, False, R.RESTORE_FAILED, message)
        draft.condition(C.READY, False, R.RESTORE_FAILED, message)
        draft.status.restored_from = None
        given_up: list[Write] = [Delete.of(pvc)]
        given_up += [] if world.pod is None else [Delete.of(world.pod)]
        return draft.finish(SandboxPhase.PROVISIONING, R.RESTORE_FAILED, message, given_up)
    if (pvc.get("status") or {}).get("phase") == "Bound":
        draft.condition(C.RESTORED, True, R.RESTORED, f"Restored from VolumeSnapshot {source}.")
    else:
        draft.condition(C.RESTORED, None, R.RESTORING, f"Restoring from VolumeSnapshot {source}.")
        draft.wake_after = restore_deadline(pvc, draft.now, world.restore_timeout)
    return pvc


def unpacked(pvc: Obj, world: SandboxWorld) -> bool:
    """Whether the archive the volume is filled from is in it (recorded on the PVC, or the
    operator's unpack of it has just finished)."""
    name = archive_restored(pvc)
    done = world.transfer is not None and world.transfer.done("unpack", str(name))
    return restoring(pvc) is None or done


def unpack_failure(pvc: Obj, world: SandboxWorld, now: datetime) -> str | None:
    """Why the volume will not be filled from its archive (the unpack failed, the archive is
    gone, the restore timeout passed), or None while it may still be (or has been)."""
    if unpacked(pvc, world):
        return None
    name = str(archive_restored(pvc))
    transfer = world.transfer
    if transfer is not None and (transfer.action, transfer.archive) == ("unpack", name):
        if transfer.error is not None:
            return f"Unpacking archive {name} into the volume failed: {transfer.error}."
        if transfer.running:
            return None
    if world.snapshots.named(name) is None:
        return f"Archive {name} was deleted before the volume was restored from it."
    if restore_deadline(pvc, now, world.restore_timeout) <= 1.0:
        return (
            f"The volume was not restored from archive {name} within {world.restore_timeout:.0f}s."
        )
    return None


def unpack_step(
    draft: StatusDraft, world: SandboxWorld, pvc: Obj, pod: Obj, seen: Observation
) -> tuple[list[Write], Observation]:
    """While the volume waits for its archive: unpack it once the pod runs (the pod has no
    setup to do), and hold the sandbox short of Ready until it is in."""
    name = archive_restored(pvc)
    if name is None:
        return [], seen
    if unpacked(pvc, world):
        draft.condition(C.RESTORED, True, R.RESTORED, f"Restored from archive {name}.")
        return [], seen
    message = f"Restoring the workspace from archive {name} in the object store."
    draft.condition(C.RESTORED, None, R.RESTORING, message)
    draft.wake_after = restore_deadline(pvc, draft.now, world.restore_timeout)
    writes: list[Write] = []
    running = world.transfer is not None and world.transfer.running
    archive = world.snapshots.named(name)
    if seen.ready and not running and archive is not None:
        writes.append(Transfer("unpack", archive, pod["metadata"]["name"], pvc["metadata"]["uid"]))
    if seen.ready or seen.phase == SandboxPhase.SETTING_UP:
        seen = replace(seen, phase=SandboxPhase.SETTING_UP, reason=R.RESTORING, message=message)
    return writes, replace(seen, ready=False, ready_at=None, setup_complete=None)


def _new_volume(draft: StatusDraft, world: SandboxWorld, inputs: SandboxInputs) -> Obj | Plan:
    spec = inputs.sandbox
    restored = get_condition(draft.old.conditions, C.RESTORED)
    gave_up = restored is not None and restored.reason == R.RESTORE_FAILED
    storage_class = storage_class_of(spec, None, world.snapshots)
    source = None
    if not gave_up:
        source = restore_source(
            spec, inputs.workspace_hash, storage_class, world.snapshots, world.forked, draft.now
        )
    if isinstance(source, Wanted):
        draft.condition(C.READY, False, R.SNAPSHOT_NOT_READY, source.message)
        return draft.finish(
            SandboxPhase.PENDING, R.SNAPSHOT_NOT_READY, source.message, retry_after=RETRY_WANTED
        )
    if is_true(draft.status.conditions, C.SETUP_COMPLETE):  # its volume is gone: prepare anew
        message = "The workspace volume is new: it is prepared again."
        draft.condition(C.SETUP_COMPLETE, False, R.SETTING_UP, message)
    if source is not None:
        name = source["metadata"]["name"]
        draft.status.restored_from = name
        draft.condition(C.RESTORED, None, R.RESTORING, f"Restoring from VolumeSnapshot {name}.")
    elif not gave_up:
        if spec.lifecycle.snapshot == SnapshotWhen.NONE:
            message = "spec.lifecycle.snapshot is none: the workspace is set up from scratch."
        else:
            message = (
                f"No ready snapshot of workspace hash {inputs.workspace_hash} younger than "
                f"{spec.lifecycle.snapshot_max_age}: the workspace is set up from scratch."
            )
        draft.condition(C.RESTORED, False, R.NO_SNAPSHOT, message)
    return owned_by(render_workspace_pvc(inputs, source), world.sandbox)


def volume_hash(pvc: Obj, draft: StatusDraft, current: str) -> str:
    """The workspace hash the volume holds: the one recorded when it was prepared, else its
    label (set when it was made: the snapshot's hash for a restored volume)."""
    if is_true(draft.status.conditions, C.SETUP_COMPLETE) and draft.old.workspace_hash:
        return draft.old.workspace_hash
    labelled = (pvc["metadata"].get("labels") or {}).get(names.WORKSPACE_HASH_LABEL)
    return str(labelled or current)


def take_snapshots(
    draft: StatusDraft, world: SandboxWorld, inputs: SandboxInputs, pvc: Obj, seen: Observation
) -> tuple[list[Write], Observation]:
    """The snapshot to take now, if any, and the observation with Ready held while a
    snapshot after setup is being cut (so no run changes the volume before it is)."""
    timings = draft.old.timings
    setup = get_condition(draft.status.conditions, C.SETUP_COMPLETE)
    just_set_up = (
        seen.ready
        and (timings is None or timings.ready_at is None)
        and setup is not None
        and setup.reason == R.PREPARED
    )
    annotations = world.sandbox["metadata"].get("annotations") or {}
    moment = Moment(
        taken=draft.old.snapshot,
        just_set_up=just_set_up,
        last_run=annotations.get(names.LAST_RUN_ANNOTATION),
        volume_hash=volume_hash(pvc, draft, inputs.workspace_hash),
        storage_class=storage_class_of(inputs.sandbox, pvc, world.snapshots),
        image=inputs.image,
    )
    workspace = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workspace",
        "metadata": {"name": inputs.sandbox.workspace_ref.name, "uid": world.workspace_uid()},
    }
    step = snapshot_step(
        world.sandbox,
        workspace,
        inputs.sandbox,
        moment,
        world.snapshots,
        draft.now,
        world.restore_timeout,
    )
    draft.status.snapshot = step.name
    if step.condition is not None:
        draft.noted(C.SNAPSHOT_READY, *step.condition)
    writes: list[Write] = [] if step.create is None else [Create(step.create)]
    if step.archive is not None:
        writes.append(Transfer("take", step.archive, names.pod_name(inputs.name)))
    if step.hold is not None:
        seen = replace(
            seen, phase=SandboxPhase.SETTING_UP, reason=R.SNAPSHOT_TAKING, message=step.hold
        )
        seen = replace(seen, ready=False, ready_at=None)
    elif just_set_up and step.name is not None:
        seen = replace(seen, ready_at=None)  # Ready now, after the snapshot: not when the pod was
    return writes, seen
