"""Sandboxes on the real API server, with the operator running: objects, phases, conditions,
pause and resume, idle timeout, deletion, the failures a user meets, and restarts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kopf.testing import KopfRunner

from paddock.kube import exec as kube_exec
from support.kube import Cluster
from support.sandboxes import (
    assert_never_shown,
    condition,
    events_for,
    get,
    merge_patch,
    posted,
    ready_sandbox,
    sandbox,
    secret,
    setup_containers,
    status_of,
    wait_for_phase,
    wait_for_reason,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

SECRET_VALUE = "s3cr3t-value-that-must-never-leak-7f9c"


def test_sandbox_gets_its_objects_and_becomes_ready(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app", instructions="Be careful."), namespace)
    cluster.apply(sandbox("one", "app", storage={"size": "1Gi"}), namespace)
    status = wait_for_phase(cluster, namespace, "one", "Ready")

    sbx = get(cluster, namespace, "sandbox", "one")
    assert sbx is not None
    assert status["podName"] == "one"
    assert status["pvcName"] == "one-workspace"
    assert status["observedGeneration"] == sbx["metadata"]["generation"]
    assert condition(status, "SetupComplete")["status"] == "True"
    assert condition(status, "VolumeBound")["status"] == "True"
    assert status["timings"]["readySeconds"] >= 0
    uid = sbx["metadata"]["uid"]
    namespace_uid = (get(cluster, namespace, "namespace", namespace) or {})["metadata"]["uid"]
    workspace_uid = (get(cluster, namespace, "workspace", "app") or {})["metadata"]["uid"]
    pod = get(cluster, namespace, "pod", "one") or {}
    (files,) = [v["configMap"]["name"] for v in pod["spec"]["volumes"] if "configMap" in v]
    for kind, name, owner in [
        ("pod", "one", ("Sandbox", uid)),
        ("pvc", "one-workspace", ("Sandbox", uid)),
        # The Workspace's files, which its sandboxes share.
        ("configmap", files, ("Workspace", workspace_uid)),
        # Under no policy: the namespace's baseline, and the fence of the sandboxes with none.
        ("networkpolicy", "paddock-baseline", ("Namespace", namespace_uid)),
        ("networkpolicy", "paddock-no-policy", ("Namespace", namespace_uid)),
    ]:
        obj = get(cluster, namespace, kind, name)
        assert obj is not None, f"{kind}/{name} missing"
        owners = obj["metadata"]["ownerReferences"]
        assert [(o["kind"], o["uid"], o["controller"]) for o in owners] == [(*owner, True)]
    pod = get(cluster, namespace, "pod", "one")
    assert pod is not None
    assert pod["metadata"]["labels"]["paddock.dev/network"] == "paddock-no-policy"
    # No source, so no clone: the project and setup init containers.
    assert setup_containers(pod) == ["project", "setup"]
    posted(cluster, namespace, "one", "Ready")
    events = events_for(cluster, namespace, "one")
    reasons = [e["reason"] for e in events]
    assert not {"Starting", "SettingUp"} & set(reasons), reasons  # progress: the status says
    said = [(e["reason"], e["message"]) for e in events]
    assert len(said) == len(set(said)), f"an Event posted twice: {said}"
    wide = cluster.kubectl("get", "sbx", "one", "-n", namespace, "-o", "wide").stdout
    assert "MESSAGE" in wide.splitlines()[0]
    assert "The sandbox is ready." in wide.splitlines()[1]
    ws_status = status_of(cluster, namespace, "workspace", "app")
    assert condition(ws_status, "Ready")["status"] == "True"
    assert ws_status["hash"] == status["workspaceHash"]


def test_pause_keeps_the_volume_and_resume_skips_setup(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "p")
    pvc_uid = get(cluster, namespace, "pvc", "p-workspace")["metadata"]["uid"]  # type: ignore[index]

    merge_patch(cluster, namespace, "sandbox", "p", {"spec": {"lifecycle": {"paused": True}}})
    wait_for_phase(cluster, namespace, "p", "Paused")
    wait_for(lambda: get(cluster, namespace, "pod", "p") is None, 30, what="pod deleted")
    assert get(cluster, namespace, "pvc", "p-workspace")["metadata"]["uid"] == pvc_uid  # type: ignore[index]

    merge_patch(cluster, namespace, "sandbox", "p", {"spec": {"lifecycle": {"paused": False}}})
    wait_for_phase(cluster, namespace, "p", "Ready")
    pod = get(cluster, namespace, "pod", "p")
    assert pod is not None
    assert setup_containers(pod) == [], "resume ran clone/setup again"
    assert pod["metadata"]["annotations"]["paddock.dev/prepared"] == "true"
    assert get(cluster, namespace, "pvc", "p-workspace")["metadata"]["uid"] == pvc_uid  # type: ignore[index]


def test_idle_timeout_pauses_and_activity_resumes(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("idle", "app", lifecycle={"idleTimeout": "2s"}), namespace)
    status = wait_for_reason(cluster, namespace, "idle", "IdleTimeout", 60)
    assert status["phase"] == "Paused"
    wait_for(lambda: get(cluster, namespace, "pod", "idle") is None, 30, what="idle pod deleted")
    # A longer timeout keeps it paused (only activity resumes), and once resumed it stays
    # Ready for the test to see, however slowly the test looks.
    patch = {"spec": {"lifecycle": {"idleTimeout": "1h"}}}
    cluster.kubectl(
        "patch", "sandbox", "idle", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    wait_for(
        lambda: get(cluster, namespace, "sandbox", "idle")["status"].get("observedGeneration") == 2,
        30,
        what="the new timeout observed",
    )
    assert get(cluster, namespace, "sandbox", "idle")["status"]["phase"] == "Paused"

    now = json.loads(cluster.kubectl("get", "--raw", "/version").stdout) and _utc_now()
    cluster.kubectl(
        "annotate",
        "sandbox",
        "idle",
        "-n",
        namespace,
        "--overwrite",
        f"paddock.dev/last-activity={now}",
    )
    status = wait_for_phase(cluster, namespace, "idle", "Ready")
    assert status["lastActivityTime"] >= now


def _utc_now() -> str:
    from datetime import UTC, datetime, timedelta

    # One second ahead: the annotation must be later than the idle pause, which has a
    # one-second resolution.
    return (datetime.now(UTC) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_deleting_a_sandbox_removes_its_pod_and_volume(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "gone")
    cluster.kubectl("delete", "sandbox", "gone", "-n", namespace)
    for kind, name in [
        ("pod", "gone"),
        ("pvc", "gone-workspace"),
        # The namespace's last sandbox: its fences are no sandbox's any more.
        ("networkpolicy", "paddock-no-policy"),
        ("networkpolicy", "paddock-baseline"),
    ]:
        wait_for(
            lambda k=kind, n=name: get(cluster, namespace, k, n) is None,
            60,
            what=f"{kind}/{name} deleted",
        )


def test_missing_workspace_is_reported_then_picked_up(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(sandbox("early", "later"), namespace)
    status = wait_for_reason(cluster, namespace, "early", "WorkspaceNotFound")
    assert status["phase"] == "Pending"
    assert "Workspace later not found" in condition(status, "Ready")["message"]
    assert posted(cluster, namespace, "early", "WorkspaceNotFound")[0]["type"] == "Warning"
    cluster.apply(workspace("later"), namespace)
    wait_for_phase(cluster, namespace, "early", "Ready")


def test_missing_secret_is_reported_then_picked_up(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ws = workspace(
        "needs-secret",
        secrets=[{"name": "NPM_TOKEN", "secretKeyRef": {"name": "npm", "key": "token"}}],
    )
    cluster.apply(ws, namespace)
    cluster.apply(sandbox("s", "needs-secret"), namespace)
    status = wait_for_reason(cluster, namespace, "s", "SecretNotFound")
    assert "npm/token" in condition(status, "Ready")["message"]
    ws_status = wait_for(
        lambda: (
            condition(status_of(cluster, namespace, "workspace", "needs-secret"), "Ready").get(
                "reason"
            )
            == "SecretNotFound"
        ),
        30,
        what="workspace reports the missing secret",
    )
    assert ws_status
    cluster.apply(secret("npm", token=SECRET_VALUE), namespace)
    wait_for_phase(cluster, namespace, "s", "Ready")


def test_failed_setup_is_a_condition_with_the_step_message(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    # The kwok node reports the setup container as failed with this message (see
    # docs/local-cluster.md); the real script's message is unit-tested.
    message = "setup step failed: make deps (exit 3)\nmake: *** No rule to make target 'deps'"
    ws = workspace(
        "broken",
        env=[
            {"name": "PADDOCK_KWOK_EXIT_CODE", "value": "3"},
            {"name": "PADDOCK_KWOK_MESSAGE", "value": message},
        ],
    )
    cluster.apply(ws, namespace)
    cluster.apply(sandbox("f", "broken"), namespace)
    status = wait_for_phase(cluster, namespace, "f", "Failed")
    ready = condition(status, "Ready")
    assert ready["reason"] == "SetupFailed"
    assert ready["message"].startswith("setup step failed: make deps (exit 3)")
    assert condition(status, "SetupComplete")["status"] == "False"
    assert posted(cluster, namespace, "f", "SetupFailed")
    # No crash loop: the failed pod stays, it is not recreated over and over.
    pod = get(cluster, namespace, "pod", "f")
    assert pod is not None
    assert pod["status"]["phase"] == "Failed"


def test_unpullable_image_is_a_condition(cluster: Cluster, namespace: str, operator: Any) -> None:
    cluster.apply(workspace("bad-image", image="unpullable.invalid/nothing:1"), namespace)
    cluster.apply(sandbox("img", "bad-image"), namespace)
    status = wait_for_reason(cluster, namespace, "img", "ImagePullFailed")
    assert "unpullable.invalid/nothing:1" in condition(status, "Ready")["message"]


def test_evicted_pod_is_recreated_without_setup(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "ev")
    old_uid = get(cluster, namespace, "pod", "ev")["metadata"]["uid"]  # type: ignore[index]
    # What the kubelet writes when it evicts a pod.
    evicted = {"phase": "Failed", "reason": "Evicted", "message": "The node was low on memory."}
    merge_patch(cluster, namespace, "pod", "ev", {"status": evicted}, subresource="status")
    pod = wait_for(
        lambda: (
            (p := get(cluster, namespace, "pod", "ev")) and p["metadata"]["uid"] != old_uid and p
        ),
        60,
        what="a new pod",
    )
    assert setup_containers(pod) == []
    wait_for_phase(cluster, namespace, "ev", "Ready")
    assert posted(cluster, namespace, "ev", "PodEvicted")


def test_restarted_operator_converges_without_duplicates(cluster: Cluster, namespace: str) -> None:
    args = ["run", "--standalone", "--namespace", namespace, "-m", "paddock.handlers"]
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("r", "app"), namespace)
    with KopfRunner(args, timeout=60) as first:
        wait_for(lambda: get(cluster, namespace, "pvc", "r-workspace"), 60, what="the PVC")
    assert first.exception is None, first.output
    # Killed mid-way or not, a second operator finishes the job and creates nothing twice.
    with KopfRunner(args, timeout=60) as second:
        wait_for_phase(cluster, namespace, "r", "Ready")
    assert second.exception is None, second.output
    for kind, selector in (
        ("pods", "paddock.dev/sandbox=r"),
        ("pvc", "paddock.dev/sandbox=r"),
        ("configmaps", "paddock.dev/workspace=app"),  # its Workspace's files
        ("networkpolicies", "app.kubernetes.io/managed-by=paddock"),  # its fence, the baseline
    ):
        listed = json.loads(
            cluster.kubectl("get", kind, "-n", namespace, "-l", selector, "-o", "json").stdout
        )
        names = sorted(i["metadata"]["name"] for i in listed["items"])
        expected = ["paddock-baseline", "paddock-no-policy"] if kind == "networkpolicies" else None
        assert names == expected or len(names) == 1, f"{kind}: {names}"


def test_no_secret_value_in_status_events_files_or_logs(
    cluster: Cluster, namespace: str, caplog: pytest.LogCaptureFixture, as_operator: str
) -> None:
    cluster.apply(secret("creds", token=SECRET_VALUE), namespace)
    ws = workspace(
        "secretive",
        source={
            "git": {
                "url": "https://example.com/private.git",
                "secretRef": {"name": "creds", "key": "token"},
            }
        },
        secrets=[{"name": "API_TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}}],
        skills=[
            {
                "name": "docs",
                "mcp": {
                    "url": "https://mcp.example.com",
                    "headers": [
                        {
                            "name": "Authorization",
                            "bearer": True,
                            "secretKeyRef": {"name": "creds", "key": "token"},
                        }
                    ],
                },
            }
        ],
    )
    cluster.apply(ws, namespace)
    cluster.apply(sandbox("quiet", "secretive"), namespace)
    args = ["run", "--standalone", "--verbose", "--namespace", namespace, "-m", "paddock.handlers"]
    with caplog.at_level("DEBUG"), KopfRunner(args, timeout=60) as runner:
        wait_for_phase(cluster, namespace, "quiet", "Ready")
    assert runner.exception is None
    seen = {
        "status": cluster.kubectl(
            "get", "sandboxes,workspaces", "-n", namespace, "-o", "json"
        ).stdout,
        "events": cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout,
        "objects": cluster.kubectl("get", "configmaps,pods", "-n", namespace, "-o", "json").stdout,
        "operator output": runner.output,
        "operator log": caplog.text,
    }
    assert len(caplog.text) > 1000, "the operator's debug log was not captured"
    assert_never_shown(SECRET_VALUE, seen)


def test_a_command_that_ends_without_reading_its_input_is_heard_out_whole(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """The exec connection closes under a write the command never reads (a script refusing
    before it reads, as the MCP write does): its exit code and output are read all the same."""
    status = ready_sandbox(cluster, namespace, "box")
    argv = ["bash", "-c", "echo refused >&2; exit 3"]
    result = kube_exec.run(namespace, status["podName"], "sandbox", argv, stdin="x" * (8 << 20))
    assert (result.exit_code, result.stderr.strip()) == (3, "refused")
