"""Sandbox: reconcile whenever it, its pod, volume, files, fences (``fences.py``), Workspace or
SandboxPolicy changes, and on a timer only for an idle timeout.

Every change comes from a watch event and goes through the reconcile queue (``coalescing``):
the events of one Sandbox within ``PADDOCK_COALESCE_SECONDS`` are one reconcile, and a
reconcile that waits is queued again for when it said. kopf's change handlers are not used for
Sandboxes: they would keep a copy of each Sandbox's spec in an annotation, one more write per
Sandbox, to tell a change from a replay, which a level-based reconcile does not need."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from paddock import GROUP, VERSION, metrics
from paddock.api.conditions import Notice
from paddock.api.reasons import SandboxReason
from paddock.handlers.fences import retire_unused
from paddock.handlers.pool import member_seen
from paddock.handlers.references import Reference, references_of
from paddock.handlers.reporting import report
from paddock.sandboxes import service, shared
from paddock.sandboxes.writes import Outcome
from paddock.settings import OperatorSettings
from paddock.vocab.names import FILES_LABEL, SANDBOX_LABEL, WORKSPACE_LABEL

# Timers are declared at import, before the startup handler runs: read the setting here.
RESYNC_SECONDS = OperatorSettings.from_env().tuning.resync_seconds

Obj = dict[str, Any]
MESSAGE_LIMIT = 500


# Event handlers that only file work (the cache, the queues) are coroutines here and in the
# other handler modules: they never wait on the API, so they run on kopf's event loop without
# a hop to one of its threads and back for every event, and never queue behind a handler
# that does wait (a Workspace's, a run's deletion). What does wait on the API (deleting a
# fence no sandbox uses any more) goes to a thread.


@kopf.on.event(GROUP, VERSION, "sandboxes")
async def sandbox_seen(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    sandbox = dict(body)
    meta = sandbox["metadata"]
    named = (meta.get("namespace") or "", meta["name"])
    before = service.watched(type, sandbox)
    member_seen(memo, sandbox, before)
    if type == "DELETED":
        unused = memo.references.forget(named)
        service.sandbox_deleted(sandbox)
    else:
        references = references_of(sandbox, memo.config.policy_default)
        unused = memo.references.update(named, references)
        # (A Sandbox the operator made is in the cache before its ADDED event: a pool's
        # member. It is reconciled all the same.)
        if type in (None, "ADDED") or before is None or _essence(before) != _essence(sandbox):
            memo.reconciles.ask(named)
    if type is not None:
        metrics.sandbox_seen(type, sandbox)
    if unused:
        await asyncio.to_thread(retire_unused, unused)


def _essence(sandbox: Obj) -> tuple[Any, ...]:
    """What a reconcile acts on: not the status, which the operator writes itself."""
    meta = sandbox["metadata"]
    return (
        meta.get("generation"),
        meta.get("labels"),
        meta.get("annotations"),  # the activity annotation, among others
        meta.get("deletionTimestamp"),
    )


def _idles_out(spec: kopf.Spec, **_: Any) -> bool:
    return bool((spec.get("lifecycle") or {}).get("idleTimeout"))


# Only a sandbox with an idle timeout has something to do while nothing changes: the others
# get no timer (and so no finalizer); their parts' watches and their own changes drive them.
@kopf.timer(
    GROUP, VERSION, "sandboxes", interval=RESYNC_SECONDS, idle=RESYNC_SECONDS, when=_idles_out
)
def sandbox_resync(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(dict(body), memo.config, 0)  # a timer's next tick is its retry


def _reconcile(body: dict[str, Any], config: OperatorSettings, retry: int) -> None:
    with metrics.reconciling("Sandbox") as result:
        outcome = service.reconcile_sandbox(body, config, retry)
        if outcome.retry_after is not None:
            result["result"] = "waiting"
    report(body, outcome)


@kopf.on.event("pods", labels={SANDBOX_LABEL: kopf.PRESENT})
@kopf.on.event("persistentvolumeclaims", labels={SANDBOX_LABEL: kopf.PRESENT})
async def sandbox_part_changed(
    type: str | None,
    body: kopf.Body,
    labels: kopf.Labels,
    namespace: str | None,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    before = service.watched(type, dict(body))
    memo.reconciles.ask((namespace or "", labels[SANDBOX_LABEL]))
    if type == "DELETED" and body["kind"] == "Pod":
        # The files ConfigMap it mounted may be one no pod uses any more.
        workspace = shared.files_workspace(dict(before or body))
        if workspace is not None:
            memo.workspace_snapshots.ask((namespace or "", workspace))


def reconcile_named(
    namespace: str, name: str, config: OperatorSettings, attempt: int = 0
) -> float | None:
    """Reconcile a Sandbox (from the reconcile queue; ``attempt`` counts its waits in a row):
    the seconds after which to look again, if it waits."""
    try:
        with metrics.reconciling("Sandbox") as result:
            reconciled = service.reconcile_sandbox_named(namespace, name, config, attempt)
            if reconciled is not None and reconciled[1].retry_after is not None:
                result["result"] = "waiting"
    except Exception as exc:  # the queue tries again, with backoff; a person hears of it
        _failed(namespace, name, exc)
        raise
    if reconciled is None:  # deleted, or being garbage-collected with its owner
        return None
    report(*reconciled, retry=False)
    return reconciled[1].retry_after


def _failed(namespace: str, name: str, exc: Exception) -> None:
    """A Warning Event on the Sandbox for a reconcile that raised (a refused read, a bug)."""
    body = service.known_sandbox(namespace, name)
    if body is None:
        return
    said = str(getattr(exc, "message", "") or exc)[:MESSAGE_LIMIT]
    message = f"The operator could not reconcile the Sandbox ({type(exc).__name__}: {said}); "
    message += "it tries again, with backoff."
    report(body, Outcome([Notice(SandboxReason.RECONCILE_FAILED, message)]), retry=False)


@kopf.on.event("configmaps", labels={WORKSPACE_LABEL: kopf.PRESENT, FILES_LABEL: kopf.PRESENT})
async def files_seen(
    type: str | None, body: kopf.Body, labels: kopf.Labels, memo: kopf.Memo, **_: Any
) -> None:
    """A Workspace's files ConfigMap: kept for reconciles to read; deleted, it is made again
    by the sandboxes of the Workspace (it is immutable: nothing else changes it)."""
    service.watched(type, dict(body))
    if type == "DELETED":
        namespace = body["metadata"].get("namespace") or ""
        reach_sandboxes(memo, ("Workspace", namespace, labels[WORKSPACE_LABEL]))


def reach_sandboxes(memo: kopf.Memo, reference: Reference) -> None:
    """Reconcile (soon) every Sandbox made from the Workspace or policy ``reference``."""
    for named in memo.references.sandboxes(reference):
        memo.reconciles.ask(named)
