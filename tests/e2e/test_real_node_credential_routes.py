"""A Workspace's HTTP API reached with a secret the sandbox never holds, on the real node: the
run's route goes through the local cluster's gateway, which adds the secret header; the API (a
server of this test on the node's bridge address, bridge.paddock.test to the gateway) sees it,
the run sees only its answer, masked. While the run goes on, the agent searches every process's
environment it can read, the workspace, HOME and /tmp for the secret and finds nothing; a
second sandbox, given the run's route URL, is refused, as is a path no rule allows; once the
run ends its route is gone."""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from paddock.render.credential_routes import ROUTES_OF_LABEL
from paddock_dev import cluster as local
from paddock_dev import gateway, node
from support import mcp_probe
from support.gateways import use_local_gateway
from support.kube import Cluster
from support.model_server import Call, ScriptedModel, Step
from support.real_node import ON_NODE, local_cluster_plan
from support.runs import command_run, log_events, of_type, scripted_claude_run, wait_for_run
from support.sandboxes import sandbox, secret, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]
BRIDGE = gateway.NAMES[0][0]
SECRET = "route-secret-" + secrets.token_hex(12)
HALF = len(SECRET) // 2
# The agent's search: the value is put together at run time, so that the command does not hold
# it whole.
SEARCH = (
    f'k={SECRET[:HALF]}; k="${{k}}{SECRET[HALF:]}"; [ ${{#k}} = {len(SECRET)} ] || echo BROKEN; '
    'for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null | grep -qF "$k" '
    '&& echo "FOUND ENV $f"; done; '
    'grep -rlsF "$k" /workspace "$HOME" /tmp | sed "s/^/FOUND FILE /"; echo SEARCHED'
)


