"""One run at a time in a sandbox, as a lock the API server keeps: before its harness starts,
a run writes its uid into the Sandbox's ``paddock.dev/held-by`` annotation (and its name into
``paddock.dev/held-by-run``, to read it by), a write made only
if the Sandbox is still the version read (its resourceVersion). Of two runs that start together
(two daemons after an operator restart, or two operators), one write lands and the other is
refused, and that run waits (SandboxBusy) until the holder ends and lets go. A holder that
ended or is gone without letting go (its operator stopped at the wrong moment) holds nothing;
whether it ended is read from the API server when the watch has not shown it yet.

The order in which waiting runs start (oldest first) is ``sandbox.busy``'s; this is the lock
under it, which a cache that is behind cannot open.

The first hold also marks the Sandbox's status ``everHeld``, for good: a pool's member that a
run ever held (named by its sandboxRef before it was refused, say) is never handed out."""

from __future__ import annotations

from typing import Any

from paddock.agentruns.claims import held_by
from paddock.agentruns.decide import Wait, waiting_for_sandbox
from paddock.agentruns.sandbox import ReadySandbox, Waiting
from paddock.api.agentrun import TERMINAL_PHASES
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.vocab.names import HELD_BY_ANNOTATION, HELD_BY_RUN_ANNOTATION
from paddock.vocab.ownership import controlled_by

Obj = dict[str, Any]
EVER_HELD = {"everHeld": True}


def _holder(sandbox: Obj) -> str:
    return str(((sandbox["metadata"].get("annotations") or {}).get(HELD_BY_ANNOTATION)) or "")


def _still_holds(namespace: str, sandbox: Obj) -> str | None:
    """The name of the run that holds ``sandbox``, if it exists and has not ended.

    A run the watch has not shown is read from the API server: an operator that started a
    moment ago has not seen every run yet, and a hold is never broken on a cache's word (the
    holder is only unknown there, which is rare: a holder that ended lets go). It is read by
    its name; a hold written without one (by an earlier version) is looked for in a listing."""
    annotations = sandbox["metadata"].get("annotations") or {}
    uid, name = _holder(sandbox), str(annotations.get(HELD_BY_RUN_ANNOTATION) or "")
    run = _run_of(CACHE.listed("AgentRun", namespace), uid)
    if run is None and name:
        found = kube.get("AgentRun", namespace, name)
        run = found if found is not None and found["metadata"].get("uid") == uid else None
    elif run is None:
        run = _run_of(kube.listed("AgentRun", namespace), uid)
    if run is None or (run.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    return str(run["metadata"]["name"])


def _run_of(runs: list[Obj], uid: str) -> Obj | None:
    return next((run for run in runs if run["metadata"].get("uid") == uid), None)


def hold(run: Obj, sandbox: ReadySandbox) -> Wait | None:
    """Hold the sandbox for the run (None), or why the run waits."""
    meta = run["metadata"]
    namespace, uid = meta["namespace"], meta["uid"]
    found = CACHE.get("Sandbox", namespace, sandbox.name)
    if found is None:
        return None  # (judged Ready from this very cache a moment ago: gone since; found later)
    holder = _holder(found)
    if holder == uid:
        _mark_held(namespace, found)
        return None
    other = _still_holds(namespace, found) if holder else None
    if other is not None:
        said = f"waiting for Sandbox {sandbox.name}: AgentRun {other} holds it (one run at a time)"
        return waiting_for_sandbox(Waiting(sandbox.name, R.SANDBOX_BUSY, said))
    body = {"metadata": {"annotations": held_by(run)}}
    version = str(found["metadata"].get("resourceVersion") or "")
    stored = kube.patch_if_unchanged("Sandbox", namespace, sandbox.name, body, version)
    if stored is None:  # another run's hold (or any change) came first: look again
        said = f"waiting for Sandbox {sandbox.name}: another run is taking it (one run at a time)"
        return waiting_for_sandbox(Waiting(sandbox.name, R.SANDBOX_BUSY, said))
    CACHE.seen("MODIFIED", stored)
    _mark_held(namespace, stored)
    return None


def _mark_held(namespace: str, sandbox: Obj) -> None:
    """Say in the Sandbox's status, for good, that a run has held it (before anything of the
    run's starts in it): a pool never hands out a member a run used outside a take. Written
    in the status, which no user but the operator may write."""
    if (sandbox.get("status") or {}).get("everHeld"):
        return
    stored = kube.patch_status("Sandbox", namespace, sandbox["metadata"]["name"], EVER_HELD)
    if stored is not None:
        CACHE.seen("MODIFIED", stored)


def let_go(run: Obj, sandbox: str | None) -> None:
    """The run ended: its hold on the sandbox goes (only its own: a write made only if the
    Sandbox is unchanged, read again once if it changed since the cache saw it)."""
    meta = run["metadata"]
    found = CACHE.get("Sandbox", meta["namespace"], sandbox) if sandbox else None
    for _ in range(2):
        if found is None or _holder(found) != meta["uid"]:
            return
        if found["metadata"].get("deletionTimestamp") or controlled_by(found, meta["uid"]):
            return  # going, or the run's own sandbox: removed with the run's end, hold and all
        body = {"metadata": {"annotations": dict.fromkeys(held_by(run))}}
        version = str(found["metadata"].get("resourceVersion") or "")
        stored = kube.patch_if_unchanged("Sandbox", meta["namespace"], str(sandbox), body, version)
        if stored is not None:
            CACHE.seen("MODIFIED", stored)
            return
        found = kube.get("Sandbox", meta["namespace"], str(sandbox))
