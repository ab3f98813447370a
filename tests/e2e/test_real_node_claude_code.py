"""The real Claude Code in a sandbox on the local cluster's real node, its model the scripted
server on this host's bridge address: each command it asks to run goes through the gate (the
policy's allow, deny and ask; an ask waits for `paddock approve`)."""

from __future__ import annotations

from typing import Any

import pytest

from paddock_dev import cluster as local
from paddock_dev import node
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.real_node import ON_NODE
from support.runs import log_events, of_type, scripted_claude_run, wait_for_run
from support.sandboxes import sandbox, secret, wait_for_phase, workspace

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]


def test_a_real_claude_code_on_the_real_node_goes_through_the_gate(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """Claude Code in a container on the real node (the published sandbox image's): allowed
    commands run, a denied one does not, an asked one waits for paddock approve."""
    image = local.load_image(local.default_state_dir(), "sandbox")
    host = node.host_ip()
    assert host is not None
    commands = ["touch allowed-1", "touch denied-1", "touch asked-1"]
    with ScriptedModel(commands, host=host) as model:
        port = int(model.url.rsplit(":", 1)[1])
        policy = {
            "commands": {"allow": ["touch allowed-*", "echo *"], "ask": ["touch asked-*"],
                         "deny": ["touch denied-*"], "default": "deny"},
            # The model server, on this host's bridge address.
            "network": {"egress": [{"cidrs": [f"{host}/32"], "ports": [{"port": port}]}]},
        }  # fmt: skip
        cluster.apply(workspace("app"), namespace)
        storage = {"size": "1Gi", "storageClassName": node.STORAGE_CLASS}
        box = sandbox("real", "app", image=image, storage=storage, policy=policy, **ON_NODE)
        cluster.apply(box, namespace)
        wait_for_phase(cluster, namespace, "real", "Ready", timeout=180)
        cluster.apply(secret("llm", key="sk-scripted-real-node"), namespace)
        cluster.apply(scripted_claude_run("gated", "real", "Touch files.", model.url), namespace)
        waiting = wait_for_run(cluster, namespace, "gated", ("AwaitingApproval",), timeout=180)
        assert waiting["approvals"][0]["target"] == "touch asked-1"
        cluster.paddock("approve", "gated", "-n", namespace)
        status = wait_for_run(cluster, namespace, "gated", timeout=180)

    events = log_events(cluster, namespace, "gated")
    assert status["phase"] == "Succeeded", (status, events[-3:])
    listing = cluster.kubectl(
        "exec", "-n", namespace, "real", "-c", "sandbox", "--", "ls", "-A", "/workspace"
    ).stdout.split()
    assert "allowed-1" in listing
    assert "asked-1" in listing  # approved
    assert "denied-1" not in listing
    (denied,) = of_type(events, "policy.denied")
    assert denied["data"]["command"] == "touch denied-1"
