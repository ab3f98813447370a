"""A run's sandbox from a SandboxPool: a Ready member taken by a write only one run can make
(``claims``), or, when the pool has none Ready, one made from the pool's template.

- A ``reuse: none`` run (or one naming the pool) takes a member for itself: the run controls it
  and it goes when the run ends.
- A thread's run takes the thread's sandbox: the member gets the thread's key and no owner, as
  a sandbox a thread's run makes has, and the thread's later runs find it by that key. Only the
  thread's first run takes one; a later run created with it waits for it to (else two runs of one
  thread could each take a member). When the pool has none Ready, the thread's run makes the
  thread's sandbox as it would with no pool (``inputs.find_sandbox``).

Reads come from what the operator's watches show (``kube.cache``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from paddock.agentruns import claims
from paddock.agentruns import sandbox as sandboxes
from paddock.agentruns.sandbox import ReadySandbox, Verdict
from paddock.api.agentrun import AgentRunSpec
from paddock.api.errors import describe
from paddock.api.pool import SandboxPoolSpec
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.times import utcnow
from paddock.vocab.names import CLAIMED_FROM_LABEL, RUN_LABEL

Obj = dict[str, Any]


def from_pool(run: Obj, spec: AgentRunSpec, pool_name: str) -> Verdict:
    """The sandbox the run took from its pool, or made from the pool's template (once, found
    again by its label after a restart); taken now if it has none, else made."""
    meta = run["metadata"]
    namespace = meta["namespace"]
    sandboxes_here = CACHE.listed("Sandbox", namespace)
    mine = claims.taken(meta["uid"], sandboxes_here)
    named = (run.get("status") or {}).get("sandboxName")
    if mine is None and named:  # taken before an operator restart, not watched yet: by name
        found = CACHE.get("Sandbox", namespace, named)
        mine = claims.taken(meta["uid"], [found] if found is not None else [])
    if mine is None:
        pool = _pool(namespace, pool_name)
        if isinstance(pool, sandboxes.Waiting):
            return Verdict(pool)
        mine = _take(run, pool, sandboxes_here, claims.claim(run, pool_name, utcnow()))
        if mine is None:
            name, made = claims.own_sandbox(run, pool)
            created = kube.create(made)
            if created is not None:
                CACHE.seen("ADDED", created)
            said = f"SandboxPool {pool_name} has no Ready sandbox: created Sandbox {name}"
            return Verdict(sandboxes.Waiting(name, R.SANDBOX_CREATED, said))
    return _ready(run, spec, mine, pool_name)


def for_thread(
    run: Obj, spec: AgentRunSpec, workspace_hash: str, pool_name: str | None
) -> Verdict | None:
    """The thread's sandbox taken from a pool (by this run now, or by an earlier run of the
    thread); None when there is none to take and the run makes the thread's sandbox."""
    meta = run["metadata"]
    namespace = meta["namespace"]
    key = sandboxes.thread_key(namespace, spec, workspace_hash)
    sandboxes_here = CACHE.listed("Sandbox", namespace)
    mine = claims.thread_sandbox(key, sandboxes_here)
    named = (run.get("status") or {}).get("sandboxName")
    if mine is None and named:  # taken before an operator restart, not watched yet: by name
        found = CACHE.get("Sandbox", namespace, named)
        mine = claims.thread_sandbox(key, [found] if found is not None else [])
    if mine is None and pool_name is not None:
        pool = _pool(namespace, pool_name)
        if isinstance(pool, sandboxes.Waiting):
            return Verdict(pool)
        first = claims.thread_run_before(run, spec, CACHE.listed("AgentRun", namespace))
        if first is not None:
            said = (
                f"waiting for AgentRun {first}, created before this run in thread "
                f"{spec.thread_id}, to take the thread's sandbox from SandboxPool {pool_name}"
            )
            return Verdict(sandboxes.Waiting(None, R.SANDBOX_BUSY, said))
        body = claims.thread_claim(
            run, pool_name, key, sandboxes.thread_label(namespace, spec.thread_id), utcnow()
        )
        mine = _take(run, pool, sandboxes_here, body)
    if mine is None:
        return None
    return _ready(run, spec, mine, None, workspace_hash)


