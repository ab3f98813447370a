"""Reconciling a SandboxPool: its members and Workspace as the watches show them, the plan
``pools.decide_pool`` makes, its writes (made together: a refill's members are created at
once) and status. One reconcile of a pool at a time (the pool queue runs one of a key at a
time), so that two never make the same missing members."""

from __future__ import annotations

import contextvars
from concurrent.futures import Executor, wait
from typing import Any

from paddock.kube.cache import CACHE
from paddock.sandboxes.plan import Write
from paddock.sandboxes.pools import PACED_SECONDS, decide_pool
from paddock.sandboxes.writes import Outcome, make_write, report_status
from paddock.times import utcnow
from paddock.vocab.names import CLAIMED_FROM_LABEL, POOL_LABEL
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]


def members_of(pool: Obj, sandboxes: list[Obj]) -> tuple[list[Obj], int]:
    """The pool's unclaimed members (it controls them, and they are not being deleted), and
    how many sandboxes runs took from it."""
    meta = pool["metadata"]
    name, uid = meta["name"], meta["uid"]
    members, claimed = [], 0
    for sandbox in sandboxes:
        labels = sandbox["metadata"].get("labels") or {}
        if labels.get(CLAIMED_FROM_LABEL) == name:
            claimed += 1
        elif (
            labels.get(POOL_LABEL) == name
            and controlled_by(sandbox, uid)
            and not sandbox["metadata"].get("deletionTimestamp")
        ):
            members.append(sandbox)
    return members, claimed


def reconcile_pool(
    namespace: str, name: str, writers: Executor, at_once: int
) -> tuple[Obj, Outcome] | None:
    """The pool and what its reconcile did, making up to ``at_once`` members together on
    ``writers`` (threads every pool's reconcile shares); None when the pool is gone (its
    unclaimed members go with it, by garbage collection)."""
    pool = CACHE.get("SandboxPool", namespace, name)
    if pool is None or pool["metadata"].get("deletionTimestamp"):
        return None
    members, claimed = members_of(pool, CACHE.listed("Sandbox", namespace))
    template = (pool.get("spec") or {}).get("template") or {}
    workspace_name = (template.get("workspaceRef") or {}).get("name") or ""
    workspace = CACHE.get("Workspace", namespace, workspace_name) if workspace_name else None
    plan = decide_pool(pool, members, claimed, workspace, utcnow(), at_once)
    made = _write_all(pool, plan.writes, writers)
    outcome = report_status("SandboxPool", pool, plan)
    if outcome.retry_after == 0.0 and not all(made):  # a create that did not land: no rush
        outcome.retry_after = PACED_SECONDS
    return pool, outcome


def _write_all(pool: Obj, writes: list[Write], writers: Executor) -> list[bool]:
    """Each write made together on ``writers``, every one finished before this returns (a
    reconcile that followed while some were in flight would not see them, and make them
    again); then the first error, if any, is raised."""
    futures = [
        writers.submit(contextvars.copy_context().run, make_write, pool, write) for write in writes
    ]
    wait(futures)
    return [future.result() for future in futures]


def pools_of(namespace: str, workspace: str | None = None) -> list[tuple[str, str]]:
    """The pools of the namespace (those made from ``workspace``, when given)."""
    found = []
    for pool in CACHE.listed("SandboxPool", namespace):
        template = (pool.get("spec") or {}).get("template") or {}
        if workspace is None or (template.get("workspaceRef") or {}).get("name") == workspace:
            found.append((namespace, pool["metadata"]["name"]))
    return found
