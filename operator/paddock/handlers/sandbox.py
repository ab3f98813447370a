"""Sandbox: reconcile on every change, whenever its pod, volume, files, NetworkPolicy,
Workspace or SandboxPolicy changes, and on a timer only for an idle timeout."""

from __future__ import annotations

from typing import Any

import kopf

from paddock import GROUP, VERSION, metrics
from paddock.handlers.references import Reference, references_of
from paddock.handlers.reporting import report
from paddock.render.names import SANDBOX_LABEL
from paddock.sandboxes import service
from paddock.settings import OperatorSettings

# Timers are declared at import, before the startup handler runs: read the setting here.
RESYNC_SECONDS = OperatorSettings.from_env().resync_seconds


@kopf.on.create(GROUP, VERSION, "sandboxes")
@kopf.on.update(GROUP, VERSION, "sandboxes")
@kopf.on.resume(GROUP, VERSION, "sandboxes")
def sandbox_changed(body: kopf.Body, memo: kopf.Memo, retry: int, **_: Any) -> None:
    _reconcile(dict(body), memo.config, retry)


def _idles_out(spec: kopf.Spec, **_: Any) -> bool:
    return bool((spec.get("lifecycle") or {}).get("idleTimeout"))


# Only a sandbox with an idle timeout has something to do while nothing changes: the others
# get no timer (and so no finalizer); their parts' watches and their own changes drive them.
@kopf.timer(
    GROUP, VERSION, "sandboxes", interval=RESYNC_SECONDS, idle=RESYNC_SECONDS, when=_idles_out
)
def sandbox_resync(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(dict(body), memo.config, 0)  # a timer's next tick is its retry


@kopf.on.event(GROUP, VERSION, "sandboxes")
def sandbox_seen(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    service.watched(type, dict(body))
    named = (body["metadata"].get("namespace") or "", body["metadata"]["name"])
    if type == "DELETED":
        memo.references.forget(named)
    else:
        memo.references.update(named, references_of(dict(body), memo.config.policy_default))
    if type is not None:
        metrics.sandbox_seen(type, dict(body))


def _reconcile(body: dict[str, Any], config: OperatorSettings, retry: int) -> None:
    with metrics.reconciling("Sandbox") as result:
        outcome = service.reconcile_sandbox(body, config, retry)
        if outcome.retry_after is not None:
            result["result"] = "waiting"
    report(body, outcome)


@kopf.on.event("pods", labels={SANDBOX_LABEL: kopf.PRESENT})
@kopf.on.event("persistentvolumeclaims", labels={SANDBOX_LABEL: kopf.PRESENT})
def sandbox_part_changed(
    type: str | None,
    body: kopf.Body,
    labels: kopf.Labels,
    namespace: str | None,
    memo: kopf.Memo,
    **_: Any,
) -> None:
    service.watched(type, dict(body))
    memo.reconciles.ask((namespace or "", labels[SANDBOX_LABEL]))


def reconcile_named(namespace: str, name: str, config: OperatorSettings) -> float | None:
    """Reconcile a Sandbox because something it is made from changed (from the reconcile
    queue, not from its own handler): the seconds after which to look again, if it waits."""
    with metrics.reconciling("Sandbox") as result:
        reconciled = service.reconcile_sandbox_named(namespace, name, config)
        if reconciled is not None and reconciled[1].retry_after is not None:
            result["result"] = "waiting"
    if reconciled is None:  # deleted, or being garbage-collected with its owner
        return None
    report(*reconciled, retry=False)
    return reconciled[1].retry_after


@kopf.on.event("configmaps", labels={SANDBOX_LABEL: kopf.PRESENT})
@kopf.on.event("networkpolicies", labels={SANDBOX_LABEL: kopf.PRESENT})
def sandbox_file_seen(
    type: str | None, body: kopf.Body, labels: kopf.Labels, memo: kopf.Memo, **_: Any
) -> None:
    """Kept for reconciles to read; a change or deletion (drift) is put back at once."""
    service.watched(type, dict(body))
    if type in ("MODIFIED", "DELETED"):
        memo.reconciles.ask((body["metadata"].get("namespace") or "", labels[SANDBOX_LABEL]))


def reach_sandboxes(memo: kopf.Memo, reference: Reference) -> None:
    """Reconcile (soon) every Sandbox made from the Workspace or policy ``reference``."""
    for named in memo.references.sandboxes(reference):
        memo.reconciles.ask(named)
