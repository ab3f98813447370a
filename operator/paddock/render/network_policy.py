"""The NetworkPolicy that fences a sandbox pod in, from its SandboxPolicy."""

from __future__ import annotations

from typing import Any

from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.render import names

# "Internet" excludes what an agent must not reach by default: private and cluster-internal
# ranges (pods, services, nodes) and link-local addresses, which hold the cloud metadata
# service (169.254.169.254).
PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"]
PRIVATE_V6 = ["fc00::/7", "fe80::/10"]


def render_network_policy(name: str, namespace: str, policy: SandboxPolicySpec) -> dict[str, Any]:
    """No ingress at all; egress per ``capabilities.network`` plus the listed rules."""
    egress: list[dict[str, Any]] = []
    if policy.network.dns:
        egress.append({"ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]})
    if policy.capabilities.network == Decision.ALLOW:
        egress.append(
            {
                "to": [
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": PRIVATE_V4}},
                    {"ipBlock": {"cidr": "::/0", "except": PRIVATE_V6}},
                ]
            }
        )
    for rule in policy.network.egress:
        entry: dict[str, Any] = {"to": [{"ipBlock": {"cidr": cidr}} for cidr in rule.cidrs]}
        if rule.ports:
            entry["ports"] = [{"protocol": p.protocol, "port": p.port} for p in rule.ports]
        egress.append(entry)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": names.network_policy_name(name),
            "namespace": namespace,
            "labels": names.sandbox_labels(name),
        },
        "spec": {
            "podSelector": {"matchLabels": {names.SANDBOX_LABEL: name}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": egress,
        },
    }
