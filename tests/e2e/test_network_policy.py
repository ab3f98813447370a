"""A sandbox's NetworkPolicy, enforced on the real node: measured from inside its container
(bash's ``/dev/tcp`` and ``/dev/udp``) against servers these tests start on the node's bridge
address, and against the API server. Nothing else is probed."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from paddock_dev import cluster as local
from paddock_dev import images, network_policies, node
from paddock_dev.node import NodePlan
from paddock_dev.processes import ClusterState
from support.kube import Cluster
from support.sandboxes import get, sandbox, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

ON_NODE: dict[str, Any] = {
    "nodeSelector": {node.NODE_LABEL: "real"},
    "tolerations": [{"key": node.NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}
PROBE_SECONDS = 3  # a connection the fence drops is given this long before it counts as refused
LISTEN_PORT = 9418  # git daemon's, the one server the sandbox image has


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the bridge\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@dataclass
class Dns:
    """Answers every query (an empty answer) and remembers who asked."""

    sock: socket.socket
    askers: list[str] = field(default_factory=list)
    stopped: threading.Event = field(default_factory=threading.Event)

    def serve(self) -> None:
        self.sock.settimeout(0.2)  # to see ``stopped``: a blocked receive outlives close()
        while not self.stopped.is_set():
            try:
                query, (asker, port) = self.sock.recvfrom(512)
            except TimeoutError:
                continue
            self.askers.append(asker)
            if len(query) >= 12:  # id, flags "response, no error", the question, no answers
                self.sock.sendto(query[:2] + b"\x81\x80" + query[4:6] + bytes(6) + query[12:],
                                 (asker, port))  # fmt: skip


@dataclass(frozen=True)
class Bridge:
    """The servers on the node's bridge address, and the API server's address."""

    address: str
    open_port: int  # the one a policy names
    other_port: int  # the one it does not
    dns: Dns
    api_server: tuple[str, int]
    public: tuple[str, int]  # a server on an address outside every internal range


# A documentation address (TEST-NET-3), given to the bridge for the test: to a sandbox it is
# the internet (no internal range holds it), and reaching it reaches this host.
PUBLIC = "203.0.113.7"


@pytest.fixture
def bridge() -> Iterator[Bridge]:
    state = ClusterState.load(local.default_state_dir())
    assert state is not None
    plan = NodePlan.from_state(state.node)
    assert plan is not None
    subprocess.run(["ip", "address", "replace", f"{PUBLIC}/32", "dev", plan.bridge], check=True)
    servers = [ThreadingHTTPServer((plan.gateway, 0), _Hello) for _ in range(2)]
    servers.append(ThreadingHTTPServer((PUBLIC, 0), _Hello))
    dns_socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns_socket.bind((plan.gateway, 53))
    dns = Dns(dns_socket)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    threads.append(threading.Thread(target=dns.serve, daemon=True))
    for thread in threads:
        thread.start()
    try:
        yield Bridge(
            plan.gateway,
            servers[0].server_address[1],
            servers[1].server_address[1],
            dns,
            (plan.host_ip, state.ports["apiserver"]),
            (PUBLIC, servers[2].server_address[1]),
        )
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        subprocess.run(["ip", "address", "del", f"{PUBLIC}/32", "dev", plan.bridge], check=False)
        dns.stopped.set()
        threads[-1].join()
        dns_socket.close()


def _plain_pod(name: str, script: str) -> dict[str, Any]:
    """A pod with no NetworkPolicy of its own, on the real node."""
    container = {
        "name": "sandbox",  # as a Sandbox's: the probes exec into the container of that name
        "image": images.SANDBOX_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c", script],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {**ON_NODE, "terminationGracePeriodSeconds": 1, "containers": [container]},
    }


def _wait_ready(cluster: Cluster, namespace: str, pod: str) -> None:
    cluster.kubectl("wait", "-n", namespace, "--for=condition=Ready", "--timeout=90s", f"pod/{pod}")


def _in(cluster: Cluster, namespace: str, pod: str, script: str) -> tuple[int, str]:
    argv = ("exec", "-n", namespace, pod, "-c", "sandbox", "--", "bash", "-c", script)
    result = cluster.kubectl(*argv, check=False)
    return result.returncode, result.stdout


def _connects(cluster: Cluster, namespace: str, pod: str, address: str, port: int) -> bool:
    """Whether a TCP connection from inside the pod's first container gets through."""
    script = f'timeout {PROBE_SECONDS} bash -c "exec 3<>/dev/tcp/{address}/{port}"'
    return _in(cluster, namespace, pod, script)[0] == 0


