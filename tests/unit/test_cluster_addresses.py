"""The cluster's own addresses, from the watches of Nodes and of the API server's EndpointSlice
(pure): which ones count, and when the set changes."""

from __future__ import annotations

from typing import Any

from paddock.render.cluster_addresses import ClusterAddresses, addresses_of


def _node(name: str, *addresses: tuple[str, str]) -> dict[str, Any]:
    listed = [{"type": kind, "address": address} for kind, address in addresses]
    return {"kind": "Node", "metadata": {"name": name}, "status": {"addresses": listed}}


def _api_slice(*addresses: str) -> dict[str, Any]:
    return {
        "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": "kubernetes"},
        "endpoints": [{"addresses": [address]} for address in addresses],
    }


def test_a_node_counts_its_ip_addresses_not_its_names() -> None:
    node = _node(
        "n1",
        ("InternalIP", "10.0.0.4"),
        ("ExternalIP", "203.0.113.4"),
        ("Hostname", "n1"),
        ("InternalDNS", "n1.internal"),
        ("InternalIP", "not-an-address"),
    )
    assert addresses_of(node) == {"10.0.0.4", "203.0.113.4"}


def test_the_api_server_slice_counts_every_endpoint() -> None:
    assert addresses_of(_api_slice("198.51.100.1", "198.51.100.2")) == {
        "198.51.100.1",
        "198.51.100.2",
    }


def test_the_set_changes_only_when_an_address_comes_or_goes() -> None:
    seen = ClusterAddresses()
    assert seen.seen(None, _node("n1", ("InternalIP", "192.0.2.2")))
    assert not seen.seen("MODIFIED", _node("n1", ("InternalIP", "192.0.2.2")))  # a heartbeat
    assert seen.seen(None, _api_slice("192.0.2.9"))
    # Two nodes naming one address: it stays while either does.
    assert not seen.seen("ADDED", _node("n2", ("InternalIP", "192.0.2.2")))
    assert not seen.seen("DELETED", _node("n1"))
    assert seen.all() == {"192.0.2.2", "192.0.2.9"}
    assert seen.seen("DELETED", _node("n2"))
    assert seen.all() == {"192.0.2.9"}
