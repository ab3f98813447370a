"""NetworkPolicies enforced on the real node: kube-network-policies' controller (nftables rules
that send new connections of the node's fenced pods to an NFQUEUE, where a process of ours
judges each against the cluster's NetworkPolicies), plus one rule of the node's own.

kube-network-policies sees what leaves the node and what crosses the bridge between pods (the
bridge hands its packets to the IP hooks: ``br_netfilter``), but not a pod's connection to an
address of the node itself (the bridge's gateway, the host's address where the API server
listens): such a packet ends in the host's ``input`` hook. The node sends those, too, to the same
queue, so that a pod's egress policy decides about the node as about any other address.

Everything is named after the cluster (the node's ident): the controller's table
``paddock-<ident>-policies``, the node's rule's comment, the queue's number.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from paddock_dev.certs import client_kubeconfig, issue_client_cert
from paddock_dev.processes import ClusterError, ClusterState, spawn, wait_until

if TYPE_CHECKING:
    from paddock_dev.binaries import Binaries
    from paddock_dev.node import NodePlan

COMPONENT = "network-policies"
USER = "paddock:network-policies"
BRIDGE_NETFILTER = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")


def unavailable_reason() -> str | None:
    """Why pods on the bridge would pass each other unseen, or None."""
    try:
        calls = BRIDGE_NETFILTER.read_text().strip()
    except OSError:
        return "the kernel's br_netfilter is not loaded (modprobe br_netfilter)"
    if calls != "1":
        return f"{BRIDGE_NETFILTER} is {calls} (sysctl net.bridge.bridge-nf-call-iptables=1)"
    return None


def controller_table(node: NodePlan) -> str:
    return f"paddock-{node.ident}-policies"


def queue_number(node: NodePlan) -> int:
    """A queue of this cluster's own (another cluster's node may run next to it)."""
    return 1000 + int(node.ident, 16) % 60000


def input_rule(node: NodePlan) -> list[str]:
    """The node's own rule (filter INPUT): a pod's new connection to the node is judged like any
    other. An x_tables target, like the controller's (see hack/network-policies/patch)."""
    return [
        "INPUT", "-i", node.bridge, "-m", "conntrack", "--ctstate", "NEW",
        "-j", "NFQUEUE", "--queue-num", str(queue_number(node)),
        "-m", "comment", "--comment", f"paddock node {node.ident} policies",
    ]  # fmt: skip


def _rbac() -> str:
    """What the controller reads (pods, namespaces, policies) and the Events it records."""
    rules = [
        {"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["networkpolicies"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
         "verbs": ["create", "patch", "update"]},
    ]  # fmt: skip
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "paddock-network-policies"},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "paddock-network-policies"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "paddock-network-policies"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }  # fmt: skip
    return yaml.safe_dump_all([role, binding])


def table_exists(table: str) -> bool:
    listed = subprocess.run(["nft", "list", "table", "inet", table], capture_output=True)
    return listed.returncode == 0


def start(binaries: Binaries, state: ClusterState, node: NodePlan, kubectl: Any) -> None:
    """Run the controller and wait until its rules are in place, then add the node's own rule."""
    root = node.root
    cert, key = root / "pki" / "network-policies.crt", root / "pki" / "network-policies.key"
    issue_client_cert(state.pki, USER, "paddock:node-components", cert, key)
    server = f"https://127.0.0.1:{state.ports['apiserver']}"
    kubeconfig = client_kubeconfig(server, state.pki, USER, cert, key)
    (root / "network-policies.kubeconfig").write_text(kubeconfig)
    kubectl("apply", "-f", "-", stdin=_rbac())
    process = spawn(
        state,
        COMPONENT,
        [
            str(binaries.network_policies),
            f"--kubeconfig={root / 'network-policies.kubeconfig'}",
            "--node-name=paddock-node",
            f"--nftables-table={controller_table(node)}",
            f"--nfqueue-id={queue_number(node)}",
        ],
    )
    table = controller_table(node)
    wait_until(state, COMPONENT, process, lambda: table_exists(table), f"nftables table {table}")
    added = subprocess.run(["iptables", "-A", *input_rule(node)], capture_output=True, text=True)
    if added.returncode != 0:
        raise ClusterError(f"real node: iptables refused the node's rule: {added.stderr.strip()}")


def input_rule_exists(node: NodePlan) -> bool:
    return (
        subprocess.run(["iptables", "-C", *input_rule(node)], capture_output=True).returncode == 0
    )


def remove_rules(node: NodePlan) -> None:
    """Delete the node's rule and the controller's table (the controller deletes it as it
    stops; this is for when it could not)."""
    while input_rule_exists(node):
        subprocess.run(["iptables", "-D", *input_rule(node)], capture_output=True)
    if table_exists(controller_table(node)):
        subprocess.run(["nft", "delete", "table", "inet", controller_table(node)])
