"""Deciding a SandboxPool: which members to make and which to delete so that ``replicas``
unclaimed sandboxes of the current template are kept, and the pool's status. Pure; the
service reads the pool, its members and its Workspace from the watches and makes the writes.

A member is a Sandbox the pool controls, labelled with the pool's name and the hash of what it
was made from (the template and the Workspace's hash). A run that claims one takes it out of
the pool: its controller becomes the run and the pool label goes, so the pool makes another.

Replacing stale members (the template, the Workspace or its image changed) never drops the
Ready count below what the pool has: fresh members are made first, and a stale Ready member
is deleted only while the pool has more Ready members than ``replicas``. A member that is no
longer what the pool promises, judged by what it is (its spec changed from the template, or a
run held it outside a take: ``SandboxPoolSpec.unfit``), is deleted at once: it is never
handed out."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from paddock import GROUP, VERSION
from paddock.api.common import stored_status
from paddock.api.conditions import Notice, get_condition, set_condition
from paddock.api.errors import describe
from paddock.api.pool import SandboxPoolSpec, SandboxPoolStatus, up_to_date
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import PoolReason as R
from paddock.sandboxes.plan import Create, Delete, Plan, Write
from paddock.vocab.names import HELD_BY_ANNOTATION, MANAGED_BY, POOL_LABEL, POOL_TEMPLATE_LABEL
from paddock.vocab.ownership import owned_by

Obj = dict[str, Any]
# Members made per reconcile, at once, unless told otherwise: as many as the Sandbox
# reconcile works on at once (``PADDOCK_WORKER_LIMIT``); the pool looks again at once for more.
MAX_CREATES = 20
PACED_SECONDS = 1.0  # the next round's wait when this one made no headway for sure


def selector(pool: str) -> str:
    return f"{POOL_LABEL}={pool}"


def member(pool: Obj, spec: SandboxPoolSpec, current: str) -> Obj:
    """A new member: named by the API server after the pool, controlled by it."""
    meta = pool["metadata"]
    labels = {**MANAGED_BY, POOL_LABEL: meta["name"], POOL_TEMPLATE_LABEL: current}
    sandbox = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Sandbox",
        "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"],
                     "labels": labels},
        "spec": spec.template.to_api(),
    }  # fmt: skip
    return owned_by(sandbox, pool)


def is_ready(sandbox: Obj) -> bool:
    return (sandbox.get("status") or {}).get("phase") == "Ready"


def _newest_first(members: list[Obj]) -> list[Obj]:
    return sorted(members, key=lambda m: m["metadata"].get("creationTimestamp") or "", reverse=True)


def _fresh(members: list[Obj], spec: SandboxPoolSpec, current: str) -> list[Obj]:
    """The members made for the current template and Workspace (by their label, and by their
    status once it says) that are still what the pool promises (``SandboxPoolSpec.unfit``)."""
    return [
        m
        for m in members
        if m["metadata"]["labels"].get(POOL_TEMPLATE_LABEL) == current
        and up_to_date(m) is not False
        and spec.unfit(m) is None
    ]


def _held(member: Obj) -> bool:
    return bool((member["metadata"].get("annotations") or {}).get(HELD_BY_ANNOTATION))


def _deletes(members: list[Obj], spec: SandboxPoolSpec, current: str) -> list[Obj]:
    """The members to delete: those no longer what the pool promises (their spec changed, or
    a run held them), at once, unless a run holds one still (it goes once let go); stale
    ones not Ready; stale Ready ones while more than ``replicas`` would stay Ready; and fresh
    ones beyond ``replicas`` (not Ready first)."""
    replicas = spec.replicas
    fresh = _fresh(members, spec, current)
    unfit = [m for m in members if spec.unfit(m) is not None]
    judged = {id(m) for m in fresh} | {id(m) for m in unfit}
    stale = [m for m in members if id(m) not in judged]
    gone = [m for m in unfit if not _held(m)] + [m for m in stale if not is_ready(m)]
    members = fresh + stale
    ready = sum(1 for m in members if is_ready(m))
    for old in _newest_first([m for m in stale if is_ready(m)])[::-1]:  # oldest first
        if ready - 1 < replicas:
            break
        gone.append(old)
        ready -= 1
    surplus = len(fresh) - replicas
    if surplus > 0:
        order = [m for m in _newest_first(fresh) if not is_ready(m)]
        order += [m for m in _newest_first(fresh) if is_ready(m)]
        gone += order[:surplus]
    return gone


def decide_pool(
    pool: Obj,
    members: list[Obj],
    claimed: int,
    workspace: Obj | None,
    now: datetime,
    at_once: int = MAX_CREATES,
) -> Plan:
    """The pool's writes and status. ``members`` are its unclaimed Sandboxes (those it
    controls, not being deleted); ``claimed`` counts the sandboxes runs took from it. At most
    ``at_once`` members are made; with more missing, the pool is reconciled again at once."""
    generation = pool["metadata"].get("generation")
    old = stored_status(SandboxPoolStatus, pool)
    status = SandboxPoolStatus(observed_generation=generation, conditions=old.conditions)
    status.selector = selector(pool["metadata"]["name"])
    status.claimed = claimed
    status.replicas = len(members)
    status.ready_replicas = sum(1 for m in members if is_ready(m))
    try:
        spec = SandboxPoolSpec.model_validate(pool.get("spec") or {})
    except ValidationError as exc:
        said = "The spec is invalid: " + "; ".join(describe(exc))
        return _said(status, old, False, R.INVALID_SPEC, said, generation, now)
    name = spec.template.workspace_ref.name
    workspace_hash = ((workspace or {}).get("status") or {}).get("hash")
    if workspace is None or not workspace_hash:
        reason = R.WORKSPACE_NOT_FOUND if workspace is None else R.WORKSPACE_NOT_READY
        said = f"Workspace {name} is {'not found' if workspace is None else 'not validated yet'}"
        return _said(status, old, False, reason, said + "; no member is made", generation, now)
    current = spec.template_hash(workspace_hash)
    gone = _deletes(members, spec, current)
    fresh = _fresh(members, spec, current)
    missing = max(spec.replicas - len(fresh), 0)
    writes: list[Write] = [
        Create(member(pool, spec, current)) for _ in range(min(missing, at_once))
    ]
    writes += [Delete.unchanged(m) for m in gone]
    status.stale_replicas = len(members) - len(fresh)
    fresh_ready = sum(1 for m in fresh if is_ready(m))
    if fresh_ready >= spec.replicas and not status.stale_replicas:
        plan = _said(
            status, old, True, R.READY, f"{fresh_ready} sandboxes are Ready", generation, now
        )
    else:
        said = f"{fresh_ready} of {spec.replicas} sandboxes Ready" + (
            f"; {status.stale_replicas} of an older template or Workspace being replaced"
            if status.stale_replicas
            else ""
        )
        plan = _said(status, old, False, R.FILLING, said, generation, now)
    plan.writes = writes
    # More to make: at once, unless members were deleted this round as no longer what the
    # pool promises (a webhook that changes each new member would otherwise have the pool
    # make and delete members as fast as the API server answers).
    unfit = any(spec.unfit(m) is not None for m in members)
    plan.retry_after = (PACED_SECONDS if unfit else 0.0) if missing > at_once else None
    return plan


def _said(
    status: SandboxPoolStatus,
    old: SandboxPoolStatus,
    ready: bool,
    reason: R,
    message: str,
    generation: int | None,
    now: datetime,
) -> Plan:
    previous = get_condition(old.conditions, C.READY)
    status.conditions = set_condition(
        status.conditions, C.READY, ready, reason, message, generation=generation, now=now
    )
    # Filling and Ready come and go with each claim: only a pool that cannot fill is an Event.
    said = previous is not None and previous.reason == reason
    warn = reason in (R.INVALID_SPEC, R.WORKSPACE_NOT_FOUND)
    return Plan(status, notices=[Notice(reason, message)] if warn and not said else [])
