"""The model routes the gateway serves, as its watch of their Secrets (in its own namespace)
last said, and which one a request is on: its token's, when it comes from a pod of the route's
sandbox before the route expires. Pure, apart from the lock: ``helper.follow_routes`` fills it."""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from paddock.render.model_routes import Route, read_route, token_digest

Obj = dict[str, Any]


@dataclass(frozen=True)
class Refused:
    """Why a request gets no route, and the run it named, when its token is a route's."""

    reason: str
    run: str = ""


class Routes:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, Route] = {}

    def changed(self, kind: str, event: str, obj: Obj) -> None:
        del kind
        name = obj["metadata"]["name"]
        route = None if event == "DELETED" else read_route(obj)
        with self._lock:
            if route is None:
                self._by_name.pop(name, None)
            else:
                self._by_name[name] = route

    def relisted(self, kind: str, items: list[Obj]) -> None:
        with self._lock:
            self._by_name.clear()
        for item in items:
            self.changed(kind, "ADDED", item)

    def runs(self) -> set[str]:
        with self._lock:
            return {route.run for route in self._by_name.values()}

    def find(self, token: str, sandbox: str | None, now: datetime) -> Route | Refused:
        """The route of ``token`` for a request from a pod of ``sandbox`` (None: the address
        is no sandbox pod's)."""
        if not token:
            return Refused("the request carries no token of a run")
        digest = token_digest(token)
        with self._lock:
            found = [
                r for r in self._by_name.values() if hmac.compare_digest(r.token_sha256, digest)
            ]
        if not found:
            return Refused("the token is no running run's")
        route = found[0]
        if now >= route.expires:
            return Refused("the run's route has expired", route.run)
        if sandbox != route.sandbox:
            return Refused(f"the token is not for {sandbox or 'this address'}", route.run)
        return route
