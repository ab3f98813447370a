"""Sandbox: reconcile on every change, on a timer (idle timeout, a Workspace that changed),
and whenever its pod or volume changes."""

from __future__ import annotations

from typing import Any

import kopf

from paddock import GROUP, VERSION, metrics
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
    _reconcile(dict(body), memo.config.sandbox_image, retry)


@kopf.timer(GROUP, VERSION, "sandboxes", interval=RESYNC_SECONDS, idle=RESYNC_SECONDS)
def sandbox_resync(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(dict(body), memo.config.sandbox_image, 0)  # a timer's next tick is its retry


@kopf.on.event(GROUP, VERSION, "sandboxes")
def sandbox_seen(type: str | None, body: kopf.Body, **_: Any) -> None:
    if type is not None:
        metrics.sandbox_seen(type, dict(body))


def _reconcile(body: dict[str, Any], image: str, retry: int) -> None:
    with metrics.reconciling("Sandbox") as result:
        outcome = service.reconcile_sandbox(body, image, retry)
        if outcome.retry_after is not None:
            result["result"] = "waiting"
    report(body, outcome)


@kopf.on.event("pods", labels={SANDBOX_LABEL: kopf.PRESENT})
@kopf.on.event("persistentvolumeclaims", labels={SANDBOX_LABEL: kopf.PRESENT})
def sandbox_part_changed(
    labels: kopf.Labels, namespace: str | None, memo: kopf.Memo, **_: Any
) -> None:
    with metrics.reconciling("Sandbox"):
        reconciled = service.reconcile_sandbox_named(
            namespace or "", labels[SANDBOX_LABEL], memo.config.sandbox_image
        )
    if reconciled is not None:  # None: being garbage-collected with its owner
        # An event handler is not retried; the Sandbox's own handlers and timer are.
        report(*reconciled, retry=False)
