"""Workspace: validate, hash, and report."""

from __future__ import annotations

from typing import Any

import kopf

from paddock import GROUP, VERSION
from paddock.handlers.reporting import report
from paddock.sandboxes.reconcile import reconcile_workspace


@kopf.on.create(GROUP, VERSION, "workspaces")
@kopf.on.update(GROUP, VERSION, "workspaces")
@kopf.on.resume(GROUP, VERSION, "workspaces")
def workspace_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    outcome = reconcile_workspace(dict(body), memo.config.sandbox_image)
    report("Workspace", dict(body), outcome)
