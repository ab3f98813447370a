"""Egress by host name, on the real node with its NetworkPolicy enforcer: a sandbox whose policy
names hosts reaches the web only through the local cluster's gateway (Squid, with Paddock's
helper), and only the hosts its policy allows, or those a person approves on the run. From
inside the sandbox, curl, git and Node.js are tried against servers of this test on the
node's bridge address, which the gateway knows as bridge.paddock.test and other.paddock.test;
the servers record what reaches them."""

from __future__ import annotations

import datetime
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from paddock_dev import cluster as local
from paddock_dev import gateway, node
from support.kube import Cluster
from support.real_node import ON_NODE, local_cluster_plan
from support.runs import OperatorProcess, command_run, log_events, of_type, wait_for_run
from support.sandboxes import get, sandbox, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]
ALLOWED, OTHER, LOOPBACK, NODE = (name for name, _ in gateway.NAMES)


@dataclass
class Servers:
    """An HTTP and an HTTPS server on the bridge address, and the paths each was asked for."""

    address: str
    http: int
    https: int
    paths: list[str] = field(default_factory=list)

    def heard(self, path: str) -> bool:
        return any(seen.startswith(path) for seen in self.paths)


def _handler(paths: list[str]) -> type[BaseHTTPRequestHandler]:
    class Recording(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            paths.append(self.path)
            body = b"hello through the gateway\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    return Recording


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ALLOWED)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(ALLOWED)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    _, plan = local_cluster_plan()
    paths: list[str] = []
    plain = ThreadingHTTPServer((plan.gateway, 0), _handler(paths))
    tls = ThreadingHTTPServer((plan.gateway, 0), _handler(paths))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_certificate(tmp_path))
    tls.socket = context.wrap_socket(tls.socket, server_side=True)
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (plain, tls)]
    for thread in threads:
        thread.start()
    try:
        yield Servers(plan.gateway, plain.server_address[1], tls.server_address[1], paths)
    finally:
        for server in (plain, tls):
            server.shutdown()
            server.server_close()


@pytest.fixture
def gateway_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's settings for the local cluster's gateway, in this process's environment
    (which operators started here read)."""
    state, plan = local_cluster_plan()
    host, port = gateway.address(state, plan)
    monkeypatch.setenv("PADDOCK_GATEWAY_PROXY", f"http://{host}:{port}")
    monkeypatch.setenv("PADDOCK_GATEWAY_CIDRS", f"{host}/32")
    monkeypatch.setenv("PADDOCK_GATEWAY_PORT", str(port))


@pytest.fixture
def gateway_operator(gateway_settings: None, request: pytest.FixtureRequest) -> Any:
    """The operator, in this process, told of the local cluster's gateway."""
    return request.getfixturevalue("operator")


def _policy(allowed: list[str]) -> dict[str, Any]:
    return {"commands": {"default": "allow"}, "network": {"hosts": {"allow": allowed}}}


def _in(cluster: Cluster, namespace: str, script: str) -> tuple[int, str]:
    argv = ("exec", "-n", namespace, "box", "-c", "sandbox", "--", "bash", "-c", script)
    done = cluster.kubectl(*argv, check=False)
    return done.returncode, done.stdout + done.stderr


def _counted(metrics: str, decision: str, rule: str) -> float:
    series = f'paddock_gateway_connections_total{{decision="{decision}",rule="{rule}"}}'
    lines = [line for line in metrics.splitlines() if line.startswith(series)]
    return float(lines[0].split()[-1]) if lines else 0.0


def _curl(cluster: Cluster, namespace: str, url: str, *options: str) -> tuple[int, str]:
    words = " ".join(options)
    return _in(cluster, namespace, f"curl -fsS -k --max-time 5 {words} {url}")


