"""The cluster's own addresses, which a sandbox's fence leaves out under ``network: allow``: its
nodes' (``status.addresses``) and the API server's (the endpoints of ``default/kubernetes``),
as the watches show them. A change reaches every sandbox's NetworkPolicy."""

from __future__ import annotations

import ipaddress
import threading
from typing import Any
from urllib.parse import urlsplit

from paddock.render.network_policy import ClusterNetwork, Gateway
from paddock.settings.groups import GatewaySettings, NetworkSettings

Obj = dict[str, Any]
Source = tuple[str, str, str]  # (kind, namespace, name) of a Node or EndpointSlice
NODE_ADDRESS_TYPES = ("InternalIP", "ExternalIP")
API_SERVICE_LABEL = "kubernetes.io/service-name"


def addresses_of(obj: Obj) -> frozenset[str]:
    """The IP addresses a Node or EndpointSlice names (invalid ones skipped)."""
    if obj.get("kind") == "Node":
        listed = [
            entry.get("address")
            for entry in (obj.get("status") or {}).get("addresses") or []
            if entry.get("type") in NODE_ADDRESS_TYPES
        ]
    else:
        listed = [
            address
            for endpoint in obj.get("endpoints") or []
            for address in endpoint.get("addresses") or []
        ]
    return frozenset(str(a) for a in listed if isinstance(a, str) and _is_ip(a))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


class ClusterAddresses:
    """Thread-safe: kopf calls event handlers from several workers at once."""

    def __init__(self) -> None:
        self._by_source: dict[Source, frozenset[str]] = {}
        self._lock = threading.Lock()

    def seen(self, event_type: str | None, obj: Obj) -> bool:
        """Take a watch event in; whether the set of addresses changed."""
        meta = obj.get("metadata") or {}
        source = (str(obj.get("kind")), meta.get("namespace") or "", meta.get("name") or "")
        with self._lock:
            before = self._all()
            if event_type == "DELETED":
                self._by_source.pop(source, None)
            else:
                self._by_source[source] = addresses_of(obj)
            return self._all() != before

    def relisted(self, kind: str, items: list[Obj]) -> bool:
        """A new listing of ``kind`` (its items carry no kind): what it no longer names is
        forgotten; whether the set of addresses changed."""
        with self._lock:
            before = self._all()
            self._by_source = {s: a for s, a in self._by_source.items() if s[0] != kind}
        for item in items:
            self.seen("ADDED", {**item, "kind": kind})
        with self._lock:
            return self._all() != before

    def all(self) -> frozenset[str]:
        with self._lock:
            return self._all()

    def _all(self) -> frozenset[str]:
        return frozenset().union(*self._by_source.values())

    def clear(self) -> None:
        with self._lock:
            self._by_source.clear()


def cluster_network(
    network: NetworkSettings, gateway: GatewaySettings, addresses: frozenset[str]
) -> ClusterNetwork:
    return ClusterNetwork(
        internal=tuple(network.internal_cidrs),
        addresses=addresses,
        dns_namespace=network.dns_namespace,
        dns_pod_labels=dict(network.dns_pod_labels),
        dns_servers=tuple(network.dns_servers),
        gateway=_gateway(gateway),
    )


def _gateway(config: GatewaySettings) -> Gateway | None:
    if not config.proxy:
        return None
    model = urlsplit(config.model_url) if config.model_url else None
    return Gateway(
        proxy=config.proxy,
        port=config.port,
        model_port=config.model_port if model else None,
        model_host=model.hostname if model else None,
        cidrs=tuple(config.cidrs),
        namespace=config.namespace,
        pod_labels=dict(config.pod_labels),
    )