def _fetches(cluster: Cluster, namespace: str, pod: str, address: str, port: int) -> str:
    script = (
        f"exec 3<>/dev/tcp/{address}/{port} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && "
        f"timeout {PROBE_SECONDS} cat <&3"
    )
    return _in(cluster, namespace, pod, script)[1]


def _resolves(cluster: Cluster, namespace: str, pod: str, address: str) -> bool:
    """Whether a DNS query to ``address`` port 53 is answered (the answer carries its id)."""
    query = r"\x50\x44\x01\x00\x00\x01" + r"\x00" * 6 + r"\x07paddock\x04test\x00\x00\x01\x00\x01"
    script = (
        f"exec 3<>/dev/udp/{address}/53 && printf '{query}' >&3 && "
        f"timeout {PROBE_SECONDS} head -c 2 <&3 | od -An -tx1"
    )
    return _in(cluster, namespace, pod, script)[1].split() == ["50", "44"]


def _fenced(cluster: Cluster, namespace: str, name: str, policy: dict[str, Any]) -> str:
    """A Sandbox under the SandboxPolicy ``fence`` on the real node, Ready; its pod's uid."""
    cluster.apply(_policy(policy), namespace)
    cluster.apply(workspace("app"), namespace)
    box = sandbox(
        name,
        "app",
        image=images.SANDBOX_IMAGE,
        storage={"size": "1Gi", "storageClassName": node.STORAGE_CLASS},
        policyRef={"name": "fence"},
        **ON_NODE,
    )
    cluster.apply(box, namespace)
    try:
        wait_for_phase(cluster, namespace, name, "Ready", timeout=180)
    except TimeoutError as exc:
        shown = cluster.kubectl("get", "-n", namespace, "sandbox,pod", "-o", "yaml", check=False)
        raise AssertionError(shown.stdout) from exc
    _wait_fenced(cluster, namespace, name)
    return str((get(cluster, namespace, "pod", name) or {})["metadata"]["uid"])


def _policy(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "SandboxPolicy",
        "metadata": {"name": "fence"},
        # The setup's commands run; only the network is in question here.
        "spec": {"commands": {"default": "allow"}, **spec},
    }


def _wait_fenced(cluster: Cluster, namespace: str, pod: str) -> None:
    """Until the node's NetworkPolicy controller counts the pod among those it fences."""
    state = ClusterState.load(local.default_state_dir())
    assert state is not None
    plan = NodePlan.from_state(state.node)
    assert plan is not None
    address = (get(cluster, namespace, "pod", pod) or {})["status"]["podIP"]
    table = network_policies.controller_table(plan)

    def fenced() -> bool:
        listed = subprocess.run(
            ["nft", "list", "set", "inet", table, "podips-v4"], capture_output=True, text=True
        )
        return address in listed.stdout

    wait_for(fenced, 30, what=f"pod {pod} ({address}) in {table}'s set of fenced pods")


ENFORCED_SECONDS = 60  # for a changed NetworkPolicy to reach the enforcer on a busy node


def _enforced(cluster: Cluster, namespace: str, probe: Callable[[], bool], what: str) -> None:
    """Wait until ``probe`` holds; if it never does, fail with what the enforcer saw: the box's
    NetworkPolicy as the API server has it and the enforcer's own last log lines."""
    try:
        wait_for(probe, ENFORCED_SECONDS, what=what)
    except TimeoutError as exc:
        state = ClusterState.load(local.default_state_dir())
        log = state.log(network_policies.COMPONENT) if state else None
        tail = log.read_text(errors="replace").splitlines()[-40:] if log and log.exists() else []
        shown = cluster.kubectl("get", "-n", namespace, "networkpolicy", "-o", "yaml", check=False)
        raise AssertionError("\n".join([str(exc), shown.stdout, *tail])) from exc


