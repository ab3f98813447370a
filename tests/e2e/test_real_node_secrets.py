"""A Workspace's secret values on the real node, where the kubelet really puts them into the
container's env: what sandbox output reaches (a failed setup step's report in the Sandbox's
status, its Events and the pod's own status; a run's log) never shows them, also after the
Secret is rotated while the pod still holds the value it started with."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.kube import Cluster
from support.real_node import node_sandbox
from support.runs import command_run, log_events, of_type, wait_for_run
from support.sandboxes import (
    assert_never_shown,
    condition,
    events_for,
    get,
    secret,
    wait_for_phase,
    workspace,
)

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

TOKEN = "tok-0f3a9c5e7b21d4"
PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
    "VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDu\n"
    "-----END PRIVATE KEY-----\n"
)
SECRETS = [
    {"name": "TOKEN", "secretKeyRef": {"name": "team", "key": "token"}},
    {"name": "DEPLOY_KEY", "secretKeyRef": {"name": "team", "key": "pem"}},
]


def test_a_failed_setup_step_that_prints_secrets_shows_them_nowhere(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(secret("team", token=TOKEN, pem=PEM), namespace)
    failing = 'echo "token=$TOKEN"; printf "%s\\n" "$DEPLOY_KEY" | sed -n 2p; exit 3'
    cluster.apply(workspace("app", secrets=SECRETS, setup=[failing]), namespace)
    cluster.apply(node_sandbox("leaky"), namespace)
    status = wait_for_phase(cluster, namespace, "leaky", "Failed", timeout=180)
    message = condition(status, "Ready")["message"]
    assert "exit 3" in message, message
    assert "token=[redacted]" in message, message  # the report is there, masked
    pod = get(cluster, namespace, "pod", "leaky") or {}
    seen = {
        "the Sandbox's status": json.dumps(status),
        "its Events": json.dumps(events_for(cluster, namespace, "leaky")),
        "the pod's status": json.dumps(pod.get("status") or {}),
    }
    for value in (TOKEN, *PEM.splitlines()[1:3]):
        assert_never_shown(value, seen)


def test_a_value_the_pod_started_with_stays_masked_after_its_secret_is_rotated(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(secret("team", token=TOKEN, pem=PEM), namespace)
    cluster.apply(workspace("app", secrets=SECRETS), namespace)
    cluster.apply(node_sandbox("box"), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready", timeout=180)
    rotated = "tok-rotated-77e1c0d9"
    cluster.apply(secret("team", token=rotated, pem=PEM), namespace)  # the pod holds the old
    cluster.apply(command_run("print", "box", 'echo "held=$TOKEN"'), namespace)
    run = wait_for_run(cluster, namespace, "print", timeout=120)
    assert run["phase"] == "Succeeded", run
    output = [e["data"]["text"] for e in of_type(log_events(cluster, namespace, "print"), "output")]
    assert output == ["held=[redacted]"]
    assert_never_shown(TOKEN, {"the run's status": json.dumps(run)})
