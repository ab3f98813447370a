"""What the watches have shown of the objects a reconcile reads: Sandboxes, Workspaces,
SandboxPolicies and the pods, PVCs, ConfigMaps and NetworkPolicies labelled as a sandbox's.

kopf's event handlers put and drop objects as their watches see them; a reconcile reads here
first and asks the API server only on a miss (an object not made yet, or not seen yet since
the operator started), so a steady state makes no reads.
"""

from __future__ import annotations

import threading
from typing import Any

from paddock.kube import client

Obj = dict[str, Any]
Key = tuple[str, str, str]  # kind, namespace, name


class ObjectCache:
    """Thread-safe: kopf runs event handlers and reconciles in several threads."""

    def __init__(self) -> None:
        self._objects: dict[Key, Obj] = {}
        self._lock = threading.Lock()

    def seen(self, event_type: str | None, obj: Obj) -> None:
        """Record a watch event of ``obj`` (``DELETED`` drops it)."""
        meta = obj["metadata"]
        key = (str(obj["kind"]), meta.get("namespace") or "", meta["name"])
        with self._lock:
            if event_type == "DELETED":
                self._objects.pop(key, None)
            else:  # one watch per kind, so events of one object arrive in order
                self._objects[key] = obj

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The object as last seen, else as the API server has it now (None: it does not
        exist)."""
        with self._lock:
            found = self._objects.get((kind, namespace, name))
        if found is not None:
            return found
        return client.get(kind, namespace, name)

    def clear(self) -> None:
        with self._lock:
            self._objects.clear()


CACHE = ObjectCache()
