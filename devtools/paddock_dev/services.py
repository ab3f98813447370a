"""Service ClusterIPs on the real node: what kube-proxy does, for the node's pods. A process of
ours follows Services and EndpointSlices and keeps one nftables table whose rules send a pod's
connection to a Service's ClusterIP and port to one of its ready endpoints, chosen at random
(DNAT, as kube-proxy's nftables mode does), so that the chart's pods reach the API server at the
``kubernetes`` Service and sandboxes reach the gateway at its Service's fixed address.

Why not kube-proxy itself: its nftables mode names its table ``kube-proxy`` and its iptables
mode its chains ``KUBE-*``, fixed, in the host's network namespace, where a second local cluster
(the e2e tests run one next to the session's) would take them over, and it sets host-wide
sysctls; everything the local cluster creates on the host is named after the cluster, so that
``down`` removes exactly what was made. This one's table is ``paddock-<ident>-services`` and
judges only packets that come in on the cluster's own bridge (two clusters' ClusterIP ranges
are the same). Replies need no rule: the bridge hands its packets to the IP hooks
(``br_netfilter``, which the node's NetworkPolicies need too), so conntrack undoes the DNAT.

Not done (nothing here needs it): NodePorts, LoadBalancers, external IPs, session affinity, a
connection from the host itself to a ClusterIP, a pod reaching itself through its own Service
(hairpin), and rejecting a connection to a Service without ready endpoints (it goes unanswered).
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from paddock_dev.certs import client_kubeconfig, issue_client_cert
from paddock_dev.processes import ClusterState, spawn, wait_until

if TYPE_CHECKING:
    from paddock_dev.node import NodePlan

COMPONENT = "services"
USER = "paddock:services"
log = logging.getLogger("paddock.services")


def table_name(node: NodePlan) -> str:
    return f"paddock-{node.ident}-services"


# --- deciding: the ruleset -----------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    """One Service port: its ClusterIP, protocol and port, and the endpoints (address, port)."""

    address: str
    protocol: str  # tcp, udp
    port: int
    endpoints: tuple[tuple[str, int], ...]


def routes(
    services: list[dict[str, Any]], slices: list[dict[str, Any]], node: str = ""
) -> list[Route]:
    """Each IPv4 ClusterIP Service port with its ready endpoints, from the objects as JSON:
    endpoints on ``node`` or on none (the API server's), not kwok's simulated pods, whose
    addresses lead nowhere; a slice port without a number (every port) is not followed."""
    ready: dict[tuple[str, str, str, str], set[tuple[str, int]]] = {}
    for piece in slices:
        if piece.get("addressType") != "IPv4":
            continue
        meta = piece["metadata"]
        service = (meta.get("labels") or {}).get("kubernetes.io/service-name")
        if not service:
            continue
        for port in piece.get("ports") or []:
            if not isinstance(port.get("port"), int):
                continue
            key = (meta["namespace"], service, port.get("name") or "", port.get("protocol", "TCP"))
            for endpoint in piece.get("endpoints") or []:
                if (endpoint.get("conditions") or {}).get("ready") is False:
                    continue
                if node and endpoint.get("nodeName") not in (None, node):
                    continue
                for address in endpoint.get("addresses") or []:
                    ready.setdefault(key, set()).add((address, int(port["port"])))
    found = []
    for service in services:
        spec, meta = service.get("spec") or {}, service["metadata"]
        address = spec.get("clusterIP")
        if not address or address == "None" or ":" in address:
            continue
        for port in spec.get("ports") or []:
            protocol = port.get("protocol", "TCP")
            if protocol not in ("TCP", "UDP"):
                continue
            key = (meta["namespace"], meta["name"], port.get("name") or "", protocol)
            endpoints = tuple(sorted(ready.get(key, ())))
            found.append(Route(address, protocol.lower(), int(port["port"]), endpoints))
    return sorted(found, key=lambda r: (r.address, r.protocol, r.port))


def ruleset(table: str, bridge: str, found: list[Route]) -> str:
    """The table, replaced whole in one transaction (``nft -f``): a map from ClusterIP, protocol
    and port to a chain per Service port that picks an endpoint at random."""
    chains, elements = [], []
    for number, route in enumerate(r for r in found if r.endpoints):
        picks = ", ".join(f"{i} : goto s{number}e{i}" for i in range(len(route.endpoints)))
        chains.append(
            f"  chain s{number} {{\n"
            f"    numgen random mod {len(route.endpoints)} vmap {{ {picks} }}\n  }}"
        )
        for i, (address, port) in enumerate(route.endpoints):
            dnat = f"meta l4proto {route.protocol} dnat to {address}:{port}"
            chains.append(f"  chain s{number}e{i} {{\n    {dnat}\n  }}")
        elements.append(f"{route.address} . {route.protocol} . {route.port} : goto s{number}")
    services = (
        "  map services {\n    type ipv4_addr . inet_proto . inet_service : verdict\n"
        + (f"    elements = {{ {', '.join(elements)} }}\n" if elements else "")
        + "  }"
    )
    prerouting = (
        "  chain prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n"
        f'    iifname "{bridge}" ip daddr . meta l4proto . th dport vmap @services\n  }}'
    )
    body = "\n".join([services, *chains, prerouting])
    return f"table ip {table}\ndelete table ip {table}\ntable ip {table} {{\n{body}\n}}\n"


# --- doing: the process --------------------------------------------------------------------------


class Follower:
    """The Services and EndpointSlices as the watches last showed them."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {
            "services": {},
            "slices": {},
        }
        self.changed = threading.Condition()
        self.version = 0
        self.listed: set[str] = set()  # the kinds listed once at least

    def seen(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        key = (meta["namespace"], meta["name"])
        with self.changed:
            if event == "DELETED":
                self.objects[kind].pop(key, None)
            else:
                self.objects[kind][key] = obj
            self.version += 1
            self.changed.notify_all()

    def after(self, version: int) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
        """Once both kinds were listed and the version is past ``version``: the version, the
        Services and the slices."""
        with self.changed:
            self.changed.wait_for(lambda: self.version != version and len(self.listed) == 2)
            services, slices = self.objects["services"], self.objects["slices"]
            return self.version, list(services.values()), list(slices.values())

    def relisted(self, kind: str, objs: list[dict[str, Any]]) -> None:
        with self.changed:
            self.objects[kind] = {
                (o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs
            }
            self.listed.add(kind)
            self.version += 1
            self.changed.notify_all()


def follow(kind: str, lister: Callable[..., Any], follower: Follower) -> None:
    """List, then watch from there; list again when the watch ends or is too old."""
    api = client.ApiClient()
    while True:
        try:
            listed = lister(_preload_content=False)
            data = json.loads(listed.data)
            follower.relisted(kind, data.get("items") or [])
            version = data["metadata"]["resourceVersion"]
            for event in watch.Watch().stream(
                lister, resource_version=version, timeout_seconds=300
            ):
                obj = api.sanitize_for_serialization(event["object"])
                follower.seen(kind, event["type"], obj)
        except ApiException as exc:
            if exc.status != 410:
                log.warning("%s: %s", kind, exc.reason)
                threading.Event().wait(1)
        except Exception as exc:  # a lost connection: list again after a moment
            log.warning("%s: %s", kind, exc)
            threading.Event().wait(1)


def apply(table: str, bridge: str, node: str, follower: Follower) -> None:
    """Write the table whenever what it is made from changed (what cannot be made into one is
    said, and the table kept as it was)."""
    applied, seen = None, -1
    while True:
        seen, services, slices = follower.after(seen)
        try:
            text = ruleset(table, bridge, routes(services, slices, node))
        except (KeyError, TypeError, ValueError) as exc:
            log.error("the Services and EndpointSlices could not be read: %r", exc)
            continue
        if text == applied:
            continue
        done = subprocess.run(["nft", "-f", "-"], input=text, capture_output=True, text=True)
        if done.returncode != 0:
            log.error("nft refused the table: %s", done.stderr.strip())
            continue
        applied = text
        log.info("table %s: %d service ports", table, text.count(" : goto s"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--bridge", required=True, help="the node's bridge: pods' packets")
    parser.add_argument("--node", required=True, help="the node whose pods are endpoints")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    follower = Follower()
    core, discovery = client.CoreV1Api(), client.DiscoveryV1Api()
    for kind, lister in (
        ("services", core.list_service_for_all_namespaces),
        ("slices", discovery.list_endpoint_slice_for_all_namespaces),
    ):
        threading.Thread(target=follow, args=(kind, lister, follower), daemon=True).start()
    try:
        apply(args.table, args.bridge, args.node, follower)
    finally:
        remove_table(args.table)


def table_exists(table: str) -> bool:
    return (
        subprocess.run(["nft", "list", "table", "ip", table], capture_output=True).returncode == 0
    )


def remove_table(table: str) -> None:
    if table_exists(table):
        subprocess.run(["nft", "delete", "table", "ip", table], capture_output=True)


def _rbac() -> str:
    rules = [
        {"apiGroups": [""], "resources": ["services"], "verbs": ["list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
         "verbs": ["list", "watch"]},
    ]  # fmt: skip
    name = "paddock-services"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": rules}  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }
    return yaml.safe_dump_all([role, binding])


def start(state: ClusterState, node: NodePlan, node_name: str, kubectl: Any, python: str) -> None:
    """Run the proxy and wait until its table is in place (the ``kubernetes`` Service has its
    endpoint from the start, so the table is never empty for long)."""
    root: Path = node.root
    cert, key = root / "pki" / "services.crt", root / "pki" / "services.key"
    issue_client_cert(state.pki, USER, "paddock:node-components", cert, key)
    server = f"https://127.0.0.1:{state.ports['apiserver']}"
    (root / "services.kubeconfig").write_text(client_kubeconfig(server, state.pki, USER, cert, key))
    kubectl("apply", "-f", "-", stdin=_rbac())
    table = table_name(node)
    argv = [python, "-m", "paddock_dev.services",
            f"--kubeconfig={root / 'services.kubeconfig'}", f"--table={table}",
            f"--bridge={node.bridge}", f"--node={node_name}"]  # fmt: skip
    process = spawn(state, COMPONENT, argv)
    wait_until(state, COMPONENT, process, lambda: table_exists(table), f"nftables table {table}")


if __name__ == "__main__":
    main()
