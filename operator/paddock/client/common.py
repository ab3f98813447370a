"""What the user-side operations share: reading an object the caller names, its conditions,
and a namespace's objects of a kind as they change."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from paddock.client.access import Caller, MissingError
from paddock.kube import client as kube
from paddock.kube import watches
from paddock.kube.follow import PERSON_PATIENCE, Listed, follow

Obj = dict[str, Any]


def get(kind: str, namespace: str, name: str) -> Obj:
    found = kube.get(kind, namespace, name)
    if found is None:
        raise MissingError(f"{kind} {name} not found in namespace {namespace}")
    return found


def conditions(obj: Obj) -> dict[str, str]:
    status = obj.get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


WATCH_SECONDS = 300  # how long one watch runs before the server ends it and it is renewed
RECHECK_SECONDS = 30  # ... when a person's live page follows it: their access is asked again


def as_they_change(
    kind: str, namespace: str, check: Callable[[], None] | None = None
) -> Iterator[list[Obj]]:
    """Every ``kind`` object of the namespace, newest first: once listed, then again after each
    change a watch brings (``kube.follow``: listed again only when the watch's version has
    expired, or once the API server is back, within PERSON_PATIENCE). The caller checks who
    may list and watch them first; ``check``, which raises once they may no more, is called
    again each time a watch ends, at most RECHECK_SECONDS apart."""
    seconds = WATCH_SECONDS if check is None else RECHECK_SECONDS
    current: dict[str, Obj] = {}

    def renewed() -> bool:
        if check is not None:
            check()
        return True

    for seen in follow(
        lambda: watches.list_in_at(kind, namespace),
        lambda version: watches.watch_in(kind, namespace, version, seconds),
        renewed=renewed,
        patience=PERSON_PATIENCE,
    ):
        if isinstance(seen, Listed):
            current = {o["metadata"]["uid"]: o for o in seen.objects}
        elif seen.type == "DELETED":
            current.pop(seen.object["metadata"]["uid"], None)
        else:
            current[seen.object["metadata"]["uid"]] = seen.object
        yield newest_first(current.values())


def newest_first(objects: Iterable[Obj]) -> list[Obj]:
    return sorted(
        objects,
        key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"]["name"]),
        reverse=True,
    )


def listed(caller: Caller, kind: str, resource: tuple[str, str], namespace: str) -> list[Obj]:
    """Every ``kind`` object of the namespace, newest first, for a caller who may list them."""
    caller.may("list", resource, namespace)
    return newest_first(kube.listed(kind, namespace))
