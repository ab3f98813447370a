"""How long a finished run is kept: ``spec.ttlSecondsAfterFinished``, else the operator's
default. Then the run is deleted, and its event log with it (its ConfigMaps by garbage
collection, its objects in a bucket by the run's delete handler)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from paddock.api.agentrun import TERMINAL_PHASES, AgentRunSpec, AgentRunStatus
from paddock.api.common import stored_status
from paddock.kube import client as kube
from paddock.kube.errors import ConflictError, KubeError
from paddock.times import parse_time, utcnow

log = logging.getLogger("paddock.runs")

# The longest a finished run's daemon sleeps before it looks again: a TTL changed in the
# spec meanwhile is seen within this (looking reads nothing from the API).
LOOK_AGAIN_SECONDS = 600.0

Obj = dict[str, Any]


def expires_at(
    spec: AgentRunSpec, completed_at: datetime | None, default: int | None
) -> datetime | None:
    """When the finished run is to be deleted (None: it is kept); ``default``: the operator's
    time to live (None: for ever)."""
    ttl = default if spec.ttl_seconds_after_finished is None else spec.ttl_seconds_after_finished
    if ttl is None or completed_at is None:
        return None
    return completed_at + timedelta(seconds=ttl)


def expire(
    run: Obj,
    default: int | None,
    completed_at: datetime | None = None,
    now: datetime | None = None,
) -> float | None:
    """Delete the finished run once its time to live has passed (only the run read: its uid
    is checked); else the seconds until it is looked at again (None: it is kept, or gone)."""
    meta = run["metadata"]
    spec = AgentRunSpec.model_validate(run["spec"])
    completed_at = completed_at or parse_time((run.get("status") or {}).get("completedAt"))
    at = expires_at(spec, completed_at, default)
    if at is None:
        return None
    left = (at - (now or utcnow())).total_seconds()
    if left > 0:
        return min(left, LOOK_AGAIN_SECONDS)
    try:
        deleted = kube.delete("AgentRun", meta["namespace"], meta["name"], meta["uid"])
    except ConflictError:  # the name is another run's now: this one is gone
        return None
    if deleted:
        assert completed_at is not None
        log.info("run %s/%s deleted, %s after it finished (its time to live)",
                 meta["namespace"], meta["name"], at - completed_at)  # fmt: skip
    return None


def behind(run: Obj) -> bool:
    """Whether the run finished and its spec changed since (``observe_ended`` writes)."""
    status, generation = run.get("status") or {}, run["metadata"].get("generation")
    return (
        status.get("phase") in TERMINAL_PHASES
        and generation is not None
        and status.get("observedGeneration") != generation
    )


def observe_ended(run: Obj) -> None:
    """A finished run whose spec changed since it ended (its time to live, a cancel that came
    late, a repository's edit): its status says it saw that generation, every condition too,
    so that a GitOps tool does not wait on it as not yet reconciled."""
    if not behind(run):
        return
    generation = run["metadata"]["generation"]
    stored = stored_status(AgentRunStatus, run)
    conditions = [
        c.model_copy(update={"observed_generation": generation}) for c in stored.conditions
    ]
    patch = stored.model_copy(update={"observed_generation": generation, "conditions": conditions})
    written = {"observedGeneration": generation, "conditions": patch.to_api()["conditions"]}
    meta = run["metadata"]
    try:
        kube.patch_status("AgentRun", meta["namespace"], meta["name"], written)
    except KubeError as exc:  # said; the run's next change tries again
        log.warning("run %s/%s: its new generation could not be noted: %s",
                    meta["namespace"], meta["name"], exc)  # fmt: skip