@dataclass
class Api:
    address: str
    port: int
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[Api]:
    _, plan = local_cluster_plan()
    seen: list[tuple[str, dict[str, str]]] = []

    class Echo(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen.append((self.path, headers))
            body = json.dumps({"path": self.path, "key": headers.get("x-api-key")}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer((plan.gateway, 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Api(plan.gateway, server.server_address[1], seen)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def route_operator(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Any:
    use_local_gateway(cluster, monkeypatch)
    return request.getfixturevalue("operator")


def _in(cluster: Cluster, namespace: str, pod: str, script: str) -> str:
    argv = ("exec", "-n", namespace, pod, "-c", "sandbox", "--", "bash", "-c", script)
    return str(cluster.kubectl(*argv, check=False).stdout)


def _routes_of(cluster: Cluster, namespace: str, run: str) -> list[str]:
    """The routes the gateway holds for the run (the gateway's namespace holds every test's)."""
    uid = json.loads(cluster.kubectl("get", "agentrun", run, "-n", namespace, "-o", "json").stdout)[
        "metadata"
    ]["uid"]
    listed = cluster.kubectl("get", "secrets", "-n", gateway.NAMESPACE, "-l",
                             f"{ROUTES_OF_LABEL}={uid}", "-o", "json").stdout  # fmt: skip
    return [s["metadata"]["name"] for s in json.loads(listed)["items"]]


def test_a_run_reaches_its_api_through_the_gateway_and_never_holds_the_secret(
    cluster: Cluster, namespace: str, route_operator: Any, api: Api
) -> None:
    image = local.load_image(local.default_state_dir(), "sandbox")
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    allowed = [f"{BRIDGE}:{api.port}"]
    policy = {"commands": {"default": "allow"}, "network": {"hosts": {"allow": allowed}}}
    route = {
        "name": "the-api",
        "url": f"http://{BRIDGE}:{api.port}/base",
        "headers": [{"name": "X-Api-Key", "secretKeyRef": {"name": "api", "key": "key"}}],
        "allow": [{"methods": ["GET"], "paths": ["/v1/**"]}],
    }
    cluster.apply(secret("api", key=SECRET), namespace)
    cluster.apply(workspace("app", routes=[route]), namespace)
    for name in ("box", "other"):
        box = sandbox(name, "app", image=image, storage=storage, policy=policy, **ON_NODE)
        cluster.apply(box, namespace)
    for name in ("box", "other"):
        wait_for_phase(cluster, namespace, name, "Ready", timeout=240)
    script = (
        'echo "URL $PADDOCK_ROUTE_THE_API"; '
        'echo "GOT $(curl -sS "$PADDOCK_ROUTE_THE_API/v1/things?page=2")"; '
        'echo "OFF $(curl -s -o /dev/null -w "%{http_code}" "$PADDOCK_ROUTE_THE_API/v2/x")"; '
        f"{SEARCH}; "
        "for _ in $(seq 600); do [ -e /tmp/go-on ] && break; sleep 0.1; done"
    )
    cluster.apply(command_run("routed", "box", script), namespace)

    def said(prefix: str) -> str | None:
        lines = [
            e["data"]["text"] for e in of_type(log_events(cluster, namespace, "routed"), "output")
        ]
        return next((line[len(prefix) :] for line in lines if line.startswith(prefix)), None)

    wait_for(lambda: said("SEARCHED") is not None, 120, what="the run's search")
    url = said("URL ")
    assert url is not None
    assert url.startswith("http://")
    assert "/_route/paddock-" in url
    # From another sandbox, the run's route is refused, and nothing reaches the API.
    code = _in(
        cluster, namespace, "other", f'curl -s -o /dev/null -w "%{{http_code}}" "{url}/v1/x"'
    )
    assert code == "403"
    _in(cluster, namespace, "box", "touch /tmp/go-on")
    status = wait_for_run(cluster, namespace, "routed", timeout=120)
    assert status["phase"] == "Succeeded", status
    routed = next(c for c in status["conditions"] if c["type"] == "CredentialRoutes")
    assert (routed["status"], routed["reason"]) == ("True", "ThroughGateway")

    lines = [e["data"]["text"] for e in of_type(log_events(cluster, namespace, "routed"), "output")]
    assert [path for path, _ in api.seen] == ["/base/v1/things?page=2"], lines
    assert api.seen[0][1]["x-api-key"] == SECRET
    assert json.loads(said("GOT ") or "{}") == {
        "path": "/base/v1/things?page=2",
        "key": "[redacted]",
    }
    assert said("OFF ") == "403"
    assert said("BROKEN") is None  # (the search looked for the whole value)
    assert said("FOUND") is None  # no environment or file of the sandbox holds the secret
    assert SECRET not in json.dumps(log_events(cluster, namespace, "routed"))
    # The run's route went with its end: its URL reaches nothing, even from its own sandbox.
    wait_for(lambda: not _routes_of(cluster, namespace, "routed"), 30, what="its routes deleted")
    code = _in(cluster, namespace, "box", f'curl -s -o /dev/null -w "%{{http_code}}" "{url}/v1/x"')
    assert code == "403"
    assert len(api.seen) == 1


def test_a_runs_mcp_server_with_a_secret_header_is_reached_through_the_gateway(
    cluster: Cluster, namespace: str, route_operator: Any
) -> None:
    """The real Claude Code calls a tool of the Workspace's MCP server, whose Authorization is
    a Secret's: the run's route to the server (its MCP config's URL) adds the header at the
    gateway; the sandbox's pod was made without it, and the agent finds it nowhere."""
    image = local.load_image(local.default_state_dir(), "sandbox")
    storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
    _, plan = local_cluster_plan()
    seen: list[dict[str, str]] = []
    steps: list[Step] = [Call(f"mcp__probe__{mcp_probe.TOOL}", {"island": "rottnest"}), SEARCH]
    with (
        mcp_probe.serve(plan.gateway, seen) as served,
        ScriptedModel(steps, host=plan.gateway) as model,
    ):
        # Both on the node's bridge address, by the name the gateway knows it by: the model
        # through the proxy, the MCP server through the run's route.
        port = int(served.rsplit(":", 1)[1].split("/")[0])
        model_url = f"http://{BRIDGE}:{model.url.rsplit(':', 1)[1]}"
        hosts = [f"{BRIDGE}:{port}", model_url.removeprefix("http://")]
        policy = {"commands": {"default": "allow"}, "network": {"hosts": {"allow": hosts}}}
        header = {"name": "Authorization", "secretKeyRef": {"name": "mcp", "key": "token"},
                  "bearer": True}  # fmt: skip
        probe = {"name": "probe", "mcp": {"url": f"http://{BRIDGE}:{port}/mcp",
                                          "headers": [header]}}  # fmt: skip
        cluster.apply(secret("mcp", token=SECRET), namespace)
        cluster.apply(secret("llm", key="sk-scripted-real-node"), namespace)
        cluster.apply(workspace("app", skills=[probe]), namespace)
        box = sandbox("box", "app", image=image, storage=storage, policy=policy, **ON_NODE)
        cluster.apply(box, namespace)
        wait_for_phase(cluster, namespace, "box", "Ready", timeout=240)
        cluster.apply(scripted_claude_run("mcp", "box", "Count quokkas.", model_url), namespace)
        status = wait_for_run(cluster, namespace, "mcp", timeout=240)

    events = log_events(cluster, namespace, "mcp")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    results = [json.dumps(e["data"]) for e in of_type(events, "tool.result")]
    assert any("8 quokkas on rottnest" in r for r in results), results
    assert seen, "the MCP server was never reached"
    assert {h.get("authorization") for h in seen} == {f"Bearer {SECRET}"}
    outputs = json.dumps(results)
    assert "SEARCHED" in outputs
    assert "FOUND" not in outputs  # no environment or file of the sandbox holds the secret
    assert "BROKEN" not in outputs
    assert SECRET not in json.dumps(events)
    pod = json.loads(cluster.kubectl("get", "pod", "box", "-n", namespace, "-o", "json").stdout)
    assert "mcp" not in json.dumps(
        [e for c in pod["spec"]["containers"] for e in c.get("env") or [] if "valueFrom" in e]
    )
    routed = next(c for c in status["conditions"] if c["type"] == "CredentialRoutes")
    assert (routed["status"], routed["reason"]) == ("True", "ThroughGateway")
