"""Health as GitOps tools see it, on the local control plane: every kind in the states a
repository's objects reach, read by kstatus (sigs.k8s.io/cli-utils, what Flux's
kustomize-controller computes for its health checks, built from its module) and by the Argo CD
health script the chart ships, run in Argo CD's Lua engine (gopher-lua). A valid policy, a
Ready sandbox and pool and a run that succeeded are Current and Healthy; an invalid policy, a
run that failed and a run that can never start (its sandbox missing past the grace period)
are Failed and Degraded, with the reason a person acts on; a sandbox waiting for its
Workspace is InProgress and Progressing; a paused one Suspended to Argo CD. The objects are
recorded in tests/data/gitops-objects.json, which tests/unit/test_gitops_checks.py reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import gitops
from support.kube import ROOT, Cluster
from support.runs import command_run, wait_for_run
from support.sandboxes import get, merge_patch, sandbox, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = pytest.mark.integration
RECORDED = ROOT / "tests" / "data" / "gitops-objects.json"
POOL = {
    "apiVersion": "paddock.dev/v1alpha1",
    "kind": "SandboxPool",
    "metadata": {"name": "warm"},
    "spec": {"replicas": 1, "template": {"workspaceRef": {"name": "app"}}},
}


def _policy(name: str, **commands: Any) -> dict[str, Any]:
    spec = {"commands": {"default": "allow", **commands}}
    meta = {"name": name}
    return {"apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPolicy", "metadata": meta,
            "spec": spec}  # fmt: skip


@pytest.fixture
def quick_stall(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """The operator, in this process, with a grace period of 3 s for what runs wait for."""
    monkeypatch.setenv("PADDOCK_RUN_START_GRACE_SECONDS", "3")
    return request.getfixturevalue("operator")


def _pool_ready(cluster: Cluster, namespace: str) -> None:
    def ready() -> bool:
        pool = get(cluster, namespace, "sandboxpool", "warm") or {}
        return bool((pool.get("status") or {}).get("readyReplicas") == 1)

    wait_for(ready, 120, what="the pool's member Ready")


def _stalled(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    found = get(cluster, namespace, "agentrun", name) or {}
    conditions = (found.get("status") or {}).get("conditions") or []
    stalled = any(c["type"] == "Stalled" and c["status"] == "True" for c in conditions)
    return found if stalled else None


@pytest.fixture
def states(cluster: Cluster, namespace: str, quick_stall: Any) -> dict[str, Any]:
    """One object of each kind in each state, by "Kind/name", as the API server has them."""
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_policy("valid"), namespace)
    cluster.apply(_policy("ineffective", allow=["npm test && npm run lint"]), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "valid"}), namespace)
    cluster.apply(sandbox("orphan", "missing"), namespace)
    cluster.apply(sandbox("resting", "app"), namespace)
    cluster.apply(POOL, namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")
    wait_for_phase(cluster, namespace, "resting", "Ready")
    merge_patch(cluster, namespace, "sandbox", "resting", {"spec": {"lifecycle": {"paused": True}}})
    wait_for_phase(cluster, namespace, "resting", "Paused")
    cluster.apply(command_run("done", "box", "echo done"), namespace)
    cluster.apply(command_run("broken", "box", "exit 3"), namespace)
    cluster.apply(command_run("stranded", "nowhere", "echo never"), namespace)
    wait_for_run(cluster, namespace, "done")
    wait_for_run(cluster, namespace, "broken")
    wait_for(lambda: _stalled(cluster, namespace, "stranded"), 60, what="a stranded run")
    _pool_ready(cluster, namespace)
    found: dict[str, Any] = {}
    for kind, name in [
        ("workspace", "app"), ("sandboxpolicy", "valid"), ("sandboxpolicy", "ineffective"),
        ("sandbox", "box"), ("sandbox", "orphan"), ("sandbox", "resting"),
        ("sandboxpool", "warm"), ("agentrun", "done"), ("agentrun", "broken"),
        ("agentrun", "stranded"),
    ]:  # fmt: skip
        obj = wait_for(lambda k=kind, n=name: _reported(cluster, namespace, k, n), 60,
                       what=f"{kind} {name} reported on")  # fmt: skip
        found[f"{obj['kind']}/{name}"] = obj
    return found


def _reported(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    """The object once the operator reported on its generation (a status without Stalled
    is one from before)."""
    obj = get(cluster, namespace, kind, name) or {}
    status = obj.get("status") or {}
    types = {c["type"] for c in status.get("conditions") or []}
    seen = status.get("observedGeneration") == (obj.get("metadata") or {}).get("generation")
    return obj if seen and "Stalled" in types else None


def test_every_kind_reads_to_gitops_tools_as_what_it_is(
    cluster: Cluster, namespace: str, states: dict[str, Any]
) -> None:
    seen = gitops.check(list(states.values()))
    got = {key: (v["kstatus"], v["argo"]) for key, v in zip(states, seen, strict=True)}
    assert got == gitops.EXPECTED, json.dumps(seen, indent=2)
    said = dict(zip(states, seen, strict=True))
    # The reason a person acts on, where it is stuck.
    assert "RulesIneffective" in said["SandboxPolicy/ineffective"]["argoMessage"]
    assert "SandboxNotFound" in said["AgentRun/stranded"]["argoMessage"]
    assert "WorkspaceNotFound" in said["Sandbox/orphan"]["argoMessage"]
    for obj in states.values():  # every condition says which generation it describes
        generation = obj["metadata"]["generation"]
        assert obj["status"]["observedGeneration"] == generation
        assert {c["observedGeneration"] for c in obj["status"]["conditions"]} == {generation}
    # A finished run edited since (its time to live): it notes the new generation, and reads
    # as it did.
    merge_patch(cluster, namespace, "agentrun", "done", {"spec": {"ttlSecondsAfterFinished": 9000}})
    edited = wait_for(
        lambda: (r := get(cluster, namespace, "agentrun", "done") or {})
        .get("status", {}).get("observedGeneration") == 2 and r,
        30,
        what="the edited run's generation noted",
    )  # fmt: skip
    assert [v["kstatus"] for v in gitops.check([edited])] == ["Current"]
    if os.environ.get("PADDOCK_RECORD_GITOPS"):  # to record them again after a change
        RECORDED.write_text(json.dumps(gitops.recordable(states), indent=1, sort_keys=True) + "\n")


def test_what_a_repository_applies_does_not_drift_once_the_operator_has_reconciled_it(
    cluster: Cluster, namespace: str, operator: Any, tmp_path: Path
) -> None:
    """Applied as Flux applies (server-side, a field manager of its own), reconciled by the
    operator (the pool fills, the sandbox is set up), and compared again: nothing differs, so
    a repository applied again and again applies nothing."""
    manifests = [workspace("app"), _policy("valid"), POOL,
                 sandbox("box", "app", policyRef={"name": "valid"})]  # fmt: skip
    path = tmp_path / "repository.yaml"
    path.write_text(yaml.safe_dump_all(manifests))
    applied = ["--server-side", "--field-manager=gitops", "-n", namespace, "-f", str(path)]
    cluster.kubectl("apply", *applied)
    wait_for_phase(cluster, namespace, "box", "Ready")
    _pool_ready(cluster, namespace)
    diff = cluster.kubectl("diff", *applied, check=False)
    assert diff.returncode == 0, diff.stdout + diff.stderr
