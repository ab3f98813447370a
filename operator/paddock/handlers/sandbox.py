"""Sandbox: reconcile on every change, on a timer (idle timeout, a Workspace that changed),
and whenever its pod or volume changes."""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from paddock import GROUP, VERSION, metrics
from paddock.api.sandbox import SandboxSpec
from paddock.handlers.reporting import report
from paddock.policy.choice import choose_policy
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


@kopf.timer(GROUP, VERSION, "sandboxes", interval=RESYNC_SECONDS, idle=RESYNC_SECONDS)
def sandbox_resync(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    _reconcile(dict(body), memo.config, 0)  # a timer's next tick is its retry


@kopf.on.event(GROUP, VERSION, "sandboxes")
def sandbox_seen(type: str | None, body: kopf.Body, **_: Any) -> None:
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
    labels: kopf.Labels, namespace: str | None, memo: kopf.Memo, **_: Any
) -> None:
    reconcile_named(namespace or "", labels[SANDBOX_LABEL], memo.config)


def reconcile_named(namespace: str, name: str, config: OperatorSettings) -> None:
    """Reconcile a Sandbox because something it is made from changed (not from its own
    handler: not retried; its own handlers and timer are)."""
    with metrics.reconciling("Sandbox"):
        reconciled = service.reconcile_sandbox_named(namespace, name, config)
    if reconciled is not None:  # None: deleted, or being garbage-collected with its owner
        report(*reconciled, retry=False)


Reference = tuple[str, str, str]  # (kind, namespace, name) of a Workspace or SandboxPolicy
Named = tuple[str, str]  # (namespace, name) of a Sandbox


@kopf.index(GROUP, VERSION, "sandboxes")
def sandbox_references(
    namespace: str | None, name: str | None, spec: kopf.Spec, memo: kopf.Memo, **_: Any
) -> dict[Reference, Named]:
    """Each Sandbox under the Workspace and SandboxPolicy it is made from, kept from the
    watch: a change to either reaches its sandboxes at once, without a read."""
    try:
        sandbox = SandboxSpec.model_validate(dict(spec))
    except ValidationError:
        return {}
    named = (namespace or "", name or "")
    found = {("Workspace", named[0], sandbox.workspace_ref.name): named}
    choice = choose_policy(sandbox, named[0], memo.config.policy_default)
    if choice.name is not None:
        found[("SandboxPolicy", choice.namespace or named[0], choice.name)] = named
    return found


def reach_sandboxes(
    index: kopf.Index[Reference, Named], reference: Reference, config: OperatorSettings
) -> None:
    """Reconcile every Sandbox made from the Workspace or policy ``reference``."""
    if reference not in index:
        return
    for namespace, name in sorted(set(index[reference])):
        reconcile_named(namespace, name, config)
