"""The NetworkPolicies that fence sandbox pods in: the namespace's baseline, which isolates every
sandbox pod, and the fence of a SandboxPolicy's pods (shared by them, or one sandbox's own for
an inline policy), from the policy and what the cluster's network is made of."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.vocab import names
from paddock.vocab.networks import PRIVATE_V4, PRIVATE_V6

DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Gateway:
    """The egress gateway: the proxy URL sandboxes use, and the peers and ports their
    NetworkPolicy lets them reach it at: the proxy's where they go through it, its model
    route's (when it has one) always, since that answers only a run's token from the run's
    own sandbox."""

    proxy: str
    port: int
    model_port: int | None = None  # its model route's, which every sandbox may reach
    model_host: str | None = None  # the host in the model route's URL
    cidrs: tuple[str, ...] = ()
    namespace: str | None = None
    pod_labels: dict[str, str] = field(default_factory=dict)

    @property
    def holds_mcp_secrets(self) -> bool:
        """Whether it serves the runs' credential routes (on its model route's listener, the
        operator writing their Secrets in its namespace): then an MCP server's secret
        headers are its to hold, never a sandbox's."""
        return bool(self.model_host and self.namespace)

    def peers(self) -> list[dict[str, Any]]:
        peers: list[dict[str, Any]] = [
            {"ipBlock": {"cidr": str(ipaddress.ip_network(c))}} for c in self.cidrs
        ]
        if self.pod_labels:
            peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(self.pod_labels)}}
            if self.namespace:
                peer["namespaceSelector"] = {"matchLabels": {NAMESPACE_NAME_LABEL: self.namespace}}
            peers.append(peer)
        return peers


def through_gateway(policy: SandboxPolicySpec | None, gateway: Gateway | None) -> bool:
    """Whether the sandbox reaches the internet only through the gateway: its policy allows the
    network by host name, and there is a gateway."""
    return (
        gateway is not None
        and policy is not None
        and policy.capabilities.network == Decision.ALLOW
        and policy.network.hosts is not None
    )


@dataclass(frozen=True)
class ClusterNetwork:
    """What a sandbox's fence needs to know of the cluster: the ranges ``network: allow`` never
    reaches, the cluster's own addresses outside them (its nodes' and the API server's, which
    the operator learns from the API), and where DNS may go."""

    internal: tuple[str, ...] = PRIVATE_V4 + PRIVATE_V6
    addresses: frozenset[str] = frozenset()
    dns_namespace: str = "kube-system"
    dns_pod_labels: dict[str, str] = field(default_factory=lambda: {"k8s-app": "kube-dns"})
    dns_servers: tuple[str, ...] = ()
    gateway: Gateway | None = None

    def excluded(self, version: int) -> list[str]:
        """CIDRs of one IP version that ``network: allow`` leaves out: the internal ranges and
        every cluster address none of them covers, in a stable order."""
        return list(_excluded(self.internal, self.addresses, version))


@functools.lru_cache(maxsize=32)
def _excluded(
    internal: tuple[str, ...], addresses: frozenset[str], version: int
) -> tuple[str, ...]:
    """``ClusterNetwork.excluded``, parsed once for each set of ranges and addresses (every
    fence a reconcile renders asks for the same)."""
    ranges = [n for n in map(ipaddress.ip_network, internal) if n.version == version]
    hosts = [
        ipaddress.ip_network(address)
        for address in addresses
        if ipaddress.ip_address(address).version == version
    ]
    hosts = [host for host in hosts if not any(host.network_address in r for r in ranges)]
    return tuple(str(n) for n in _sorted(ranges) + _sorted(hosts))


def _sorted(networks: Iterable[Network]) -> list[Network]:
    return sorted(set(networks), key=lambda n: (int(n.network_address), n.prefixlen))


def render_network_policy(
    name: str, namespace: str, policy: SandboxPolicySpec, cluster: ClusterNetwork
) -> dict[str, Any]:
    """The fence ``name``, of the pods labelled with it: no ingress at all; egress per
    ``capabilities.network`` (where the policy names hosts: through the gateway alone, and
    nowhere by name without one), to
    the gateway's model route where it has one, plus the listed rules."""
    egress: list[dict[str, Any]] = []
    if policy.network.dns:
        egress.append({"to": _dns_peers(cluster), "ports": DNS_PORTS})
    gateway, proxied = cluster.gateway, through_gateway(policy, cluster.gateway)
    if gateway is not None and (proxied or gateway.model_port):
        ports = [gateway.port] if proxied else []
        ports += [gateway.model_port] if gateway.model_port else []
        to_gateway = [{"protocol": "TCP", "port": port} for port in ports]
        egress.append({"to": gateway.peers(), "ports": to_gateway})
    # By address only where the policy names no hosts: hosts without a gateway to judge them
    # reach nothing by name (fail closed), not the internet.
    if policy.capabilities.network == Decision.ALLOW and policy.network.hosts is None:
        everything = (("0.0.0.0/0", 4), ("::/0", 6))
        egress.append({"to": [_everything_but(c, cluster.excluded(v)) for c, v in everything]})
    for rule in policy.network.egress:
        entry: dict[str, Any] = {"to": [{"ipBlock": {"cidr": cidr}} for cidr in rule.cidrs]}
        if rule.ports:
            entry["ports"] = [{"protocol": p.protocol, "port": p.port} for p in rule.ports]
        egress.append(entry)
    selector = {"matchLabels": {names.NETWORK_LABEL: names.label_value(name)}}
    return _isolating(name, namespace, selector, egress)


def render_baseline_network_policy(namespace: str) -> dict[str, Any]:
    """What every sandbox pod of the namespace is under first: nothing in, nothing out. The
    pod's own fence adds what its policy allows; a fence lost or not yet made leaves the pod
    isolated, where no NetworkPolicy at all would leave it open."""
    selector = {"matchExpressions": [{"key": names.SANDBOX_LABEL, "operator": "Exists"}]}
    return _isolating(names.BASELINE_NETWORK_POLICY, namespace, selector, [])


def _isolating(
    name: str, namespace: str, selector: dict[str, Any], egress: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**names.MANAGED_BY, names.NETWORK_LABEL: names.label_value(name)},
        },
        "spec": {
            "podSelector": selector,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }


def _everything_but(cidr: str, excluded: list[str]) -> dict[str, Any]:
    block: dict[str, Any] = {"cidr": cidr}
    if excluded:
        block["except"] = excluded
    return {"ipBlock": block}


def _dns_peers(cluster: ClusterNetwork) -> list[dict[str, Any]]:
    """The cluster's DNS pods (a Service's address is translated to theirs before a policy
    sees the packet) and the resolvers the operator is told of, nothing else on port 53."""
    peers: list[dict[str, Any]] = [
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: cluster.dns_namespace}},
            "podSelector": {"matchLabels": dict(cluster.dns_pod_labels)},
        }
    ]
    for server in cluster.dns_servers:
        peers.append({"ipBlock": {"cidr": str(ipaddress.ip_network(server))}})
    return peers
