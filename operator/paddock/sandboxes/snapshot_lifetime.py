"""Deciding the lifetime of a Workspace's snapshots: which to list in its status, which to
delete (past their max age, of a superseded workspace hash, or beyond the newest N), and when
to look again. Pure; a snapshot a volume is being restored from is never deleted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from paddock.api.conditions import Notice
from paddock.api.reasons import WorkspaceReason as R
from paddock.api.workspace import WorkspaceSnapshot
from paddock.render.snapshot import described, ready_to_use, restoring, snapshot_hash
from paddock.sandboxes.plan import Delete
from paddock.sandboxes.snapshots import taken_at
from paddock.times import parse_time
from paddock.vocab import names

Obj = dict[str, Any]
HashNow = Callable[[str | None], str | None]
RETRY_IN_USE = 10.0  # seconds before looking again at a snapshot a restore still reads
MIN_RETRY = 1.0


@dataclass
class Lifetime:
    listed: list[WorkspaceSnapshot] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    retry_after: float | None = None


def _when(snapshot: Obj) -> datetime | None:
    return taken_at(snapshot) or parse_time(snapshot["metadata"].get("creationTimestamp"))


def _expires(snapshot: Obj) -> datetime | None:
    """When the snapshot is past the max age of the sandbox that took it."""
    annotations = snapshot["metadata"].get("annotations") or {}
    when = _when(snapshot)
    try:
        seconds = int(annotations.get(names.MAX_AGE_ANNOTATION, ""))
    except ValueError:
        return None
    return None if when is None else when + timedelta(seconds=seconds)


def _in_use(snapshot: Obj, pvcs: list[Obj]) -> bool:
    """Whether a volume is being restored from it (a PVC naming it that is not bound yet, or
    not yet filled from the archive)."""
    name = snapshot["metadata"]["name"]
    return any(restoring(pvc) == name for pvc in pvcs)


def _why_unwanted(
    snapshot: Obj, hash_now: HashNow, newer_ready: int, keep: int, now: datetime
) -> str | None:
    what = described(snapshot)
    image = (snapshot["metadata"].get("annotations") or {}).get(names.IMAGE_ANNOTATION)
    current_hash = hash_now(image)
    expires = _expires(snapshot)
    if expires is not None and expires <= now:
        return f"{what} is past its snapshotMaxAge; deleted."
    if current_hash is not None and snapshot_hash(snapshot) != current_hash:
        return (
            f"{what} is of workspace hash {snapshot_hash(snapshot)}, not the "
            f"current {current_hash}; deleted."
        )
    if ready_to_use(snapshot) and newer_ready >= keep:
        return f"{what} is older than the {keep} newest kept; deleted."
    return None


def decide_lifetime(
    snapshots: list[Obj], hash_now: HashNow, pvcs: list[Obj], now: datetime, keep: int
) -> Lifetime:
    """``snapshots``: the VolumeSnapshots the Workspace controls and its archives;
    ``hash_now``: the Workspace's hash now for the image a snapshot was set up in (None: not
    known, nothing is stale); ``pvcs``: the PVCs of its namespace that Paddock made."""
    result = Lifetime()
    newest_first = sorted(snapshots, key=lambda s: (_when(s) or now, s["metadata"]["name"]))[::-1]
    newer_ready = 0
    deferred = False
    for snapshot in newest_first:
        meta = snapshot["metadata"]
        why = _why_unwanted(snapshot, hash_now, newer_ready, keep, now)
        if why is not None and not meta.get("deletionTimestamp"):
            if _in_use(snapshot, pvcs):
                deferred = True
            else:
                kind = str(snapshot.get("kind") or "VolumeSnapshot")
                result.deletes.append(Delete(kind, meta["name"], meta.get("uid", "")))
                result.notices.append(Notice(R.SNAPSHOT_DELETED, why))
                continue
        if why is None and ready_to_use(snapshot):
            newer_ready += 1
        result.listed.append(
            WorkspaceSnapshot(
                name=meta["name"],
                workspace_hash=snapshot_hash(snapshot) or "",
                created_at=taken_at(snapshot),
                ready=ready_to_use(snapshot),
            )
        )
    kept = {item.name for item in result.listed}
    expiries = [
        (expires - now).total_seconds()
        for s in newest_first
        if s["metadata"]["name"] in kept and (expires := _expires(s)) is not None and expires > now
    ]
    waits = ([RETRY_IN_USE] if deferred else []) + expiries
    result.retry_after = max(min(waits), MIN_RETRY) if waits else None
    return result
