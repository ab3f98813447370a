"""A run that names a SandboxPool (``poolRef``), or whose ``reuse: none`` ``sandboxTemplate`` is
a pool's template: which of the pool's members it may take, the
write that takes one, and the sandbox it makes from the pool's template when none is Ready.
Pure; ``inputs.find_sandbox`` reads the objects and makes the writes.

The take is a patch made only if the member is still the version read (its resourceVersion):
of two runs that try the same member, one write succeeds and the other is refused by the API
server, whatever each operator's cache said. It makes the run the member's controller and
takes the pool's label off (the pool then makes another), so the member is the run's own, as
a sandbox a template run makes is: removed when the run ends, never returned to the pool. A
thread's run takes the member for its thread instead: the member gets the thread's key and no
owner, as the sandbox a thread's run makes, and outlives the run."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from paddock import GROUP, VERSION
from paddock.agentruns.sandbox import same_thread
from paddock.api.agentrun import TERMINAL_PHASES, AgentRunSpec, RunPhase
from paddock.api.pool import SandboxPoolSpec, up_to_date
from paddock.api.sandbox import SandboxSpec
from paddock.times import format_time
from paddock.vocab.names import (
    ACTIVITY_ANNOTATION,
    CLAIMED_FROM_LABEL,
    HELD_BY_ANNOTATION,
    HELD_BY_RUN_ANNOTATION,
    MANAGED_BY,
    POOL_LABEL,
    POOL_TEMPLATE_LABEL,
    RUN_LABEL,
    THREAD_KEY_LABEL,
    THREAD_LABEL,
)
from paddock.vocab.ownership import controlled_by, controller_reference, owned_by

Obj = dict[str, Any]


def matching_pool(template: SandboxSpec, pools: list[Obj]) -> str | None:
    """The pool (its name; the first by name) whose template is the run's ``sandboxTemplate``:
    a ``reuse: none`` template run takes from it as a run naming it would."""
    wanted = template.to_api()
    for pool in sorted(pools, key=lambda p: str(p["metadata"]["name"])):
        try:
            spec = SandboxPoolSpec.model_validate(pool.get("spec") or {})
        except ValidationError:
            continue
        if spec.template.to_api() == wanted and not pool["metadata"].get("deletionTimestamp"):
            return str(pool["metadata"]["name"])
    return None


def taken(run_uid: str, sandboxes: list[Obj]) -> Obj | None:
    """The sandbox the run took or made already (an operator restart finds it by its label)."""
    for sandbox in sandboxes:
        labels = sandbox["metadata"].get("labels") or {}
        if labels.get(RUN_LABEL) == run_uid and controlled_by(sandbox, run_uid):
            return sandbox
    return None


def made_by(run: Obj, sandbox: Obj | None) -> bool:
    """Whether the run made the sandbox (a thread's, made from a pool's template when the
    pool had none Ready): labelled with the run, taken from no pool."""
    labels = (sandbox or {}).get("metadata", {}).get("labels") or {}
    return labels.get(RUN_LABEL) == run["metadata"]["uid"] and CLAIMED_FROM_LABEL not in labels


def thread_sandbox(key: str, sandboxes: list[Obj]) -> Obj | None:
    """The sandbox a run of the thread took from a pool: one labelled with the thread's key
    (the oldest, should two runs of it ever have taken one each), not being deleted."""
    found = [
        sandbox
        for sandbox in sandboxes
        if (sandbox["metadata"].get("labels") or {}).get(THREAD_KEY_LABEL) == key
        and (sandbox["metadata"].get("labels") or {}).get(CLAIMED_FROM_LABEL)
        and not sandbox["metadata"].get("deletionTimestamp")
    ]
    found.sort(key=lambda s: (s["metadata"].get("creationTimestamp") or "", s["metadata"]["name"]))
    return found[0] if found else None


def thread_run_before(run: Obj, spec: AgentRunSpec, others: list[Obj]) -> str | None:
    """The name of a run of the same thread created before this one that may still take the
    thread's sandbox (None: this run is the thread's first). Not one that ended, nor one
    waiting for its Secrets or prompt (Pending): it takes nothing until they exist."""
    meta = run["metadata"]
    me = (meta.get("creationTimestamp") or "", meta["name"])
    before = []
    for other in others:
        other_meta = other["metadata"]
        phase = (other.get("status") or {}).get("phase")
        created = (other_meta.get("creationTimestamp") or "", other_meta["name"])
        if (
            other_meta.get("uid") != meta.get("uid")
            and phase not in (*TERMINAL_PHASES, RunPhase.PENDING)
            and same_thread(spec, other)
            and created < me
        ):
            before.append(created)
    return min(before)[1] if before else None


def candidates(pool: Obj, sandboxes: list[Obj], current: str, run_uid: str) -> list[Obj]:
    """The members a run may take: Ready, made for the pool's current template and Workspace
    (its label, and its status: prepared from the current Workspace), controlled by the pool,
    not being deleted, held by no run, and what the pool promises (``SandboxPoolSpec.unfit``:
    its spec the template's and never changed, never held by a run). Each run tries them in
    its own order (from a place its uid picks, then round), so runs arriving together mostly
    try different members first, not all the same one, where all but one would be refused.
    (A take is a write made only if the member is still the version judged here: a hold or a
    change since fails it.)"""
    meta = pool["metadata"]
    spec = SandboxPoolSpec.model_validate(pool.get("spec") or {})
    found = []
    for sandbox in sandboxes:
        labels = sandbox["metadata"].get("labels") or {}
        if (
            labels.get(POOL_LABEL) == meta["name"]
            and labels.get(POOL_TEMPLATE_LABEL) == current
            and controlled_by(sandbox, meta["uid"])
            and not sandbox["metadata"].get("deletionTimestamp")
            and (sandbox.get("status") or {}).get("phase") == "Ready"
            and not (sandbox["metadata"].get("annotations") or {}).get(HELD_BY_ANNOTATION)
            and spec.unfit(sandbox) is None
            and up_to_date(sandbox)
        ):
            found.append(sandbox)
    found.sort(key=lambda s: (s["metadata"].get("creationTimestamp") or "", s["metadata"]["name"]))
    start = int(hashlib.sha256(run_uid.encode()).hexdigest()[:8], 16) % max(len(found), 1)
    return found[start:] + found[:start]


def held_by(run: Obj) -> dict[str, str]:
    """The annotations that say ``run`` holds a sandbox: its uid, and its name to read it by."""
    meta = run["metadata"]
    return {HELD_BY_ANNOTATION: str(meta["uid"]), HELD_BY_RUN_ANNOTATION: str(meta["name"])}


def claim(run: Obj, pool: str, now: datetime) -> Obj:
    """The patch that takes a member for ``run`` (sent with the member's resourceVersion):
    held for it (``holds.hold``) and marked active (``activity.keep_active``) in the same
    write."""
    labels = {POOL_LABEL: None, POOL_TEMPLATE_LABEL: None, CLAIMED_FROM_LABEL: pool,
              RUN_LABEL: run["metadata"]["uid"]}  # fmt: skip
    marks = {**held_by(run), ACTIVITY_ANNOTATION: format_time(now)}
    return {"metadata": {"labels": labels, "annotations": marks,
                         "ownerReferences": [controller_reference(run)]}}  # fmt: skip


def thread_claim(run: Obj, pool: str, key: str, thread: str, now: datetime) -> Obj:
    """The patch that takes a member for the thread ``key`` (sent as ``claim``'s is): the
    thread's key and label instead of an owner, so that it outlives the run; the run that took
    it named in its run label."""
    body = claim(run, pool, now)
    body["metadata"]["labels"][THREAD_KEY_LABEL] = key
    body["metadata"]["labels"][THREAD_LABEL] = thread
    body["metadata"]["ownerReferences"] = None
    return body


def own_sandbox(run: Obj, pool: Obj) -> tuple[str, Obj]:
    """The sandbox a run makes from the pool's template when the pool has no Ready member:
    its own, named as a template run's is."""
    meta = run["metadata"]
    name = f"{meta['name'][:40].rstrip('-.')}-{meta['uid'][:8]}"
    spec = SandboxPoolSpec.model_validate(pool.get("spec") or {})
    sandbox = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": meta["namespace"],
                     "labels": {**MANAGED_BY, RUN_LABEL: meta["uid"]}},
        "spec": spec.template.to_api(),
    }  # fmt: skip
    return name, owned_by(sandbox, run)
