"""The operator as an attacker and a confused user meet it, on the real API server: it adopts
nothing it does not own, reports every failure as a condition and a Warning Event, and lets no
secret value escape in any form a command prints it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from paddock.api.workspace import WorkspaceSpec
from paddock.render.files import render_files_configmap
from paddock.render.projections import render_projection
from support import identity
from support.kube import Cluster
from support.runs import command_run, configmap_prompt_run, log_events, wait_for_run
from support.sandboxes import (
    assert_never_shown,
    condition,
    events_for,
    get,
    posted,
    ready_sandbox,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    wait_for_reason,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration


def foreign_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"team": "other"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }


DENY_ALL = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "web-egress"},
    "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
}


def _files_name(name: str) -> str:
    """The name of the files ConfigMap of the Workspace ``name`` as ``workspace`` makes it."""
    spec = WorkspaceSpec.model_validate(workspace(name)["spec"])
    return str(render_files_configmap("", name, spec, render_projection(spec))["metadata"]["name"])


TEAM_FILES = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": _files_name("ws")},
    "data": {"settings": "keep me"},
}

# name: (the object already there, the Sandbox an editor creates, the foreign object's kind)
SQUATTED = {
    "a paused sandbox named like a pod": (
        foreign_pod("db"),
        sandbox("db", "ws", lifecycle={"paused": True}),
        "pod",
    ),
    "a sandbox whose own fence is taken": (
        DENY_ALL,
        sandbox("web", "ws", policy={"commands": {"default": "allow"}}),  # inline: its own
        "networkpolicy",
    ),
    "a sandbox whose files are taken": (TEAM_FILES, sandbox("app", "ws"), "configmap"),
    "a sandbox named like another team's pod": (foreign_pod("api"), sandbox("api", "ws"), "pod"),
}


@pytest.fixture
def editor(cluster: Cluster, namespace: str, tmp_path: Path) -> Cluster:
    """The cluster as a user holding only Paddock's editor roles in the namespace."""
    kubeconfig = identity.editor_kubeconfig(cluster, namespace, tmp_path)
    return Cluster("editor", kubeconfig, cluster.kubectl_binary)


def _unchanged(cluster: Cluster, namespace: str, kind: str, before: dict[str, Any]) -> None:
    after = get(cluster, namespace, kind, before["metadata"]["name"])
    assert after is not None, f"the operator deleted {kind} {before['metadata']['name']}"
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert "ownerReferences" not in after["metadata"]
    for part in ("spec", "data"):
        assert after.get(part) == before.get(part), f"the operator changed the {kind}'s {part}"
    assert after["metadata"].get("labels") == before["metadata"].get("labels")
    if kind != "pod":  # a pod's status moves with its node; nothing else may write these
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.mark.parametrize("case", SQUATTED)
def test_a_name_taken_by_another_object_is_a_conflict_and_that_object_is_untouched(
    cluster: Cluster, namespace: str, operator: Any, editor: Cluster, case: str
) -> None:
    taken, wanted, kind = SQUATTED[case]
    cluster.apply(taken, namespace)
    before = get(cluster, namespace, kind, taken["metadata"]["name"])
    assert before is not None
    editor.apply(workspace("ws"), namespace)
    editor.apply(wanted, namespace)
    name = wanted["metadata"]["name"]
    status = wait_for_reason(cluster, namespace, name, "NameConflict")
    assert status["phase"] == "Pending"
    assert taken["metadata"]["name"] in condition(status, "Ready")["message"]
    warnings = posted(cluster, namespace, name, "NameConflict")
    assert warnings[0]["type"] == "Warning"
    if kind == "pod" and not wanted["spec"].get("lifecycle"):
        editor.apply(command_run("probe", name, "echo hi"), namespace)
        run = wait_for_run(editor, namespace, "probe", ("WaitingForSandbox",))
        assert condition(run, "SandboxReady")["reason"] == "SandboxNotReady"
        assert "run.started" not in [e["type"] for e in log_events(cluster, namespace, "probe")]
    _unchanged(cluster, namespace, kind, before)

    # The operator goes on working for everyone else.
    ready_sandbox(cluster, namespace, "good")


def test_a_squatted_log_name_fails_the_run_and_leaves_the_configmap_alone(
    cluster: Cluster, namespace: str, operator: Any, editor: Cluster
) -> None:
    squat = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "job-log-00000"},
        "data": {"events.jsonl": "not yours\n"},
    }
    cluster.apply(squat, namespace)
    before = get(cluster, namespace, "configmap", "job-log-00000")
    assert before is not None
    ready_sandbox(cluster, namespace, "box")
    editor.apply(command_run("job", "box", "echo hi"), namespace)
    status = wait_for_run(cluster, namespace, "job")
    assert status["phase"] == "Failed"
    assert condition(status, "Complete")["reason"] == "LogNameConflict"
    assert "job-log-00000" in status["message"]
    _unchanged(cluster, namespace, "configmap", before)


