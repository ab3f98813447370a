"""Reporting an outcome: the Events it carries, and a retry when something is awaited."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, cast

import kopf

from paddock.sandboxes.writes import Outcome


class LastPosted:
    """The last Event posted per object, so that two reconciles that see the same stale status
    (a pod event and a Sandbox update at once, in two of kopf's worker threads) do not post it
    twice. Bounded: the objects seen least recently are forgotten first (deleted objects are
    never announced to the handlers that post)."""

    def __init__(self, capacity: int = 50_000) -> None:
        self.capacity = capacity
        self._said: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self._lock = threading.Lock()

    def changed(self, uid: str, said: tuple[str, str]) -> bool:
        """Whether ``said`` differs from the last Event posted for ``uid`` (then it is that)."""
        with self._lock:
            if self._said.get(uid) == said:
                self._said.move_to_end(uid)
                return False
            self._said[uid] = said
            self._said.move_to_end(uid)
            while len(self._said) > self.capacity:
                self._said.popitem(last=False)
            return True


_last_posted = LastPosted()


def report(body: dict[str, Any], outcome: Outcome, *, retry: bool = True) -> None:
    """Post the Events, and (when ``retry``) ask kopf to run the handler again after
    ``outcome.retry_after``; the status, already written, says what is awaited."""
    uid = str(body["metadata"].get("uid"))
    for notice in outcome.notices:
        if not _last_posted.changed(uid, (str(notice.reason), notice.message)):
            continue
        kopf.event(
            cast(kopf.Body, body), type=notice.type, reason=notice.reason, message=notice.message
        )
    if retry and outcome.retry_after is not None:
        message = outcome.message or "waiting for what the conditions name"
        raise kopf.TemporaryError(message, delay=outcome.retry_after)
