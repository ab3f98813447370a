"""Writing an outcome back: status patch, Events, and a retry when something is missing."""

from __future__ import annotations

from typing import Any, cast

import kopf

from paddock.kube import client as kube
from paddock.sandboxes.reconcile import Outcome


def report(kind: str, body: dict[str, Any], outcome: Outcome, *, retry: bool = True) -> None:
    """Patch the status, post the Events, and (when ``retry``) ask kopf to run the handler
    again after ``outcome.retry_after``; the condition already says what is awaited."""
    meta = body["metadata"]
    kube.patch_status(kind, meta["namespace"], meta["name"], outcome.status)
    for event in outcome.events:
        kopf.event(
            cast(kopf.Body, body), type=event.type, reason=event.reason, message=event.message
        )
    if retry and outcome.retry_after is not None:
        message = outcome.status.get("message") or "waiting for what the conditions name"
        raise kopf.TemporaryError(message, delay=outcome.retry_after)
