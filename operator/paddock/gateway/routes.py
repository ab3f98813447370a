"""The routes the gateway serves (the model routes; the credential routes, in ``credentials``),
as its watch of their Secrets (in its own namespace) last said, and which one a request is on:
its token's, when it comes from a pod of the route's sandbox before the route expires. Pure,
apart from the lock: ``helper.follow_routes`` fills it."""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from paddock.render.model_routes import Route, read_route, token_digest

Obj = dict[str, Any]


@dataclass(frozen=True)
class Refused:
    """Why a request gets no route, and the run it named, when its token is a route's."""

    reason: str
    run: str = ""


class Held(Protocol):
    """What a token's Secret holds that decides whether a request is on it."""

    @property
    def token_sha256(self) -> str: ...
    @property
    def run(self) -> str: ...
    @property
    def sandbox(self) -> str: ...
    @property
    def expires(self) -> datetime: ...


T = TypeVar("T", bound=Held)


class TokenStore(Generic[T]):
    """Secrets read by ``read`` (the model routes', the credential routes'), by name."""

    def __init__(self, read: Callable[[Obj], T | None]) -> None:
        self._read = read
        self._lock = threading.Lock()
        self._by_name: dict[str, T] = {}

    def changed(self, kind: str, event: str, obj: Obj) -> None:
        del kind
        name = obj["metadata"]["name"]
        held = None if event == "DELETED" else self._read(obj)
        with self._lock:
            if held is None:
                self._by_name.pop(name, None)
            else:
                self._by_name[name] = held

    def relisted(self, kind: str, items: list[Obj]) -> None:
        with self._lock:
            self._by_name.clear()
        for item in items:
            self.changed(kind, "ADDED", item)

    def runs(self) -> set[str]:
        with self._lock:
            return {held.run for held in self._by_name.values()}

    def find(self, token: str, sandbox: str | None, now: datetime) -> T | Refused:
        """What ``token`` holds, for a request from a pod of ``sandbox`` (None: the address
        is no sandbox pod's)."""
        if not token:
            return Refused("the request carries no token of a run")
        digest = token_digest(token)
        with self._lock:
            found = [
                h for h in self._by_name.values() if hmac.compare_digest(h.token_sha256, digest)
            ]
        if not found:
            return Refused("the token is no running run's")
        held = found[0]
        if now >= held.expires:
            return Refused("the run's route has expired", held.run)
        if sandbox != held.sandbox:
            return Refused(f"the token is not for {sandbox or 'this address'}", held.run)
        return held


class Routes(TokenStore[Route]):
    """The model routes."""

    def __init__(self) -> None:
        super().__init__(read_route)
