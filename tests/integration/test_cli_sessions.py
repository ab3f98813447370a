"""A thread's conversation survives its sandbox: the REAL agent CLIs, against the scripted
model, resume the first run's session after the sandbox is paused and resumed (a new pod), and
again in the sandbox made anew from the snapshot taken after a run. The model sees the earlier
conversation each time.

Claude Code and Gemini CLI file a session under the workspace's real path, which is
``/workspace`` in every sandbox; on kwok it is the volume's own directory, another for each
volume, so only Codex (which files sessions by id alone) is restored here. Claude Code is
restored on the real node (tests/e2e/test_real_node_claude_code.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.harnesses import API_KEY, harness_fields
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.runs import agent_run, log_events, wait_for_run
from support.sandboxes import (
    get,
    kwok_pod_dir,
    merge_patch,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

FIRST = "Remember the word heliotrope-7431."
MEMO = "memo-secret-5be1c0d9e2"  # a run secret the agent's command prints
LATER = "Which word did I ask you to remember?"


def _sent(model: ScriptedModel, since: int) -> str:
    return json.dumps([r["body"] for r in model.requests[since:]])


def _run(
    cluster: Cluster, namespace: str, name: str, box: str, fields: dict[str, Any], **spec: Any
) -> dict[str, Any]:
    cluster.apply(
        agent_run(name, box, spec.pop("harness"), spec.pop("prompt"), **fields, **spec), namespace
    )
    status = wait_for_run(cluster, namespace, name, timeout=240)
    assert status["phase"] == "Succeeded", (status, log_events(cluster, namespace, name)[-3:])
    return status


def _after_run_snapshot(cluster: Cluster, namespace: str, box: str, run_uid: str) -> str:
    """The name of the snapshot taken after the run ``run_uid``, once it is ready."""

    def ready() -> str | None:
        for snap in status_of(cluster, namespace, "workspace", "app").get("snapshots") or []:
            if run_uid[:8] in snap["name"] and snap.get("ready"):
                return str(snap["name"])
        return None

    return wait_for(ready, 120, what=f"the snapshot after run {run_uid[:8]} ready")


# (OpenCode's sessions are in a database that also decides what a run may do: none is kept.)
@pytest.mark.parametrize("harness", ["claude-code", "codex", "gemini"])
def test_a_threads_session_survives_a_pause_and_a_restore(
    cluster: Cluster, namespace: str, operator: Any, agent_clis: Path, harness: str
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("box", "app", lifecycle={"snapshot": "after-run"}), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")
    cluster.apply(secret("memo", value=MEMO), namespace)
    with ScriptedModel('echo "noted $MEMO"') as model:
        fields = harness_fields(cluster, namespace, "box", harness, model.url)
        fields["secrets"].append({"name": "MEMO", "secretKeyRef": {"name": "memo", "key": "value"}})
        first = _run(cluster, namespace, "first", "box", fields, harness=harness, prompt=FIRST)
        session = first["sessionId"]
        # The conversation is on the volume, the secret its command printed masked in it.
        store = kwok_pod_dir(namespace, "box") / "fs" / "workspace" / ".paddock" / "sessions"
        kept = b"".join(p.read_bytes() for p in store.rglob("*") if p.is_file())
        assert b"heliotrope-7431" in kept
        assert MEMO.encode() not in kept
        assert API_KEY.encode() not in kept
        assert b"noted " + b"*" * len(MEMO) in kept  # the command's output, masked

        # Paused: the pod goes (and its emptyDirs with it); resumed, a new pod.
        pod_uid = get(cluster, namespace, "pod", "box")["metadata"]["uid"]
        merge_patch(cluster, namespace, "sandbox", "box", {"spec": {"lifecycle": {"paused": True}}})
        wait_for_phase(cluster, namespace, "box", "Paused")
        merge_patch(
            cluster, namespace, "sandbox", "box", {"spec": {"lifecycle": {"paused": False}}}
        )
        wait_for_phase(cluster, namespace, "box", "Ready")
        assert get(cluster, namespace, "pod", "box")["metadata"]["uid"] != pod_uid

        since = len(model.requests)
        second = _run(
            cluster, namespace, "second", "box", fields,
            harness=harness, prompt=LATER, sessionId=session,
        )  # fmt: skip
        assert FIRST in _sent(model, since), "the resumed run did not carry the conversation"
        if harness != "codex":
            return
        run_uid = get(cluster, namespace, "agentrun", "second")["metadata"]["uid"]
        snapshot = _after_run_snapshot(cluster, namespace, "box", run_uid)

        # The sandbox deleted with its volume (as a thread's is at its idle timeout), and made
        # again by the same name: its volume starts from that snapshot, session and all.
        cluster.kubectl("delete", "sandbox", "box", "-n", namespace, "--wait=true")
        wait_for(
            lambda: get(cluster, namespace, "pvc", "box-workspace") is None,
            60,
            what="the sandbox's volume deleted",
        )
        cluster.apply(sandbox("box", "app", lifecycle={"snapshot": "after-run"}), namespace)
        restored = wait_for_phase(cluster, namespace, "box", "Ready")
        setup = next(c for c in restored["conditions"] if c["type"] == "SetupComplete")
        assert setup["reason"] == "Restored", restored
        since = len(model.requests)
        _run(
            cluster, namespace, "third", "box", fields,
            harness=harness, prompt=LATER, sessionId=second.get("sessionId") or session,
        )  # fmt: skip
        sent = _sent(model, since)
        assert FIRST in sent, "the restored run did not carry the conversation"
        assert snapshot in restored["restoredFrom"]