def _pool(namespace: str, pool_name: str) -> Obj | sandboxes.Waiting:
    """The pool, or why the run cannot take from it."""
    pool = CACHE.get("SandboxPool", namespace, pool_name)
    if pool is None:
        said = f"SandboxPool {pool_name} not found in namespace {namespace}"
        return sandboxes.Waiting(None, R.POOL_NOT_FOUND, said)
    try:
        SandboxPoolSpec.model_validate(pool.get("spec") or {})
    except ValidationError as exc:
        said = f"SandboxPool {pool_name} is invalid: " + "; ".join(describe(exc))
        return sandboxes.Waiting(None, R.POOL_INVALID, said)
    return pool


def _take(run: Obj, pool: Obj, sandboxes_here: list[Obj], body: Obj) -> Obj | None:
    """Take a Ready member of the pool with the patch ``body``: the first whose write lands.
    A write refused because the member changed since the watch showed it is followed by a read
    of the member as it is: taken by another run, the next one is tried; still free (its
    status or another write moved it on), it is tried again at its new version (once: refused
    again, it is another run's by then); taken by this run, it is the run's. So a run makes a
    sandbox of its own when every member it saw was taken, not when the cache was behind."""
    namespace = run["metadata"]["namespace"]
    spec = SandboxPoolSpec.model_validate(pool.get("spec") or {})
    workspace = CACHE.get("Workspace", namespace, spec.template.workspace_ref.name)
    current = spec.template_hash(sandboxes.workspace_hash_of(workspace))
    uid = run["metadata"]["uid"]
    for member in claims.candidates(pool, sandboxes_here, current, uid):
        name = member["metadata"]["name"]
        stored = kube.patch_if_unchanged(
            "Sandbox", namespace, name, body, member["metadata"]["resourceVersion"]
        )
        if stored is None:
            stored = _again(run, pool, current, name, body)
        if stored is not None:
            CACHE.seen("MODIFIED", stored)
            return stored
    return None


def _again(run: Obj, pool: Obj, current: str, name: str, body: Obj) -> Obj | None:
    """A member whose take was refused, read as it is now: taken again at its new version if
    it is still free; as it is if this run took it already; else None."""
    namespace, uid = run["metadata"]["namespace"], run["metadata"]["uid"]
    now = kube.get("Sandbox", namespace, name)
    if now is None:
        return None
    if claims.taken(uid, [now]) is not None:
        return now  # this run's own take, whose answer an earlier step lost
    if not claims.candidates(pool, [now], current, uid):
        return None  # another run's
    CACHE.seen("MODIFIED", now)
    version = now["metadata"]["resourceVersion"]
    return kube.patch_if_unchanged("Sandbox", namespace, name, body, version)


def _ready(
    run: Obj, spec: AgentRunSpec, mine: Obj, pool_name: str | None, workspace_hash: str = ""
) -> Verdict:
    """The verdict on the sandbox the run took or made; the pool it came from is told only by
    the run that took or made it."""
    meta = run["metadata"]
    name = mine["metadata"]["name"]
    verdict = sandboxes.judge(run, spec, name, mine, workspace_hash)
    if not isinstance(verdict.state, ReadySandbox):
        return verdict
    pod = CACHE.get("Pod", meta["namespace"], verdict.state.pod)
    labels = mine["metadata"].get("labels") or {}
    taken_from = labels.get(CLAIMED_FROM_LABEL)
    if pool_name is None and labels.get(RUN_LABEL) == meta["uid"]:
        pool_name = taken_from
    if pool_name is None:
        return Verdict(sandboxes.check_pod(verdict.state, pod))
    ready = replace(verdict.state, pool=pool_name, claimed=taken_from == pool_name)
    return Verdict(sandboxes.check_pod(ready, pod))
