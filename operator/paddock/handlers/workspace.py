"""Workspace: validate, hash, and report."""

from __future__ import annotations

from typing import Any

import kopf

from paddock import GROUP, VERSION, metrics
from paddock.handlers.reporting import report
from paddock.handlers.sandbox import reach_sandboxes
from paddock.sandboxes import service


@kopf.on.create(GROUP, VERSION, "workspaces")
@kopf.on.update(GROUP, VERSION, "workspaces")
@kopf.on.resume(GROUP, VERSION, "workspaces")
def workspace_changed(
    body: kopf.Body,
    memo: kopf.Memo,
    reason: str,
    **_: Any,
) -> None:
    with metrics.reconciling("Workspace") as result:
        outcome = service.reconcile_workspace(dict(body), memo.config.sandbox_image)
        if outcome.retry_after is not None:
            result["result"] = "waiting"
    memo.workspace_snapshots.ask((body["metadata"]["namespace"], body["metadata"]["name"]))
    if reason != kopf.Reason.RESUME:  # at start-up every Sandbox is resumed anyway
        meta = body["metadata"]
        reference = ("Workspace", meta["namespace"], meta["name"])
        reach_sandboxes(memo, reference)
    report(dict(body), outcome)
