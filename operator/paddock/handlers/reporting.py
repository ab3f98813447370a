"""Reporting an outcome: the Events it carries, and a retry when something is awaited."""

from __future__ import annotations

from typing import Any, cast

import kopf

from paddock.sandboxes.service import Outcome


def report(body: dict[str, Any], outcome: Outcome, *, retry: bool = True) -> None:
    """Post the Events, and (when ``retry``) ask kopf to run the handler again after
    ``outcome.retry_after``; the status, already written, says what is awaited."""
    for notice in outcome.notices:
        kopf.event(
            cast(kopf.Body, body), type=notice.type, reason=notice.reason, message=notice.message
        )
    if retry and outcome.retry_after is not None:
        message = outcome.message or "waiting for what the conditions name"
        raise kopf.TemporaryError(message, delay=outcome.retry_after)
