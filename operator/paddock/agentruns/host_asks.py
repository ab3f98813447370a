"""The hosts the egress gateway asked about, by run: what its ``HostApprovalNeeded`` Events
(``render.host_asks``) said, as the operator's watch of those Events alone delivers them. A
run's step turns each into an approval of kind network (``gating.answer``)."""

from __future__ import annotations

import threading
from typing import Any

from paddock.render.host_asks import REASON, read_host_ask

__all__ = ["ASKS", "REASON", "HostAsks"]


class HostAsks:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_run: dict[str, set[str]] = {}  # run uid -> HOST:PORT asked about

    def seen(self, event_type: str | None, event: dict[str, Any]) -> None:
        """An Event the watch delivered (its deletion, an hour on, forgets nothing: the ask is
        an approval of the run by then)."""
        found = read_host_ask(event)
        if found is None or event_type == "DELETED":
            return
        uid, target = found
        with self._lock:
            self._by_run.setdefault(uid, set()).add(target)

    def of_run(self, uid: str) -> set[str]:
        with self._lock:
            return set(self._by_run.get(uid, ()))

    def forget(self, uid: str) -> None:
        with self._lock:
            self._by_run.pop(uid, None)


ASKS = HostAsks()
