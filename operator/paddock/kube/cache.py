"""What the watches have shown of the objects a reconcile reads: Sandboxes, Workspaces,
SandboxPolicies, the pods, PVCs, ConfigMaps and NetworkPolicies labelled as a sandbox's, the
VolumeSnapshots Paddock took, and the cluster's StorageClasses and VolumeSnapshotClasses.

kopf's event handlers put and drop objects as their watches see them; a reconcile reads here
first and asks the API server only on a miss (an object not made yet, or not seen yet since
the operator started), so a steady state makes no reads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from paddock.kube import client

Obj = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace, name
View = Callable[[Obj], Obj]


class ObjectCache:
    """Thread-safe: kopf runs event handlers and reconciles in several threads."""

    def __init__(self, remembered_deletions: int = 10_000) -> None:
        self._objects: dict[Key, Obj] = {}
        # The names of each kind in each namespace, for listing without a scan of every kind's
        # objects in the cluster (a reconcile lists its namespace's, under the lock).
        self._names: dict[tuple[str, str], set[str]] = {}
        # Objects a watch saw deleted, so that the events of a sandbox's parts going away
        # after it read nothing; the oldest are forgotten first.
        self._deleted: OrderedDict[Key, None] = OrderedDict()
        self._remembered = remembered_deletions
        self._views: dict[str, View] = {}  # what is kept of each object of a kind
        self._lock = threading.Lock()

    def keep(self, kind: str, view: View) -> None:
        """From now on, keep of each ``kind`` object only ``view(obj)``: what the reconciles
        read of it (it must keep the metadata), not the whole object. Other kinds are kept
        whole but for their ``managedFields``."""
        with self._lock:
            self._views[kind] = view

    def seen(self, event_type: str | None, obj: Obj) -> None:
        """Record a watch event of ``obj`` (``DELETED`` drops it)."""
        meta = obj["metadata"]
        key = (str(obj["kind"]), meta.get("namespace") or "", meta["name"])
        with self._lock:
            if event_type == "DELETED":
                self._objects.pop(key, None)
                self._names.get(key[:2], set()).discard(key[2])
                self._deleted[key] = None
                self._deleted.move_to_end(key)
                while len(self._deleted) > self._remembered:
                    self._deleted.popitem(last=False)
            else:
                known = self._objects.get(key)
                if known is None or not _older(obj, known):
                    self._objects[key] = self._views.get(key[0], slim)(obj)
                    self._names.setdefault(key[:2], set()).add(key[2])
                self._deleted.pop(key, None)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The object as last seen; None when a watch saw it deleted; else as the API
        server has it now (None: it does not exist)."""
        key = (kind, namespace, name)
        with self._lock:
            found = self._objects.get(key)
            if found is not None or key in self._deleted:
                return found
        return client.get(kind, namespace, name)

    def peek(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The object as last seen, or None: never asks the API server."""
        with self._lock:
            return self._objects.get((kind, namespace, name))

    def listed(self, kind: str, namespace: str = "") -> list[Obj]:
        """The objects of a kind a watch has shown, in one namespace (cluster-scoped: "");
        never asks the API server, so only for kinds that are watched."""
        with self._lock:
            names = sorted(self._names.get((kind, namespace), ()))
            return [self._objects[(kind, namespace, name)] for name in names]

    def freshest(self, obj: Obj) -> Obj:
        """``obj``, or the copy seen since if that is newer (a handler's body can predate a
        status the operator wrote a moment ago)."""
        meta = obj["metadata"]
        with self._lock:
            known = self._objects.get((str(obj["kind"]), meta.get("namespace") or "", meta["name"]))
        return known if known is not None and _older(obj, known) else obj

    def clear(self) -> None:
        with self._lock:
            self._objects.clear()
            self._names.clear()
            self._deleted.clear()


def slim(obj: Obj) -> Obj:
    """Without ``managedFields``, which no reconcile reads and which are often most of an
    object's size."""
    if "managedFields" not in obj.get("metadata", {}):
        return obj
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    return {**obj, "metadata": meta}


def _older(obj: Obj, known: Obj) -> bool:
    """Whether ``obj`` is an older version than ``known``: a watch event still on its way
    after a write's response was stored. (resourceVersions are etcd revisions in every API
    server Paddock targets; one that is not a number never counts as older.)"""
    try:
        return int(obj["metadata"]["resourceVersion"]) < int(known["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return False


CACHE = ObjectCache()