def test_a_sandbox_reaches_only_the_hosts_its_policy_names_and_only_through_the_gateway(
    cluster: Cluster, namespace: str, gateway_operator: Any, servers: Servers
) -> None:
    image = local.load_image(local.default_state_dir(), "sandbox")  # curl, git, Node.js
    https, http = f"{ALLOWED}:{servers.https}", f"{ALLOWED}:{servers.http}"
    # The names of the loopback and of the node are allowed too: what the gateway refuses
    # there, it refuses by address (the node's, from its watch of Nodes).
    allowed = [https, http, f"{LOOPBACK}:{servers.https}", f"{NODE}:{servers.https}"]
    cluster.apply(workspace("app"), namespace)
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    box = sandbox("box", "app", image=image, storage=storage, policy=_policy(allowed), **ON_NODE)
    cluster.apply(box, namespace)
    wait_for_phase(cluster, namespace, "box", "Ready", timeout=240)

    # The allowed name, through the gateway: curl and Node.js over TLS, git over HTTP.
    code, said = _curl(cluster, namespace, f"https://{https}/allowed")
    assert (code, said) == (0, "hello through the gateway\n")
    said = _in(cluster, namespace, f"git ls-remote http://{http}/repo.git")
    assert servers.heard("/repo.git/info/refs"), said
    # Node.js's own fetch (what an agent CLI's web tool uses), told to read the variables: it
    # tunnels even plain HTTP, and a tunnel must carry TLS, so it is asked for HTTPS (the test
    # server's certificate is its own: not checked).
    fetch = f"fetch('https://{https}/node').then(r => r.text()).then(console.log)"
    unchecked = "NODE_TLS_REJECT_UNAUTHORIZED=0 NODE_USE_ENV_PROXY=1"
    said = _in(cluster, namespace, f'{unchecked} node -e "{fetch}"')
    assert servers.heard("/node"), said

    # Another name of the same address, the address itself, a name of the loopback, a tunnel
    # whose TLS names another host, and a connection that skips the gateway: none gets through.
    refused = {
        "/other": (f"https://{OTHER}:{servers.https}/other",),
        "/raw": (f"https://{servers.address}:{servers.https}/raw",),
        "/loopback": (f"https://{LOOPBACK}:{servers.https}/loopback",),
        "/node-address": (f"https://{NODE}:{servers.https}/node-address",),
        "/sni": (
            f"https://{OTHER}:{servers.https}/sni",
            f"--connect-to {OTHER}:{servers.https}:{https}",
        ),
        "/direct": (f"https://{servers.address}:{servers.https}/direct", "--noproxy '*'"),
    }
    for path, (url, *options) in refused.items():
        code, said = _curl(cluster, namespace, url, *options)
        # Refused: Squid answers a refused CONNECT with its error page (403) over TLS of its
        # own (which -k lets curl read: -f fails on it), or the connection fails.
        assert code != 0, (path, said)
        assert "through the gateway" not in said, (path, code, said)
    assert not any(servers.heard(path) for path in refused), servers.paths
    code, said = _in(cluster, namespace, f"git ls-remote http://{OTHER}:{servers.http}/other.git")
    assert not servers.heard("/other.git")

    # Squid shows nothing of itself: its cache manager (which would list every tenant's pod
    # addresses and URLs in flight) and its own pages, through the proxy to an allowed host,
    # straight to the gateway's port, or by the cache_object scheme; nor a header naming it.
    manager = [
        f"curl -sS -i --max-time 5 http://{http}/squid-internal-mgr/info",
        f"curl -sS -i --max-time 5 http://{http}/squid-internal-static/icons/SN.png",
        'curl -sS -i --max-time 5 --noproxy "*" "$HTTP_PROXY/squid-internal-mgr/info"',
        'hostport=${HTTP_PROXY#http://}; exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}"; '
        "printf 'GET cache_object://localhost/info HTTP/1.0\r\n\r\n' >&3; timeout 5 cat <&3",
    ]
    for script in manager:
        code, said = _in(cluster, namespace, script)
        assert "Squid Object Cache" not in said, (script, said)
        assert "Cache Manager" not in said, (script, said)
        assert "HTTP/1.1 200" not in said, (script, said)
    code, said = _in(cluster, namespace, f"curl -sS -D - -o /dev/null --max-time 5 http://{http}/h")
    headers = said.lower()
    assert code == 0, said
    assert "200 ok" in headers, said
    assert "x-cache" not in headers, said
    assert "squid" not in headers, said
    proxy = _in(cluster, namespace, 'printf %s "${HTTP_PROXY#http://}"')[1]
    assert proxy, "the sandbox has the proxy's address"
    assert proxy not in said, said

    # Each decision is logged with the sandbox it came from.
    state, _ = local_cluster_plan()
    log = state.log(gateway.COMPONENT).read_text(errors="replace")
    assert f"sandbox={namespace}/box decision=allow host={ALLOWED}:{servers.https}" in log
    assert f"sandbox={namespace}/box decision=deny host={OTHER}:{servers.https}" in log
    # And counted, by the rule that decided.
    with urllib.request.urlopen(gateway.metrics_url(state), timeout=10) as response:  # noqa: S310
        metrics = response.read().decode()
    for decision, rule in (("allow", https), ("deny", "default"), ("deny", "refused")):
        assert _counted(metrics, decision, rule) > 0, (decision, rule)

    # The policy changed, the next connection follows it: no restart, no new pod.
    uid = (get(cluster, namespace, "pod", "box") or {})["metadata"]["uid"]
    cluster.kubectl(
        "patch", "-n", namespace, "sandbox", "box", "--type=merge",
        "-p", '{"spec":{"policy":{"network":{"hosts":{"allow":["nothing.example"]}}}}}',
    )  # fmt: skip
    wait_for(
        lambda: "through the gateway" not in _curl(cluster, namespace, f"https://{https}/after")[1],
        60,
        what="the gateway to refuse the host the policy no longer names",
    )
    assert "through the gateway" not in _curl(cluster, namespace, f"https://{https}/final")[1]
    assert not servers.heard("/final")
    assert (get(cluster, namespace, "pod", "box") or {})["metadata"]["uid"] == uid


