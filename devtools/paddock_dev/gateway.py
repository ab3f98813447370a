"""The egress gateway of the local cluster's real node: Squid with Paddock's helper, as
``paddock gateway`` runs it in the chart, here a process of the host listening on the node's
bridge address (where the node's pods reach the host) instead of a pod behind a Service.

Squid will not run as root: started as root, it runs as ``RUN_AS``, and ``paddock gateway``
(root, reading this checkout's virtual environment) gives that user what Squid opens.

It resolves a few names of its own (``NAMES``): the bridge address under two names, for tests'
servers there, and a name of the host's loopback, which it must refuse as it refuses every
internal address, and a name of the node's own address, which it refuses as one of the
cluster's (from its watch of Nodes). The bridge address is the one internal address it lets a
name reach.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from paddock.gateway.run import forget_shared_memory
from paddock_dev.binaries import REPO_ROOT
from paddock_dev.certs import client_kubeconfig, issue_client_cert
from paddock_dev.processes import ClusterError, ClusterState, free_ports, spawn, wait_until

if TYPE_CHECKING:
    from paddock_dev.node import NodePlan

COMPONENT = "gateway"
RUN_AS = "proxy"  # Debian's user for Squid
METRICS = "gateway-metrics"
MODEL = "gateway-model"  # the model route's port
NAMESPACE = "paddock-gateway"  # where the operator writes the runs' model routes
PROGRAMS = "/usr/sbin:/usr/bin:/sbin:/bin"
USER = "paddock:gateway"
# Names the gateway resolves itself: (name, "bridge" for the node's bridge address, or an
# address).
NAMES = (
    ("bridge.paddock.test", "bridge"),
    ("other.paddock.test", "bridge"),
    ("loopback.paddock.test", "127.0.0.1"),
    ("node.paddock.test", "node"),  # the node's InternalIP: in no private range here
)


def address(state: ClusterState, node: NodePlan) -> tuple[str, int]:
    """Where the node's pods reach the gateway."""
    return node.gateway, state.ports[COMPONENT]


def model_address(state: ClusterState, node: NodePlan) -> tuple[str, int]:
    """Where the node's pods reach the gateway's model route."""
    return node.gateway, state.ports[MODEL]


def metrics_url(state: ClusterState) -> str:
    return f"http://127.0.0.1:{state.ports[METRICS]}/metrics"


def _rbac() -> str:
    """What the gateway reads: sandbox pods, Sandboxes, SandboxPolicies and AgentRuns; the
    Nodes and the API server's EndpointSlice (the cluster's own addresses); the Secrets of its
    own namespace (the runs' model routes). What it writes: Events (a host to ask about, on
    its run)."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "paddock-gateway"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list", "watch"]},
            {
                "apiGroups": ["discovery.k8s.io"],
                "resources": ["endpointslices"],
                "verbs": ["list", "watch"],
            },
            {
                "apiGroups": ["paddock.dev"],
                "resources": ["sandboxes", "sandboxpolicies", "agentruns"],
                "verbs": ["list", "watch"],
            },
            {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
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
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    routes = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "paddock-gateway", "namespace": NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "watch"]}],
    }
    routes_binding = {
        **binding,
        "kind": "RoleBinding",
        "metadata": {"name": "paddock-gateway", "namespace": NAMESPACE},
        "roleRef": {**binding["roleRef"], "kind": "Role"},
    }
    return yaml.safe_dump_all([role, binding, namespace, routes, routes_binding])


def start(state: ClusterState, node: NodePlan, kubectl: Any) -> None:
    """Run ``paddock gateway`` and wait until Squid listens."""
    state.ports |= free_ports((COMPONENT, METRICS, MODEL))
    state.record(COMPONENT, METRICS, MODEL)
    host, port = address(state, node)
    ports = state.ports
    argv, env = prepare(state, node, kubectl, COMPONENT, port, ports[MODEL], ports[METRICS])
    process = spawn(state, COMPONENT, argv, env=env)
    wait_until(state, COMPONENT, process, lambda: listens(host, port), f"listening on {port}")


def prepare(
    state: ClusterState,
    node: NodePlan,
    kubectl: Any,
    name: str,
    listen: int,
    model: int,
    metrics: int,
) -> tuple[list[str], dict[str, str]]:
    """What runs a gateway on the node's bridge address (``listen`` for Squid, ``model`` for
    the model route, ``metrics`` for its metrics): its command and environment,
    with its files under a runtime directory of its ``name``. The cluster's own is
    ``COMPONENT``; a test may run another beside it, to stop as it likes."""
    missing = [p for p in ("squid", "socat") if not shutil.which(p, path=PROGRAMS)]
    if missing:
        raise ClusterError(f"the egress gateway needs {' and '.join(missing)} (make node-packages)")
    root = node.run_dir / name
    root.mkdir(parents=True, exist_ok=True)
    (root / "kubeconfig").write_text(_kubeconfig(state, root))
    (root / "kubeconfig").chmod(0o600)
    kubectl("apply", "-f", "-", stdin=_rbac())
    named = {"bridge": node.gateway, "node": node.host_ip}
    hosts = [f"{named.get(to, to)} {host}" for host, to in NAMES]
    (root / "hosts").write_text("\n".join(hosts) + "\n")
    # Squid names its shared memory after its service name: one of this gateway's own, and
    # none left by a gateway of this name that was killed.
    service = service_name(node, name)
    forget_shared_memory(service)
    log = state.log(name)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    shutil.chown(log, RUN_AS, RUN_AS)  # Squid reopens its stdout by name, as RUN_AS
    prices = root / "prices.yaml"  # the chart's price table, as its ConfigMap holds it
    values = yaml.safe_load((REPO_ROOT / "charts" / "paddock" / "values.yaml").read_text())
    prices.write_text(yaml.safe_dump({"models": values["gateway"]["prices"]}))
    host = node.gateway
    argv = [
        sys.executable, "-m", "paddock.cli", "gateway",
        f"--listen={host}:{listen}", f"--runtime-dir={root}", f"--service={service}",
        f"--vouch={node.gateway}/32",
        f"--hosts-file={root / 'hosts'}", f"--run-as={RUN_AS}",
        f"--metrics-port={metrics}",
        f"--model-listen={host}:{model}", f"--namespace={NAMESPACE}",
        f"--prices={prices}",
    ]  # fmt: skip
    return argv, {**os.environ, "KUBECONFIG": str(root / "kubeconfig")}


def service_name(node: NodePlan, name: str) -> str:
    """Squid's service name for the gateway ``name``, after which it names its shared memory."""
    return f"paddock{node.ident}{name.removeprefix(COMPONENT).replace('-', '')}"


def listens(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def _kubeconfig(state: ClusterState, root: Path) -> str:
    """The gateway's own identity: it reads only what its ClusterRole grants."""
    cert, key = root / "client.crt", root / "client.key"
    issue_client_cert(state.pki, USER, "paddock:node-components", cert, key)
    server = f"https://127.0.0.1:{state.ports['apiserver']}"
    return client_kubeconfig(server, state.pki, USER, cert, key)
