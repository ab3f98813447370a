"""The egress gateway of the local cluster's real node: Squid with Paddock's helper, as
``paddock gateway`` runs it in the chart, here a process of the host listening on the node's
bridge address (where the node's pods reach the host) instead of a pod behind a Service.

It resolves a few names of its own (``NAMES``): the bridge address under two names, for tests'
servers there, and a name of the host's loopback, which it must refuse as it refuses every
internal address. The bridge address is the one internal address it lets a name reach.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from paddock.devcluster.certs import client_kubeconfig, issue_client_cert
from paddock.devcluster.processes import ClusterError, ClusterState, free_ports, spawn, wait_until
from paddock.gateway.run import HELPER_MODULE, peek_certificate
from paddock.gateway.squid import ALWAYS_INTERNAL, SquidConfig, render_squid_conf

if TYPE_CHECKING:
    from paddock.devcluster.node import NodePlan

COMPONENT = "gateway"
SHARED_MEMORY = Path("/dev/shm")  # noqa: S108  (where Linux keeps POSIX shared memory)
USER = "paddock:gateway"
# Names the gateway resolves itself: (name, "bridge" for the node's bridge address, or an
# address).
NAMES = (
    ("bridge.paddock.test", "bridge"),
    ("other.paddock.test", "bridge"),
    ("loopback.paddock.test", "127.0.0.1"),
)


def address(state: ClusterState, node: NodePlan) -> tuple[str, int]:
    """Where the node's pods reach the gateway."""
    return node.gateway, state.ports[COMPONENT]


def _rbac() -> str:
    """What the helper reads: sandbox pods, Sandboxes and SandboxPolicies."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "paddock-gateway"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
            {
                "apiGroups": ["paddock.dev"],
                "resources": ["sandboxes", "sandboxpolicies"],
                "verbs": ["list", "watch"],
            },
        ],
    }
    binding: dict[str, Any] = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "paddock-gateway"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "paddock-gateway",
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    return yaml.safe_dump_all([role, binding])


def start(state: ClusterState, node: NodePlan, kubectl: Any) -> None:
    """Run the gateway and wait until Squid listens."""
    squid = shutil.which("squid", path="/usr/sbin:/usr/bin:/usr/local/sbin")
    if squid is None:
        raise ClusterError("the egress gateway needs Squid (make node-packages: squid-openssl)")
    state.ports |= free_ports((COMPONENT,))
    state.save()
    root = node.run_dir / COMPONENT
    root.mkdir(parents=True, exist_ok=True)
    cert, key = root / "client.crt", root / "client.key"
    issue_client_cert(state.pki, USER, "paddock:node-components", cert, key)
    server = f"https://127.0.0.1:{state.ports['apiserver']}"
    (root / "kubeconfig").write_text(client_kubeconfig(server, state.pki, USER, cert, key))
    kubectl("apply", "-f", "-", stdin=_rbac())
    hosts = [f"{node.gateway if to == 'bridge' else to} {name}" for name, to in NAMES]
    (root / "hosts").write_text("\n".join(hosts) + "\n")
    host, port = address(state, node)
    config = SquidConfig(
        listen=f"{host}:{port}",
        runtime=root,
        helper=(sys.executable, "-m", HELPER_MODULE),
        internal=(*ALWAYS_INTERNAL, f"{node.host_ip}/32"),
        vouched=(f"{node.gateway}/32",),
        hosts_file=root / "hosts",
        user="root",  # the helper reads this checkout's virtual environment wherever it is
    )
    config.certificate.write_bytes(peek_certificate())
    config.certificate.chmod(0o600)
    (root / "squid.conf").write_text(render_squid_conf(config))
    env = {"PATH": "/usr/sbin:/usr/bin:/bin", "KUBECONFIG": str(root / "kubeconfig")}
    # Squid names its shared memory after its service name: one of this cluster's own, and
    # none left by a gateway of this name that was killed.
    service = f"paddock{node.ident}"
    for left in SHARED_MEMORY.glob(f"{service}-*"):
        left.unlink(missing_ok=True)
    argv = [squid, "-N", "-n", service, "-f", str(root / "squid.conf")]
    process = spawn(state, COMPONENT, argv, env=env)
    wait_until(state, COMPONENT, process, lambda: _listens(host, port), f"listening on {port}")


def _listens(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0
