"""SandboxPolicy: report whether its rules can work, and reach the sandboxes under it (and
under a Workspace) when it changes or is deleted."""

from __future__ import annotations

from typing import Any

import kopf

from paddock import GROUP, VERSION, metrics
from paddock.handlers.pool import workspace_seen
from paddock.handlers.reporting import report
from paddock.handlers.sandbox import reach_sandboxes
from paddock.sandboxes import service


@kopf.on.create(GROUP, VERSION, "sandboxpolicies")
@kopf.on.update(GROUP, VERSION, "sandboxpolicies")
@kopf.on.resume(GROUP, VERSION, "sandboxpolicies")
def policy_changed(
    body: kopf.Body,
    memo: kopf.Memo,
    reason: str,
    **_: Any,
) -> None:
    with metrics.reconciling("SandboxPolicy"):
        outcome = service.reconcile_policy(dict(body))
    if reason != kopf.Reason.RESUME:  # at start-up every Sandbox is resumed anyway
        meta = body["metadata"]
        reference = ("SandboxPolicy", meta["namespace"], meta["name"])
        reach_sandboxes(memo, reference)
    report(dict(body), outcome)


@kopf.on.event(GROUP, VERSION, "sandboxpolicies")
@kopf.on.event(GROUP, VERSION, "workspaces")
async def made_from_seen(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    """Kept for reconciles to read; a deleted Workspace or policy reaches its sandboxes at
    once (WorkspaceNotFound, PolicyNotFound), not at their next resync."""
    service.watched(type, dict(body))
    if body["kind"] == "Workspace":
        workspace_seen(memo, dict(body))
    if type == "DELETED":
        meta = body["metadata"]
        reference = (str(body["kind"]), meta["namespace"], meta["name"])
        reach_sandboxes(memo, reference)
        if body["kind"] == "Workspace":  # its archives go, as its VolumeSnapshots do
            memo.workspace_snapshots.ask((meta["namespace"], meta["name"]))
