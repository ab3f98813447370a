"""The cluster's own addresses (its nodes', the API server's), which the gateway never connects
to whatever a name resolves to, as its watches of Nodes and of the API server's EndpointSlice
show them. Squid holds them in its configuration: a change is written there, and Squid is told
to read it again (SIGHUP), as it is when a node comes or goes."""

from __future__ import annotations

import ipaddress
import threading
from typing import Any

from paddock.sandboxes.network import addresses_of

Obj = dict[str, Any]


class ClusterAddresses:
    """Addresses by the Node or EndpointSlice that names them; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_source: dict[tuple[str, str], frozenset[str]] = {}

    def changed(self, kind: str, event: str, obj: Obj) -> bool:
        """Take a watch event in; whether the set of addresses changed."""
        source = (kind, (obj.get("metadata") or {}).get("name") or "")
        with self._lock:
            before = self._all()
            if event == "DELETED":
                self._by_source.pop(source, None)
            else:
                self._by_source[source] = addresses_of({**obj, "kind": kind})
            return self._all() != before

    def relisted(self, kind: str, items: list[Obj]) -> bool:
        """A new listing of ``kind``: what it no longer names is forgotten."""
        with self._lock:
            before = self._all()
            self._by_source = {s: a for s, a in self._by_source.items() if s[0] != kind}
            for item in items:
                name = (item.get("metadata") or {}).get("name") or ""
                self._by_source[(kind, name)] = addresses_of({**item, "kind": kind})
            return self._all() != before

    def cidrs(self) -> tuple[str, ...]:
        """Each address as a one-address range, in a stable order."""
        with self._lock:
            found = self._all()
        networks = sorted({ipaddress.ip_network(a) for a in found}, key=_order)
        return tuple(str(n) for n in networks)

    def _all(self) -> frozenset[str]:
        return frozenset().union(*self._by_source.values())


def _order(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> tuple[int, int]:
    return network.version, int(network.network_address)
