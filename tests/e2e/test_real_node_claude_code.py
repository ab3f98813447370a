"""The real Claude Code in a sandbox on the local cluster's real node, its model the scripted
server on this host's bridge address: each command it asks to run goes through the gate (the
policy's allow, deny and ask; an ask waits for `paddock approve`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from paddock_dev import cluster as local
from paddock_dev import node
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.real_node import ON_NODE, exec_in, node_sandbox
from support.runs import log_events, of_type, scripted_claude_run, wait_for_run
from support.sandboxes import (
    get,
    merge_patch,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

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


FIRST = "Remember the word heliotrope-7431."
MEMO = "memo-secret-91c2f0a7b3"  # a run secret the agent's command prints


def test_a_real_claude_codes_session_survives_a_pause_and_a_restore(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """The conversation is kept on the sandbox's volume: after a pause (a new pod) and in the
    sandbox made anew from the snapshot after a run, Claude Code resumes it (the model is sent
    the first prompt again); the secret a command printed is masked in it, and the files are
    the sandbox user's."""
    host = node.host_ip()
    assert host is not None
    cluster.apply(secret("llm", key="sk-scripted-real-node"), namespace)
    cluster.apply(secret("memo", value=MEMO), namespace)
    with ScriptedModel('echo "noted $MEMO"', host=host) as model:
        port = int(model.url.rsplit(":", 1)[1])
        policy = {
            "commands": {"default": "allow"},
            "network": {"egress": [{"cidrs": [f"{host}/32"], "ports": [{"port": port}]}]},
        }
        cluster.apply(workspace("app"), namespace)
        box = node_sandbox("real")
        image = local.load_image(local.default_state_dir(), "sandbox")  # Claude Code's
        box["spec"] |= {"image": image, "policy": policy, "lifecycle": {"snapshot": "after-run"}}
        cluster.apply(box, namespace)
        wait_for_phase(cluster, namespace, "real", "Ready", timeout=180)

        def run(name: str, prompt: str, session: str | None = None) -> dict[str, Any]:
            spec = scripted_claude_run(name, "real", prompt, model.url)
            spec["spec"]["secrets"].append(
                {"name": "MEMO", "secretKeyRef": {"name": "memo", "key": "value"}}
            )
            if session:
                spec["spec"]["sessionId"] = session
            cluster.apply(spec, namespace)
            status = wait_for_run(cluster, namespace, name, timeout=180)
            events = log_events(cluster, namespace, name)
            assert status["phase"] == "Succeeded", (status, events[-3:])
            return status

        exec_in(
            cluster, namespace, "real",
            "git init -q && git -c user.name=u -c user.email=u@x commit -q --allow-empty -m b",
        )  # fmt: skip
        session = run("first", FIRST)["sessionId"]
        store = "cd /workspace/.paddock/sessions && find . -type f"
        kept = exec_in(cluster, namespace, "real", f"{store} -exec cat {{}} +")
        assert exec_in(cluster, namespace, "real", f"{store} ! -user 1000") == ""
        assert "heliotrope-7431" in kept
        assert MEMO not in kept
        assert "noted " + "*" * len(MEMO) in kept
        # No part of the work: the agent's own git does not see it either.
        assert exec_in(cluster, namespace, "real", "git -C /workspace status --short") == ""

        merge_patch(
            cluster, namespace, "sandbox", "real", {"spec": {"lifecycle": {"paused": True}}}
        )
        wait_for_phase(cluster, namespace, "real", "Paused", timeout=120)
        merge_patch(
            cluster, namespace, "sandbox", "real", {"spec": {"lifecycle": {"paused": False}}}
        )
        wait_for_phase(cluster, namespace, "real", "Ready", timeout=180)
        since = len(model.requests)
        second = run("second", "Which word?", session)
        assert FIRST in json.dumps([r["body"] for r in model.requests[since:]])

        uid = (get(cluster, namespace, "agentrun", "second") or {})["metadata"]["uid"]
        wait_for(
            lambda: any(
                uid[:8] in s["name"] and s.get("ready")
                for s in status_of(cluster, namespace, "workspace", "app").get("snapshots") or []
            ),
            180,
            what="the snapshot after the second run ready",
        )
        cluster.kubectl("delete", "sandbox", "real", "-n", namespace, "--wait=true")
        wait_for(
            lambda: get(cluster, namespace, "pvc", "real-workspace") is None,
            120,
            what="the sandbox's volume deleted",
        )
        cluster.apply(box, namespace)
        restored = wait_for_phase(cluster, namespace, "real", "Ready", timeout=180)
        assert restored.get("restoredFrom"), restored
        since = len(model.requests)
        run("third", "Which word, again?", second.get("sessionId") or session)
        assert FIRST in json.dumps([r["body"] for r in model.requests[since:]])