def _change_policy(cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]) -> None:
    """Change the policy, and wait until the sandbox's NetworkPolicy says so."""
    cluster.apply(_policy(spec), namespace)
    by_address = spec.get("capabilities", {}).get("network", "allow") == "allow"
    allows = by_address and "hosts" not in spec.get("network", {})
    named = [cidr for rule in spec.get("network", {}).get("egress", []) for cidr in rule["cidrs"]]

    def rendered() -> bool:
        policy = get(cluster, namespace, "networkpolicy", "fence.paddock-policy") or {}
        rules = policy.get("spec", {}).get("egress", [])
        blocks = {peer["ipBlock"]["cidr"] for r in rules for peer in r["to"] if "ipBlock" in peer}
        everything = {"0.0.0.0/0", "::/0"}
        return bool(blocks & everything) == allows and blocks - everything == set(named)

    wait_for(rendered, 30, what=f"the NetworkPolicy of {name} to follow its policy")


def test_a_sandbox_reaches_only_what_its_policy_names(
    cluster: Cluster, namespace: str, operator: Any, bridge: Bridge
) -> None:
    """One sandbox pod, its policy changed four times: each change is in force at once, the
    pod never recreated; the API server (on the node's address) is never reachable."""
    here, one, other = bridge.address, bridge.open_port, bridge.other_port
    api_address, api_port = bridge.api_server

    def port_open() -> bool:
        return _connects(cluster, namespace, "box", here, one)

    cluster.apply(_plain_pod("unfenced", "sleep infinity"), namespace)
    uid = _fenced(cluster, namespace, "box", {"capabilities": {"network": "deny"}})

    # Without a fence, every target answers: what the sandbox cannot reach, the fence stops.
    _wait_ready(cluster, namespace, "unfenced")
    for port in (one, other):
        assert _connects(cluster, namespace, "unfenced", here, port)
    assert _connects(cluster, namespace, "unfenced", api_address, api_port)

    # deny: nothing, not even DNS to an address the operator was not told of.
    assert not _connects(cluster, namespace, "box", here, one)
    assert not _connects(cluster, namespace, "box", api_address, api_port)
    assert not _resolves(cluster, namespace, "box", here)

    assert not _connects(cluster, namespace, "box", *bridge.public)

    # allow: the internet, not the cluster's ranges, nor the node's own address.
    _change_policy(cluster, namespace, "box", {})
    _enforced(cluster, namespace, lambda: _connects(cluster, namespace, "box", *bridge.public),
              "the internet")  # fmt: skip
    assert not _connects(cluster, namespace, "box", here, one)
    assert not _connects(cluster, namespace, "box", api_address, api_port)

    # Hosts by name, and no gateway to judge them (this operator knows of none): it fails
    # closed, to what network.egress names by address, never the internet.
    rule = {"cidrs": [f"{here}/32"], "ports": [{"port": one}]}
    hosts = {"network": {"hosts": {"allow": ["example.com"]}, "egress": [rule]}}
    _change_policy(cluster, namespace, "box", hosts)
    _enforced(cluster, namespace, port_open, "the named port, by address")
    assert not _connects(cluster, namespace, "box", *bridge.public)
    assert not _connects(cluster, namespace, "box", here, other)
    wait_for(lambda: _egress(cluster, namespace), 30, what="the EgressGateway condition")
    said = _egress(cluster, namespace)
    assert (said["status"], said["reason"]) == ("False", "NoGateway")
    assert "reaches no host by name" in said["message"]

    # allow plus a rule for one port of the bridge: that port, not the other one.
    _change_policy(cluster, namespace, "box", {"network": {"egress": [rule]}})
    _enforced(cluster, namespace, port_open, "the named port")
    assert "hello from the bridge" in _fetches(cluster, namespace, "box", here, one)
    assert not _connects(cluster, namespace, "box", here, other)
    assert not _connects(cluster, namespace, "box", api_address, api_port)

    # deny plus the same rule: the rule alone.
    fenced = {"capabilities": {"network": "deny"}, "network": {"egress": [rule]}}
    _change_policy(cluster, namespace, "box", fenced)
    # The enforcer takes the changed NetworkPolicy in a moment (longer on a busy node).
    _enforced(cluster, namespace, port_open, "the rule alone")
    assert not _connects(cluster, namespace, "box", here, other)
    assert not _connects(cluster, namespace, "box", api_address, api_port)

    # Back to deny: the port closes again.
    _change_policy(cluster, namespace, "box", {"capabilities": {"network": "deny"}})
    _enforced(cluster, namespace, lambda: not port_open(), "the port to close")
    assert str((get(cluster, namespace, "pod", "box") or {})["metadata"]["uid"]) == uid


