"""Reporting an outcome: the Events it carries, and a retry when something is awaited."""

from __future__ import annotations

import threading
from typing import Any, cast

import kopf

from paddock.sandboxes.service import Outcome

# The last Event posted per object: two reconciles that see the same stale status (a pod event
# and a Sandbox update at once, in two of kopf's worker threads) must not post it twice.
_last_posted: dict[str, tuple[str, str]] = {}
_posting = threading.Lock()


def report(body: dict[str, Any], outcome: Outcome, *, retry: bool = True) -> None:
    """Post the Events, and (when ``retry``) ask kopf to run the handler again after
    ``outcome.retry_after``; the status, already written, says what is awaited."""
    uid = str(body["metadata"].get("uid"))
    for notice in outcome.notices:
        said = (str(notice.reason), notice.message)
        with _posting:
            if _last_posted.get(uid) == said:
                continue
            _last_posted[uid] = said
        kopf.event(
            cast(kopf.Body, body), type=notice.type, reason=notice.reason, message=notice.message
        )
    if body["metadata"].get("deletionTimestamp"):
        with _posting:
            _last_posted.pop(uid, None)
    if retry and outcome.retry_after is not None:
        message = outcome.message or "waiting for what the conditions name"
        raise kopf.TemporaryError(message, delay=outcome.retry_after)
