"""The platform team's path, as installed: ``make images`` builds every image the chart deploys
without Docker and imports it into the local cluster's real node, and the chart is installed
from its values with the gateway and the console on, as a platform team would (``helm install
-f HELM_VALUES --set gateway.enabled=true --set console.enabled=true``), taking over the CRDs
that exist the way the README says. Then, on the real node:

- Claude Code (the real CLI, in the chart's sandbox image) completes a run whose key is its
  modelKey, through the chart's gateway pod: the scripted model sees the key, the sandbox never
  holds it (its processes' environments, its files and its pod searched);
- the run asks before a command its policy asks about, and a person approves it in the chart's
  console, signed in with a token in a real Chromium, reached by ``kubectl port-forward``;
- the operator's and the gateway's metrics are scraped through their Services from a pod;
- ``helm upgrade`` rolls the gateway; ``helm uninstall`` leaves the CRDs, and nothing of the
  release behind.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from paddock.api import KINDS
from paddock_dev import cluster as local
from paddock_dev import node
from support import identity
from support.browser import chromium, signed_in
from support.harnesses import API_KEY
from support.helm import CHART, run_helm
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.ports import free_port
from support.real_node import ON_NODE, exec_in
from support.runs import agent_run, log_events, of_type, wait_for_run
from support.sandboxes import sandbox, secret, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

POLICY = {
    "commands": {"default": "allow", "ask": ["touch *"]},
    "capabilities": {"network": "deny"},
}
# The agent's search for the key (put together at run time, so that no command holds it whole).
HALF = len(API_KEY) // 2
SEARCH = (
    f'k={API_KEY[:HALF]}; k="$k{API_KEY[HALF:]}"; '
    'for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null | grep -qF "$k" '
    '&& echo "ENV $f"; done; '
    'grep -rlsF "$k" /workspace "$HOME" /tmp | sed "s/^/FILE /"; echo SEARCHED'
)
APPROVER_RULES = [
    {"apiGroups": ["paddock.dev"], "resources": ["agentruns"],
     "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": ["paddock.dev"], "resources": ["sandboxes", "sandboxpools"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
]  # fmt: skip
# What the release may leave nowhere once uninstalled (its CRDs aside).
NAMESPACED = "deployments,replicasets,pods,services,serviceaccounts,configmaps,secrets,roles,rolebindings,networkpolicies,poddisruptionbudgets"  # noqa: E501
CLUSTER_WIDE = "clusterroles,clusterrolebindings"


def _adopt_crds(cluster: Cluster, release: str, namespace: str) -> None:
    """The README's loop: the CRDs the session installed become the release's."""
    for kind in KINDS:
        crd = f"crd/{kind.kind_info.plural}.paddock.dev"
        cluster.kubectl("label", "--overwrite", crd, "app.kubernetes.io/managed-by=Helm")
        cluster.kubectl("annotate", "--overwrite", crd, f"meta.helm.sh/release-name={release}",
                        f"meta.helm.sh/release-namespace={namespace}")  # fmt: skip


@contextlib.contextmanager
def _port_forward(cluster: Cluster, namespace: str, service: str, port: int, local_port: int
                  ) -> Iterator[str]:  # fmt: skip
    """``kubectl port-forward`` to a Service, as a person reaches the console; its URL."""
    argv = [cluster.kubectl_binary, f"--kubeconfig={cluster.kubeconfig}", "port-forward",
            "-n", namespace, f"svc/{service}", f"{local_port}:{port}"]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "Forwarding from 127.0.0.1" in line, line
        yield f"http://127.0.0.1:{local_port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _scraped(cluster: Cluster, namespace: str, urls: list[str]) -> str:
    """What a pod on the real node gets from ``urls`` (curl, one after the other)."""
    script = " && ".join(f"curl -sSf --max-time 10 {url}" for url in urls)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "scraper"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "curl", "image": local.load_image(
                local.default_state_dir(), "sandbox"), "command": ["bash", "-c", script]}],
            **ON_NODE,
        },
    }  # fmt: skip
    cluster.apply(pod, namespace)
    phase = wait_for(
        lambda: (p := cluster.kubectl("get", "pod", "scraper", "-n", namespace, "-o",
                                      "jsonpath={.status.phase}").stdout) in ("Succeeded", "Failed")
        and p,
        120,
        what="the scraper pod to end",
    )  # fmt: skip
    logs = cluster.kubectl("logs", "-n", namespace, "scraper").stdout
    assert phase == "Succeeded", logs[-2000:]
    return logs


def _cluster_ip(cluster: Cluster, namespace: str, service: str) -> str:
    return cluster.kubectl(
        "get", "svc", service, "-n", namespace, "-o", "jsonpath={.spec.clusterIP}"
    ).stdout


def _left(cluster: Cluster, namespace: str, release: str) -> list[str]:
    selector = f"app.kubernetes.io/instance={release}"
    names = cluster.kubectl("get", NAMESPACED, "-n", namespace, "-l", selector, "-o", "name")
    wide = cluster.kubectl("get", CLUSTER_WIDE, "-l", selector, "-o", "name")
    return (names.stdout + wide.stdout).split()


def test_the_chart_as_installed_runs_an_agent_through_its_gateway_and_console(
    cluster: Cluster, namespace: str, helm: str
) -> None:
    values = local.chart_values(local.default_state_dir())
    # The chart names its objects after the release (which holds its name: no suffix), and
    # cluster-wide ones too: a release name of this test's own.
    release = f"paddock-{namespace}"
    console_port = free_port()
    _adopt_crds(cluster, release, namespace)
    run_helm(
        helm, "install", release, str(CHART), "-n", namespace, "-f", str(values),
        "--set", "gateway.enabled=true", "--set", "console.enabled=true",
        # Tests share the cluster: the operator watches this namespace, and the admission
        # policies stay the session's (they are not kept on uninstall, unlike the CRDs).
        "--set", f"watchNamespaces={{{namespace}}}", "--set", "admissionPolicies.enabled=false",
        "--set", "gateway.replicas=1",
        "--set", f"console.externalURL=http://127.0.0.1:{console_port}",
        "--wait", "--timeout=300s", kubeconfig=cluster.kubeconfig,
    )  # fmt: skip
    uninstalled = False
    try:
        pods = json.loads(cluster.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)[
            "items"
        ]
        placed = {p["metadata"]["labels"].get("app.kubernetes.io/name"): p["spec"]["nodeName"]
                  for p in pods}  # fmt: skip
        assert placed == {
            "paddock": node.NODE_NAME,
            "paddock-gateway": node.NODE_NAME,
            "paddock-console": node.NODE_NAME,
        }, placed
        settings = cluster.kubectl(
            "get", "configmap", f"{release}-settings", "-n", namespace, "-o", "json"
        ).stdout
        assert json.loads(settings)["data"]["PADDOCK_MODEL_KEY_IN_SANDBOX"] == "refuse"

        host = node.host_ip()
        assert host is not None
        with ScriptedModel([SEARCH, "touch approved && echo made-it"], host=host) as model:
            cluster.apply(secret("llm", key=API_KEY), namespace)
            cluster.apply(workspace("app"), namespace)
            # No placement of its own: the chart's (HELM_VALUES) puts it on the real node.
            cluster.apply(sandbox("box", "app", policy=POLICY), namespace)
            wait_for_phase(cluster, namespace, "box", "Ready", timeout=300)
            key = {"secretKeyRef": {"name": "llm", "key": "key"}, "baseUrl": model.url}
            run = agent_run("asks", "box", "claude-code", "Work.", model="claude-sonnet-4-5",
                            modelKey=key)  # fmt: skip
            cluster.apply(run, namespace)
            wait_for_run(cluster, namespace, "asks", ("AwaitingApproval",), timeout=300)

            approver = identity.role_token(cluster, namespace, "approver", APPROVER_RULES)
            service = f"{release}-console"
            with (
                _port_forward(cluster, namespace, service, 8080, console_port) as url,
                chromium() as browser,
            ):
                page = signed_in(browser, url, approver)
                page.goto(f"{url}/runs/{namespace}/asks")
                expect(page.locator("[data-request] pre.asked")).to_contain_text("touch approved")
                page.click("button[value=approve]")
                expect(page.locator("#phase")).to_have_text("Succeeded")
                expect(page.locator("[data-request] .by")).to_have_text(
                    f"by system:serviceaccount:{namespace}:approver"
                )
            status = wait_for_run(cluster, namespace, "asks")

        events = log_events(cluster, namespace, "asks")
        assert status["phase"] == "Succeeded", (status, events[-3:])
        route = next(c for c in status["conditions"] if c["type"] == "ModelRoute")
        assert (route["status"], route["reason"]) == ("True", "ThroughGateway")
        (approval,) = status["approvals"]
        assert approval["state"] == "Approved"
        # The scripted model saw the key on every request, through the gateway; the agent
        # found it nowhere in the sandbox, and it is in no part of the sandbox's pod.
        assert model.requests
        assert all(r["headers"].get("x-api-key") == API_KEY for r in model.requests)
        outputs = [str(e["data"].get("output", "")) for e in of_type(events, "tool.result")]
        searched = next(o for o in outputs if "SEARCHED" in o)
        assert "ENV " not in searched, searched
        assert "FILE " not in searched, searched
        assert "made-it" in json.dumps(outputs)
        assert exec_in(cluster, namespace, "box", "ls approved") == "approved\n"
        box = cluster.kubectl("get", "pod", "box", "-n", namespace, "-o", "json").stdout
        assert API_KEY not in box
        pod = json.loads(box)
        assert pod["spec"]["nodeName"] == node.NODE_NAME
        claim = cluster.kubectl("get", "pvc", "-n", namespace, "-o",
                                "jsonpath={.items[*].spec.storageClassName}").stdout  # fmt: skip
        assert claim == node.CSI_STORAGE_CLASS
        assert API_KEY not in json.dumps(events)

        # Metrics, as Prometheus would scrape them: from a pod, through each Service.
        operator_metrics = _cluster_ip(cluster, namespace, f"{release}-metrics")
        gateway_metrics = _cluster_ip(cluster, namespace, f"{release}-gateway-metrics")
        scraped = _scraped(cluster, namespace, [
            f"http://{operator_metrics}:8081/metrics", f"http://{gateway_metrics}:9090/metrics",
        ])  # fmt: skip
        assert 'paddock_agentruns{harness="claude-code",phase="Succeeded"} 1.0' in scraped
        forwarded = re.search(
            rf'paddock_gateway_model_requests_total\{{outcome="2xx",run="{namespace}/asks"\}} '
            r"(\d+)",
            scraped,
        )
        assert forwarded is not None, scraped[-3000:]
        assert int(forwarded.group(1)) == len(model.requests)

        # An upgrade rolls the gateway to two replicas; the release's objects stay its own.
        run_helm(
            helm, "upgrade", release, str(CHART), "-n", namespace, "--reuse-values",
            "--set", "gateway.replicas=2", "--wait", "--timeout=300s",
            kubeconfig=cluster.kubeconfig,
        )  # fmt: skip
        ready = cluster.kubectl(
            "get", "deploy", f"{release}-gateway", "-n", namespace,
            "-o", "jsonpath={.status.readyReplicas}",
        ).stdout  # fmt: skip
        assert ready == "2"

        cluster.kubectl("delete", "agentrun", "asks", "-n", namespace, "--wait=true")
        cluster.kubectl("delete", "sandbox", "box", "-n", namespace, "--wait=true")
        run_helm(helm, "uninstall", release, "-n", namespace, "--wait",
                 kubeconfig=cluster.kubeconfig)  # fmt: skip
        uninstalled = True
        wait_for(lambda: not _left(cluster, namespace, release), 120, what="nothing left")
        for kind in KINDS:
            cluster.kubectl("get", f"crd/{kind.kind_info.plural}.paddock.dev")
    finally:
        if not uninstalled:
            run_helm(helm, "uninstall", release, "-n", namespace, kubeconfig=cluster.kubeconfig)
