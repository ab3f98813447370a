"""SandboxPool: reconcile whenever it, one of its members (or a sandbox taken from it) or its
Workspace changes, through the pool queue (one reconcile of a pool at a time: two never make
the same missing members). A run takes a member on its own threads, never behind a refill."""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any

import kopf

from paddock import GROUP, VERSION, metrics
from paddock.handlers.reporting import report
from paddock.sandboxes import pool_service, service
from paddock.vocab.names import CLAIMED_FROM_LABEL, POOL_LABEL

Obj = dict[str, Any]


@kopf.on.event(GROUP, VERSION, "sandboxpools")
async def pool_seen(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    service.watched(type, dict(body))
    if type != "DELETED":
        memo.pools.ask((body["metadata"].get("namespace") or "", body["metadata"]["name"]))


def member_seen(memo: kopf.Memo, sandbox: Obj, before: Obj | None) -> None:
    """A Sandbox changed: the pool it is (or was) a member of, or was taken from, looks again."""
    namespace = sandbox["metadata"].get("namespace") or ""
    for version in (sandbox, before or {}):
        labels = (version.get("metadata") or {}).get("labels") or {}
        for label in (POOL_LABEL, CLAIMED_FROM_LABEL):
            if labels.get(label):
                memo.pools.ask((namespace, labels[label]))


def workspace_seen(memo: kopf.Memo, workspace: Obj) -> None:
    meta = workspace["metadata"]
    for named in pool_service.pools_of(meta.get("namespace") or "", meta["name"]):
        memo.pools.ask(named)


def reconcile_pool_named(
    namespace: str, name: str, writers: Executor, at_once: int, attempt: int = 0
) -> float | None:
    """Reconcile a pool (from the pool queue), making up to ``at_once`` members together on
    ``writers``: the seconds after which to look again."""
    del attempt
    with metrics.reconciling("SandboxPool"):
        reconciled = pool_service.reconcile_pool(namespace, name, writers, at_once)
    if reconciled is None:
        return None
    report(*reconciled, retry=False)
    return reconciled[1].retry_after