@pytest.mark.usefixtures("gateway_settings")
def test_a_host_approval_pending_across_an_operator_kill_is_decided_after_it(
    cluster: Cluster, namespace: str, as_operator: str, servers: Servers
) -> None:
    """The operator (its own process) is SIGKILLed while a host waits for a person, and
    started again; the person approves: the run's next try passes, and the approval is
    requested and resolved once each in a gap-free log."""
    https = f"{ALLOWED}:{servers.https}"
    with OperatorProcess(namespace, as_operator) as operator:
        _asking_box(cluster, namespace, https)
        cluster.apply(command_run("asks", "box", _tries(https, "/after-kill", 400)), namespace)
        asked = _pending_host(cluster, namespace, "asks")
        operator.restart()
        cluster.paddock("approve", "asks", asked["id"], "-n", namespace)
        status = wait_for_run(cluster, namespace, "asks", timeout=180)

    events = log_events(cluster, namespace, "asks")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    assert servers.heard("/after-kill")
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert status["eventCount"] == len(events)
    assert [(a["target"], a["state"]) for a in status["approvals"]] == [(https, "Approved")]
    assert [e["data"]["id"] for e in of_type(events, "approval.requested")] == [asked["id"]]
    resolved = [(e["data"]["id"], e["data"]["state"]) for e in of_type(events, "approval.resolved")]
    assert resolved == [(asked["id"], "Approved")]


def _pending_host(cluster: Cluster, namespace: str, run: str) -> dict[str, Any]:
    """The run's first pending approval, once there is one."""

    def pending() -> dict[str, Any] | None:
        status = (get(cluster, namespace, "agentrun", run) or {}).get("status") or {}
        return next((a for a in status.get("approvals") or [] if a["state"] == "Pending"), None)

    return wait_for(pending, 60, what=f"an approval request on run {run}")


def _asking_box(cluster: Cluster, namespace: str, https: str) -> None:
    """A Ready sandbox "box" whose policy asks about the host ``https``."""
    image = local.load_image(local.default_state_dir(), "sandbox")
    policy = {"commands": {"default": "allow"}, "network": {"hosts": {"ask": [https]}}}
    cluster.apply(workspace("app"), namespace)
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    box = sandbox("box", "app", image=image, storage=storage, policy=policy, **ON_NODE)
    cluster.apply(box, namespace)
    wait_for_phase(cluster, namespace, "box", "Ready", timeout=240)


def _tries(https: str, path: str, times: int = 40) -> str:
    """The agent's way: try again until it works, then give up."""
    fetch = f"curl -fsS -k --max-time 3 https://{https}{path}"
    return f"for i in $(seq {times}); do {fetch} && exit 0; sleep 0.25; done; exit 1"


def test_a_host_to_ask_about_passes_once_a_person_approves_it_on_the_run(
    cluster: Cluster, namespace: str, gateway_operator: Any, servers: Servers
) -> None:
    https = f"{ALLOWED}:{servers.https}"
    _asking_box(cluster, namespace, https)

    # Approved: the next connection passes.
    cluster.apply(command_run("approved", "box", _tries(https, "/approved")), namespace)
    asked = _pending_host(cluster, namespace, "approved")
    assert (asked["kind"], asked["target"]) == ("network", https)
    assert asked["rules"] == [f"network.hosts.ask {https}"]
    assert not servers.heard("/approved")
    cluster.paddock("approve", "approved", asked["id"], "-n", namespace)
    status = wait_for_run(cluster, namespace, "approved", timeout=120)
    assert status["phase"] == "Succeeded", status
    assert servers.heard("/approved")
    described = cluster.kubectl("describe", "agentrun", "approved", "-n", namespace).stdout
    assert "HostApprovalNeeded" in described  # the gateway's Event, on the run

    # Denied: it does not, and the run's later tries are refused too.
    cluster.apply(command_run("denied", "box", _tries(https, "/denied")), namespace)
    asked = _pending_host(cluster, namespace, "denied")
    cluster.paddock("deny", "denied", asked["id"], "-n", namespace)
    status = wait_for_run(cluster, namespace, "denied", timeout=120)
    assert status["phase"] == "Failed", status
    assert not servers.heard("/denied")
    approvals = status["approvals"]
    assert [(a["target"], a["state"]) for a in approvals] == [(https, "Denied")]