def test_cancel_ends_a_run_whose_log_cannot_be_written(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(command_run("stuck", "nowhere", "true"), namespace)
    wait_for_run(cluster, namespace, "stuck", ("WaitingForSandbox",))
    # Its log has no chunk yet, and the name of the first is taken: the cancel still ends it.
    squat = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stuck-log-00000"}}
    cluster.apply(squat, namespace)
    cluster.kubectl(
        "patch", "agentrun", "stuck", "-n", namespace, "--type=merge", "-p",
        json.dumps({"spec": {"cancel": True}}),
    )  # fmt: skip
    assert wait_for_run(cluster, namespace, "stuck")["phase"] == "Cancelled"


SECRET_LINES = (
    "-----BEGIN TEST KEY-----\n"
    "AAAAB3NzaC1yc2EAAAADAQABAAABAQC7testkey\n"
    "ZZZ9/eNdOfTheKeyLine==\n"
    "-----END TEST KEY-----\n"
)
TOKEN_WITH_NEWLINE = "tok-4f1e9a0c7b-from-a-file\n"


def test_secrets_ending_in_a_newline_or_spanning_lines_never_show(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(secret("creds", token=TOKEN_WITH_NEWLINE, key=SECRET_LINES), namespace)
    ready_sandbox(cluster, namespace, "box")
    printing = (
        'printf "%s" "$TOKEN"; echo; echo "$KEY"; echo "$KEY" >&2; '
        'printf "%s" "$TOKEN" | base64; printf "x:%s" "$TOKEN" | base64; exit 1'
    )
    run = command_run("leak", "box", printing)
    run["spec"]["secrets"] = [
        {"name": "TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}},
        {"name": "KEY", "secretKeyRef": {"name": "creds", "key": "key"}},
    ]
    cluster.apply(run, namespace)
    status = wait_for_run(cluster, namespace, "leak")
    assert status["phase"] == "Failed"
    logs = cluster.kubectl("get", "configmaps", "-n", namespace, "-o", "json").stdout
    seen = {
        "log": logs,
        "status": json.dumps(status),
        "events": json.dumps(events_for(cluster, namespace, "leak")),
    }
    for value in (TOKEN_WITH_NEWLINE.strip(), *SECRET_LINES.splitlines()[1:3]):
        assert_never_shown(value, seen)
    assert "[redacted]" in logs


# name: (Sandbox fields, the Ready reason, the phase, words of the API server's message)
REFUSED = {
    "requests above limits": (
        {"resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "1"}}},
        "PodRefused",
        "Failed",
        "must be less than or equal to cpu limit",
    ),
    "an unknown resource name": (
        {"resources": {"requests": {"gpu": "1"}}},
        "PodRefused",
        "Failed",
        "gpu",
    ),
    "an invalid toleration": (
        {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]},
        "PodRefused",
        "Failed",
        "tolerations",
    ),
    "an invalid node selector": (
        {"nodeSelector": {"not a key!": "x"}},
        "PodRefused",
        "Failed",
        "nodeSelector",
    ),
    "an image name with spaces": ({"image": " busybox "}, "PodRefused", "Failed", "image"),
    "a RuntimeClass that does not exist": (
        {"runtimeClassName": "no-such-runtime"},
        "PodRefused",
        "Pending",
        "no-such-runtime",
    ),
    "a zero storage size": ({"storage": {"size": "0"}}, "VolumeRefused", "Failed", "storage"),
    "a negative storage size": (
        {"storage": {"size": "-1Gi"}},
        "VolumeRefused",
        "Failed",
        "storage",
    ),
    "a node selector that matches no node": (
        {"nodeSelector": {"disk": "ssd-that-nobody-has"}},
        "Unschedulable",
        "Provisioning",
        "node",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_every_refusal_is_a_condition_and_a_warning_event(
    cluster: Cluster, namespace: str, operator: Any, case: str
) -> None:
    fields, reason, phase, words = REFUSED[case]
    cluster.apply(workspace("ws"), namespace)
    cluster.apply(sandbox("bad", "ws", **fields), namespace)
    status = wait_for_reason(cluster, namespace, "bad", reason)
    assert status["phase"] == phase
    message = condition(status, "Ready")["message"]
    assert words in message, message
    warnings = posted(cluster, namespace, "bad", reason)
    assert warnings[0]["type"] == "Warning"


def test_a_missing_prompt_configmap_waits_with_a_reason(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(configmap_prompt_run("asks", "box", "p", "k"), namespace)
    status = wait_for(
        lambda: (
            condition(s := status_of(cluster, namespace, "agentrun", "asks"), "PromptFound").get(
                "reason"
            )
            == "PromptNotFound"
            and s
        ),
        60,
        what="run asks waiting for its prompt",
    )
    assert status["phase"] == "Pending"
    assert "p/k" in status["message"]
    cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}, "data": {"k": "hi"}},
        namespace,
    )
    assert wait_for_run(cluster, namespace, "asks", ("WaitingForSandbox",))  # on to the next


def test_a_workspace_larger_than_an_annotation_is_still_reconciled(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    files = [
        {"name": f"f{i}", "file": {"path": f"docs/f{i}.md", "content": "x" * 200_000}}
        for i in range(3)
    ]
    # Created, not applied: kubectl apply would keep a copy in an annotation of its own.
    cluster.kubectl(
        "create", "-n", namespace, "-f", "-", stdin=json.dumps(workspace("big", skills=files))
    )
    status = wait_for(
        lambda: (s := status_of(cluster, namespace, "workspace", "big")).get("hash") and s,
        60,
        what="the large Workspace reconciled",
    )
    assert condition(status, "Ready")["status"] == "True"
    cluster.apply(sandbox("huge", "big"), namespace)
    wait_for_phase(cluster, namespace, "huge", "Ready")
