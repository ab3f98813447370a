"""``paddock operator`` as a process, the way the image runs it: JSON logs on request, every
line of them JSON, and no secret value in them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from support import identity
from support.kube import ROOT, Cluster
from support.runs import OperatorProcess
from support.sandboxes import (
    assert_never_shown,
    get,
    sandbox,
    secret,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

SECRET_VALUE = "json-log-secret-5e2d-never-printed"


def test_json_logs_are_json_and_hold_no_secret(
    cluster: Cluster, namespace: str, as_operator: str, tmp_path: Path
) -> None:
    log_file = tmp_path / "operator.log"
    cluster.apply(secret("creds", token=SECRET_VALUE), namespace)
    secrets = [{"name": "API_TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}}]
    process = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", "",
         "--log-format", "json", "--verbose"],
        env={**os.environ, "KUBECONFIG": as_operator},
        stdout=log_file.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        cluster.apply(workspace("app", secrets=secrets), namespace)
        cluster.apply(sandbox("box", "app"), namespace)
        wait_for_phase(cluster, namespace, "box", "Ready")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    output = log_file.read_text()
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) > 10, output
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all("message" in record for record in records)
    assert any("sandbox_seen" in record["message"] for record in records)
    assert_never_shown(SECRET_VALUE, {"operator log": output})


def test_two_replicas_with_peering_have_one_active(
    cluster: Cluster, namespace: str, as_operator: str, tmp_path: Path
) -> None:
    """What the chart's highAvailability sets up: the peering CRDs and object, and operators
    with --priority. The lower priority pauses; the higher one does the work."""
    rendered = subprocess.run(
        [str(ROOT / "hack" / "helm.sh")], capture_output=True, text=True, check=True, timeout=1800
    )
    helm = rendered.stdout.strip().rpartition("HELM=")[2]
    chart = subprocess.run(
        [helm, "template", "--kube-version=1.34.4", "paddock", str(ROOT / "charts" / "paddock"),
         "-n", namespace,
         "--show-only", "templates/peering.yaml", "--show-only", "templates/rbac.yaml",
         "--set", "highAvailability.enabled=true", "--set", f"watchNamespaces={{{namespace}}}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    docs = [d for d in yaml.safe_load_all(chart) if d]
    # The chart's peering permissions, given to the identity the tests run operators with.
    (role,) = [d for d in docs if d["kind"] == "Role"]
    role["rules"] = [r for r in role["rules"] if r["apiGroups"] == ["kopf.dev"]]
    assert role["rules"], "the chart grants no peering permission with highAvailability"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "peering"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": role["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": identity.ACCOUNT,
                      "namespace": identity.NAMESPACE}],
    }  # fmt: skip
    cluster.apply(role, namespace)
    cluster.apply(binding, namespace)
    for doc in docs:
        if doc["kind"] == "CustomResourceDefinition":
            cluster.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump(doc))
            cluster.wait_established(f"crd/{doc['metadata']['name']}")
    (peering,) = [d for d in docs if d["kind"] == "KopfPeering"]
    cluster.apply(peering, namespace)

    def start(priority: int) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"operator-{priority}.log"
        process = subprocess.Popen(
            [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", "",
             "--priority", str(priority)],
            env={**os.environ, "KUBECONFIG": as_operator},
            stdout=log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        return process, log

    def peers() -> int:
        peering = get(cluster, namespace, "kopfpeering", "paddock") or {}
        return len(peering.get("status") or {})

    high, high_log = start(100)
    low, low_log = high, high_log
    try:
        # Operators start paused under peering; the highest priority resumes.
        wait_for(lambda: "Resuming operations" in high_log.read_text(), 60, what="a leader")
        low, low_log = start(50)
        wait_for(lambda: peers() == 2, 60, what="both operators in the peering object")
        cluster.apply(workspace("app"), namespace)
        cluster.apply(sandbox("box", "app"), namespace)
        wait_for_phase(cluster, namespace, "box", "Ready")
    finally:
        for process in (low, high):  # the paused one first, so it never takes over
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    assert "sandbox_seen" in high_log.read_text()
    assert "Resuming operations" not in low_log.read_text()
    assert "sandbox_seen" not in low_log.read_text()


def test_the_kustomize_install_starts_the_operator_with_its_own_arguments(
    cluster: Cluster, namespace: str, as_operator: str, tmp_path: Path
) -> None:
    """config/default, built as `kubectl apply -k` builds it: the container runs the image's
    ENTRYPOINT with the Deployment's args, and the operator starts with exactly those, serving
    liveness and the metrics its Service points at."""
    built = cluster.kubectl("kustomize", str(ROOT / "config" / "default")).stdout
    docs = [d for d in yaml.safe_load_all(built) if d]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    entrypoint = json.loads(re.search(r"^ENTRYPOINT (.+)$", dockerfile, re.MULTILINE)[1])
    assert "command" not in container, "the image's ENTRYPOINT is the command"
    argv = [*entrypoint, *container["args"]]
    assert argv[:2] == ["paddock", "operator"]
    assert argv.count("operator") == 1
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (service,) = [d for d in docs if d["kind"] == "Service"]
    (service_port,) = service["spec"]["ports"]
    assert ports[service_port["targetPort"]] == int(env["PADDOCK_METRICS_PORT"])
    assert (
        service["spec"]["selector"].items()
        <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )

    log = tmp_path / "operator.log"
    # Its arguments, watching the test's namespace only: other tests' operators run beside it.
    process = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", *argv[1:], "--namespace", namespace],
        env={**os.environ, **env, "KUBECONFIG": as_operator},
        stdout=log.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        liveness = f"http://127.0.0.1:{ports['health']}/healthz"
        wait_for(lambda: _answers(liveness), 60, what="the operator's liveness endpoint")
        metrics = f"http://127.0.0.1:{ports['metrics']}/metrics"
        wait_for(lambda: _answers(metrics), 60, what="the operator's metrics endpoint")
        cluster.apply(workspace("app"), namespace)
        cluster.apply(sandbox("box", "app"), namespace)
        wait_for_phase(cluster, namespace, "box", "Ready")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert process.returncode == 0, log.read_text()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (a test URL)
            return bool(response.status == 200)
    except OSError:
        return False


BURST = 40


def test_a_burst_past_the_worker_limit_is_worked_without_waiting_for_workers_to_idle_out(
    cluster: Cluster, namespace: str, as_operator: str
) -> None:
    """kopf's per-object workers are not bounded, its threads are: with one thread of each kind
    (``PADDOCK_WORKER_LIMIT=1``) a burst of 40 SandboxPolicies all get their status. Were the
    workers bounded too, one object at a time would get one, each kept 5 s after its object's
    last event: the 40th would wait over three minutes, past this test's patience."""
    policies = [
        {"apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPolicy",
         "metadata": {"name": f"p{i}"}, "spec": {"commands": {"default": "allow"}}}
        for i in range(BURST)
    ]  # fmt: skip
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": policies})

    def observed() -> int:
        found = json.loads(cluster.kubectl("get", "sandboxpolicies", "-n", namespace,
                                           "-o", "json").stdout)["items"]  # fmt: skip
        return sum((p.get("status") or {}).get("observedGeneration") == 1 for p in found)

    with OperatorProcess(namespace, as_operator, env={"PADDOCK_WORKER_LIMIT": "1"}):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=listing)
        wait_for(lambda: observed() == BURST, 90, what=f"all {BURST} policies observed")
