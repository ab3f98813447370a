"""A command that waits for a person, on the local cluster's real node (a real Claude Code
behind the gate sidecar, a scripted model): across operator kills it runs once when approved,
and never when the sidecar's gate server is gone."""

from __future__ import annotations

from typing import Any

import pytest

from paddock_dev import cluster as local
from paddock_dev import node
from support.harnesses import harness_fields
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.real_node import ON_NODE, exec_in
from support.runs import OperatorProcess, agent_run, log_events, of_type, wait_for_run
from support.sandboxes import sandbox, status_of, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]

ASKED = ["echo asked-1 >> asked.log", "echo asked-2 >> asked.log", "echo asked-3 >> asked.log"]


def test_approvals_across_operator_kills_run_once_and_a_stopped_gate_server_ends_the_run(
    cluster: Cluster, namespace: str, as_operator: str
) -> None:
    """A real Claude Code run waits for a person three times. The operator (its own process)
    is SIGKILLed while the first waits and started again, then the first is approved; it is
    killed while the second waits, which is approved while none runs. Each approved command
    runs once, each approval is requested and resolved once, in a gap-free log. While the third
    waits, the sidecar's gate server is killed: that command is refused (the connection ends
    without an answer), and the run ends GateLost. The operator restarts nothing: the sidecar
    container stays as it is."""
    image = local.load_image(local.default_state_dir(), "sandbox")
    host = node.host_ip()
    assert host is not None
    with (
        OperatorProcess(namespace, as_operator) as operator,
        ScriptedModel([*ASKED, "echo after > after.txt"], host=host) as model,
    ):
        port = int(model.url.rsplit(":", 1)[1])
        policy = {
            "commands": {
                "allow": ["echo ready", "echo after*"],
                "ask": ["echo asked-*"],
                "default": "deny",
            },
            "network": {"egress": [{"cidrs": [f"{host}/32"], "ports": [{"port": port}]}]},
        }
        storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
        box = sandbox("stops", "app", image=image, storage=storage, policy=policy, **ON_NODE)
        cluster.apply(workspace("app"), namespace)
        cluster.apply(box, namespace)
        wait_for_phase(cluster, namespace, "stops", "Ready", timeout=180)
        fields = harness_fields(cluster, namespace, "stops", "claude-code", model.url)
        cluster.apply(agent_run("asks", "stops", "claude-code", "Try.", **fields), namespace)
        first = _pending(cluster, namespace, "asks", 1)
        operator.restart()
        cluster.paddock("approve", "asks", first["id"], "-n", namespace)
        second = _pending(cluster, namespace, "asks", 2)
        operator.kill()
        cluster.paddock("approve", "asks", second["id"], "-n", namespace)
        operator.restart()
        third = _pending(cluster, namespace, "asks", 3)
        restarts = _gate_restarts(cluster, namespace, "stops")
        cluster.kubectl(
            "exec", "-n", namespace, "stops", "-c", "gate", "--",
            "bash", "-c", 'kill -KILL "$(cat /paddock/gate/runs/*/server.pid)"',
        )  # fmt: skip
        status = wait_for_run(cluster, namespace, "asks", timeout=180)

    events = log_events(cluster, namespace, "asks")
    assert status["phase"] == "Failed", (status, events[-3:])
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert complete["reason"] == "GateLost", status
    assert "policy gate" in status["message"]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert status["eventCount"] == len(events)
    assert len(of_type(events, "run.started")) == 1
    assert [a["target"] for a in status["approvals"]] == ASKED
    requested = [e["data"]["id"] for e in of_type(events, "approval.requested")]
    assert requested == [first["id"], second["id"], third["id"]]
    resolved = [(e["data"]["id"], e["data"]["state"]) for e in of_type(events, "approval.resolved")]
    assert resolved[:2] == [(first["id"], "Approved"), (second["id"], "Approved")]
    # The approved commands ran once each; the one waiting when the gate went, and what the
    # agent tried after it, never.
    assert exec_in(cluster, namespace, "stops", "cat /workspace/asked.log") == "asked-1\nasked-2\n"
    assert "after.txt" not in exec_in(cluster, namespace, "stops", "ls -A /workspace").split()
    wait_for(
        lambda: _gate_restarts(cluster, namespace, "stops") == restarts,
        10,
        what="the sidecar left as it was",
    )


def _pending(cluster: Cluster, namespace: str, name: str, count: int) -> dict[str, Any]:
    """The run's ``count``-th approval request, once the run awaits it."""

    def awaited() -> dict[str, Any] | None:
        status = status_of(cluster, namespace, "agentrun", name)
        approvals = status.get("approvals") or []
        waiting = status.get("phase") == "AwaitingApproval" and len(approvals) == count
        return dict(approvals[-1]) if waiting else None

    return wait_for(awaited, 180, what=f"run {name} awaiting approval of request {count}")


def _gate_restarts(cluster: Cluster, namespace: str, pod: str) -> int:
    found = cluster.kubectl(
        "get", "pod", pod, "-n", namespace, "-o",
        "jsonpath={.status.initContainerStatuses[?(@.name=='gate')].restartCount}",
    ).stdout  # fmt: skip
    return int(found or 0)
