"""Least privilege, proven both ways: the operator, running with config/rbac's ClusterRole,
is driven through every path it has (a sandbox set up, drifted and put back, paused and
resumed, snapshotted and forked; runs that succeed, make their own sandbox, and are deleted
mid-run; a snapshot superseded), and the API server's audit log must show it using every verb
on every resource the role grants, or the grant must be listed below with the reason it is
needed anyway. Nothing it asked for may have been refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from paddock_dev import cluster as local
from support import identity
from support.kube import ROOT, Cluster
from support.runs import command_run, configmap_prompt_run, wait_for_run
from support.sandboxes import (
    condition,
    get,
    merge_patch,
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

USER = f"system:serviceaccount:{identity.NAMESPACE}:{identity.ACCOUNT}"

# Granted, yet not seen in the local cluster: each with why a real cluster needs it.
NEEDED_UNSEEN = {
    ("update", "paddock.dev", "sandboxes/finalizers"): "blockOwnerDeletion on the objects a "
    "Sandbox owns, where the OwnerReferencesPermissionEnforcement admission plugin runs "
    "(OpenShift); the local API server does not run it",
    ("update", "paddock.dev", "agentruns/finalizers"): "blockOwnerDeletion on a run's log "
    "ConfigMaps and sandbox, likewise",
    ("patch", "", "persistentvolumeclaims"): "a volume filled from a workspace archive is "
    "annotated so; archives go through exec into the volume, which only the real node runs "
    "(tests/e2e/test_real_node_archives.py), not the kwok node this test drives",
    ("create", "", "pods/exec"): "exec is a websocket GET (audited as get) that the API server "
    "also authorizes as create (AuthorizePodWebsocketUpgradeCreatePermission)",
}


def granted() -> set[tuple[str, str, str]]:
    role = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())
    return {
        (verb, group, resource)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def audited(log: Path, since: datetime) -> tuple[set[tuple[str, str, str]], list[str]]:
    """What the operator's identity did from ``since`` on (this test's own paths, not those of
    tests run before it on the same cluster), and what it was refused."""
    used, refused = set(), []
    for path in (log.with_name(log.name + ".1"), log):  # a rotated part first, if any
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            entry: dict[str, Any] = json.loads(line)
            if entry.get("user", {}).get("username") != USER or "objectRef" not in entry:
                continue
            if datetime.fromisoformat(entry["requestReceivedTimestamp"]) < since:
                continue
            ref = entry["objectRef"]
            resource = ref.get("resource", "")
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            used.add((entry["verb"], ref.get("apiGroup", ""), resource))
            # RBAC's own refusals (an admission plugin's 403 is about the object, not the role).
            if entry.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
                refused.append(f"{entry['verb']} {resource}: {entry['requestURI']}")
    return used, refused


def drive_every_path(cluster: Cluster, namespace: str) -> None:
    cluster.apply(secret("mcp", token="tok-0123456789"), namespace)
    cluster.apply(
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "SandboxPolicy",
            "metadata": {"name": "pol"},
            "spec": {"commands": {"allow": ["echo *", "sleep *"]}},
        },
        namespace,
    )
    ready_sandbox(cluster, namespace, "box", policyRef={"name": "pol"})
    # A GitOps repo applies in any order: a Sandbox before its Workspace and policy, whose
    # reconcile asks the API server for what no watch has shown (get), then Ready once they are.
    cluster.apply(sandbox("early", "later", policyRef={"name": "later-pol"}), namespace)
    wait_for_reason(cluster, namespace, "early", "WorkspaceNotFound")
    cluster.apply(workspace("later"), namespace)
    cluster.apply(
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "SandboxPolicy",
            "metadata": {"name": "later-pol"},
            "spec": {"commands": {"allow": ["echo *"]}},
        },
        namespace,
    )
    wait_for_phase(cluster, namespace, "early", "Ready")
    # Drift of the fence is put back (the files are immutable).
    fence = "pol.paddock-policy"  # box's policy's, shared by its sandboxes
    merge_patch(cluster, namespace, "networkpolicy", fence, {"spec": {"policyTypes": ["Ingress"]}})
    wait_for(
        lambda: (
            "Egress"
            in (get(cluster, namespace, "networkpolicy", fence) or {})["spec"]["policyTypes"]
        ),
        60,
        what="the NetworkPolicy put back",
    )
    # A sandbox moved to another policy: its pod is relabelled (patch), and the fence no
    # sandbox uses any more is deleted.
    merge_patch(cluster, namespace, "sandbox", "early", {"spec": {"policyRef": {"name": "pol"}}})
    wait_for(
        lambda: get(cluster, namespace, "networkpolicy", "later-pol.paddock-policy") is None,
        60,
        what="the fence of the policy no sandbox is under any more deleted",
    )
    # A run whose prompt is a ConfigMap's key, read by name (get).
    asks = configmap_prompt_run("asks", "box", "p", "k")
    cluster.apply(asks, namespace)
    wait_for(
        lambda: "p/k" in (status_of(cluster, namespace, "agentrun", "asks").get("message") or ""),
        60,
        what="the run waiting for its prompt's ConfigMap",
    )
    cluster.kubectl("delete", "agentrun", "asks", "-n", namespace)
    cluster.apply(command_run("one", "box", "echo hi"), namespace)
    assert wait_for_run(cluster, namespace, "one")["phase"] == "Succeeded"
    cluster.apply(command_run("brief", "box", "echo bye", ttlSecondsAfterFinished=0), namespace)
    wait_for(
        lambda: get(cluster, namespace, "agentrun", "brief") is None,
        60,
        what="the finished run deleted at the end of its time to live",
    )
    merge_patch(cluster, namespace, "sandbox", "box", {"spec": {"lifecycle": {"paused": True}}})
    wait_for_phase(cluster, namespace, "box", "Paused")
    merge_patch(cluster, namespace, "sandbox", "box", {"spec": {"lifecycle": {"paused": False}}})
    wait_for_phase(cluster, namespace, "box", "Ready")
    own = command_run("own", "box", "echo mine")
    own["spec"].pop("sandboxRef")
    own["spec"]["sandboxTemplate"] = {"workspaceRef": {"name": "app"}}
    cluster.apply(own, namespace)
    assert wait_for_run(cluster, namespace, "own", timeout=120)["phase"] == "Succeeded"
    # A pool kept full, and a run taking its member (a write guarded by its resourceVersion).
    pool = {"apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPool", "metadata": {"name": "py"},
            "spec": {"replicas": 1, "template": {"workspaceRef": {"name": "app"}}}}  # fmt: skip
    cluster.apply(pool, namespace)
    wait_for(lambda: status_of(cluster, namespace, "sandboxpool", "py").get("readyReplicas"), 120,
             what="the pool's member Ready")  # fmt: skip
    taker = command_run("taker", "box", "echo took", poolRef={"name": "py"})
    taker["spec"].pop("sandboxRef")
    cluster.apply(taker, namespace)
    assert wait_for_run(cluster, namespace, "taker", timeout=120)["phase"] == "Succeeded"
    # A run naming a pool no watch has shown: read by name (get), found missing, and waits.
    lost = command_run("lost", "box", "echo lost", poolRef={"name": "nowhere"})
    lost["spec"].pop("sandboxRef")
    cluster.apply(lost, namespace)
    waiting = wait_for(
        lambda: condition(status_of(cluster, namespace, "agentrun", "lost"), "SandboxReady"),
        60, what="the run naming no pool waiting",
    )  # fmt: skip
    assert waiting["reason"] == "PoolNotFound", waiting
    cluster.apply(command_run("long", "box", "sleep 300"), namespace)
    wait_for_run(cluster, namespace, "long", ("Running",))
    cluster.kubectl("delete", "agentrun", "long", "-n", namespace, "--timeout=60s")
    cluster.apply(workspace("with-secret", secrets=[_secret_env()]), namespace)
    wait_for(
        lambda: status_of(cluster, namespace, "workspace", "with-secret").get("hash"),
        60,
        what="the Workspace with a Secret validated",
    )
    # Snapshots: box's, taken after its setup; a fork names it (get); a changed Workspace
    # supersedes it (delete).
    taken = wait_for(
        lambda: status_of(cluster, namespace, "sandbox", "box").get("snapshot"),
        60,
        what="box's snapshot",
    )
    # A user's own snapshot (not labelled as Paddock's, so not watched: read by name).
    mine = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": "mine"},
        "spec": {"source": {"persistentVolumeClaimName": "box-workspace"}},
    }
    cluster.apply(mine, namespace)
    cluster.apply(sandbox("fork", "app", restoreFrom={"volumeSnapshotName": "mine"}), namespace)
    assert wait_for_phase(cluster, namespace, "fork", "Ready")["restoredFrom"] == "mine"
    # A restore that cannot finish (its pod fits no node) is given up: its claim is deleted.
    stuck = sandbox("stuck", "app", nodeSelector={"paddock.dev/no-such-node": "x"})
    cluster.apply(stuck, namespace)
    wait_for(
        lambda: _restore_given_up(status_of(cluster, namespace, "sandbox", "stuck")),
        120,
        what="the restore given up",
    )
    cluster.apply(workspace("app", setup=["true"]), namespace)
    wait_for(
        lambda: get(cluster, namespace, "volumesnapshot", taken) is None,
        60,
        what="the superseded snapshot deleted",
    )
    # The files of an earlier spec of a Workspace, once no pod mounts them (delete).
    cluster.apply(workspace("brief"), namespace)
    cluster.apply(sandbox("short", "brief"), namespace)
    wait_for_phase(cluster, namespace, "short", "Ready")
    files = _files_of(cluster, namespace, "short")
    cluster.apply(workspace("brief", setup=["true"]), namespace)
    cluster.kubectl("delete", "sandbox", "short", "-n", namespace)
    wait_for(
        lambda: get(cluster, namespace, "configmap", files) is None,
        60,
        what="the files of the earlier spec deleted",
    )


def _files_of(cluster: Cluster, namespace: str, pod: str) -> str:
    found = get(cluster, namespace, "pod", pod) or {}
    (files,) = [v["configMap"]["name"] for v in found["spec"]["volumes"] if "configMap" in v]
    return str(files)


def _restore_given_up(status: dict[str, Any]) -> bool:
    restored = [c for c in status.get("conditions") or [] if c["type"] == "Restored"]
    return bool(restored) and restored[0]["reason"] == "RestoreFailed"


def _secret_env() -> dict[str, Any]:
    return {"name": "MCP_TOKEN", "secretKeyRef": {"name": "mcp", "key": "token"}}


@pytest.fixture
def short_restore_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator started after this gives a restore 15 s."""
    monkeypatch.setenv("PADDOCK_RESTORE_TIMEOUT_SECONDS", "15")


@pytest.fixture
def audit_start() -> datetime:
    """When the audit starts: before the operator of the test does (its fixture comes next)."""
    return datetime.now(UTC)


def test_the_operator_role_grants_only_what_the_operator_uses(
    cluster: Cluster,
    namespace: str,
    short_restore_timeout: None,
    audit_start: datetime,
    operator: Any,
) -> None:
    log = local.audit_log(local.default_state_dir())
    assert log.exists(), f"the local cluster keeps no audit log at {log}: restart it"
    drive_every_path(cluster, namespace)
    used, refused = audited(log, audit_start)
    assert refused == [], "the operator was refused what it needs"
    unused = granted() - used - set(NEEDED_UNSEEN)
    assert sorted(unused) == [], "granted but never used: remove from config/rbac/role.yaml"
    assert not (set(NEEDED_UNSEEN) & used), "now seen: no longer needs a reason above"