def _egress(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The box's EgressGateway condition ({} while it has none)."""
    status = (get(cluster, namespace, "sandbox", "box") or {}).get("status") or {}
    found = [c for c in status.get("conditions") or [] if c["type"] == "EgressGateway"]
    return found[0] if found else {}


@pytest.fixture
def dns_operator(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, bridge: Bridge
) -> Any:
    """The operator, told that the bridge address is a resolver sandboxes may query."""
    monkeypatch.setenv("PADDOCK_DNS_SERVERS", bridge.address)
    return request.getfixturevalue("operator")


def test_dns_reaches_the_named_resolver_only_while_the_policy_allows_dns(
    cluster: Cluster, namespace: str, dns_operator: Any, bridge: Bridge
) -> None:
    _fenced(cluster, namespace, "box", {"capabilities": {"network": "deny"}})
    assert _resolves(cluster, namespace, "box", bridge.address)
    # DNS is port 53 at the resolver, nothing more.
    assert not _connects(cluster, namespace, "box", bridge.address, bridge.open_port)

    no_dns = {"capabilities": {"network": "deny"}, "network": {"dns": False}}
    cluster.apply(_policy(no_dns), namespace)
    wait_for(
        lambda: not _resolves(cluster, namespace, "box", bridge.address), 30, what="DNS to stop"
    )
    # Stopped on the way, not unanswered: the server never hears the query.
    box_address = (get(cluster, namespace, "pod", "box") or {})["status"]["podIP"]
    asked = bridge.dns.askers.count(box_address)
    assert not _resolves(cluster, namespace, "box", bridge.address)
    assert bridge.dns.askers.count(box_address) == asked


def test_no_other_pod_can_connect_to_a_sandbox(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    listen = (
        f"git daemon --reuseaddr --listen=0.0.0.0 --port={LISTEN_PORT} --export-all "
        "--base-path=/tmp /tmp"
    )
    cluster.apply(_plain_pod("peer", listen), namespace)
    cluster.apply(_plain_pod("client", "sleep infinity"), namespace)
    _fenced(cluster, namespace, "box", {"capabilities": {"network": "allow"}})
    _in(cluster, namespace, "box", f"setsid {listen} >/dev/null 2>&1 < /dev/null &")
    for pod in ("peer", "client"):
        _wait_ready(cluster, namespace, pod)

    def address(pod: str) -> str:
        return str((get(cluster, namespace, "pod", pod) or {})["status"]["podIP"])

    # Both listen: the sandbox on its own loopback, the peer from its neighbour.
    wait_for(
        lambda: _connects(cluster, namespace, "box", "127.0.0.1", LISTEN_PORT),
        30,
        what="the sandbox's listener",
    )
    wait_for(
        lambda: _connects(cluster, namespace, "client", address("peer"), LISTEN_PORT),
        30,
        what="the peer's listener, from the client",
    )
    assert not _connects(cluster, namespace, "client", address("box"), LISTEN_PORT)
