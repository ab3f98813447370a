"""What the operator keeps of a pod it watches (``observe.pod_view``, which the watch cache keeps
in place of the pod): a fraction of the pod, and every decision made from it the same as from
the whole pod."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.kube.cache import ObjectCache
from paddock.sandboxes.decide import decide_sandbox
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.observe import pod_view
from paddock.sandboxes.plan import Create, Loaded
from support.pods import BOUND, pod, ready_pod, running, terminated, unscheduled
from support.pods import waiting as waiting_container

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
IMAGE = "localhost/sandbox:test"
SANDBOX = {
    "apiVersion": "paddock.dev/v1alpha1",
    "kind": "Sandbox",
    "metadata": {"name": "sbx", "namespace": "team", "uid": "uid-1", "generation": 1},
    "spec": {"workspaceRef": {"name": "ws"}, "policyRef": {"name": "pol"}},
    "status": {},
}
POLICY = SandboxPolicySpec.model_validate({"commands": {"default": "allow"}})
WORKSPACE = WorkspaceSpec.model_validate(
    {"setup": ["make"], "env": [{"name": "A", "value": "b"}], "instructions": "Be brief."}
)


def _world(**parts: Any) -> SandboxWorld:
    spec = SandboxSpec.model_validate(SANDBOX["spec"])
    base = SandboxWorld(
        SANDBOX,
        Loaded("sbx", spec),
        Loaded("ws", WORKSPACE, uid="ws-uid"),
        Loaded("pol", POLICY, uid="pol-uid"),
        namespace_uid="ns-uid",
    )
    return replace(base, **parts)


def _settled() -> tuple[SandboxWorld, Obj]:
    """A world whose files, fences and volume exist as they should, and the pod it creates."""
    made = [w.obj for w in decide_sandbox(_world(), IMAGE, NOW).writes if isinstance(w, Create)]
    kinds = {obj["kind"]: obj for obj in made}
    baseline, fence = [obj for obj in made if obj["kind"] == "NetworkPolicy"]
    world = _world(
        files=(kinds["ConfigMap"],),
        baseline=baseline,
        network_policy=fence,
        pvc={**kinds["PersistentVolumeClaim"], **BOUND},
    )
    (created,) = [w.obj for w in decide_sandbox(world, IMAGE, NOW).writes
                  if isinstance(w, Create) and w.obj["kind"] == "Pod"]  # fmt: skip
    return world, created


STATUSES = {
    "created": {},
    "starting": pod()["status"],
    "cloning": pod(init=[running("clone")])["status"],
    "clone failed": pod("Failed", init=[terminated("clone", 128, "no such ref")])["status"],
    "image pull": pod(containers=[waiting_container("sandbox", "ImagePullBackOff")])["status"],
    "evicted": pod("Failed", reason="Evicted", message="low on memory")["status"],
    "unschedulable": unscheduled("0/1 nodes are available")["status"],
    "ready": ready_pod()["status"],
}


@pytest.mark.parametrize("case", STATUSES)
def test_a_reconcile_decides_the_same_from_the_view_as_from_the_whole_pod(case: str) -> None:
    world, rendered = _settled()
    whole = {**rendered, "metadata": {**rendered["metadata"], "uid": "pod-uid",
             "resourceVersion": "7"}, "status": STATUSES[case]}  # fmt: skip
    from_whole = decide_sandbox(replace(world, pod=whole), IMAGE, NOW)
    from_view = decide_sandbox(replace(world, pod=pod_view(whole)), IMAGE, NOW)
    assert from_view.status == from_whole.status
    assert from_view.writes == from_whole.writes
    assert from_view.notices == from_whole.notices


def test_the_view_is_a_fraction_of_the_pod_and_the_cache_keeps_only_it() -> None:
    _, rendered = _settled()
    managed = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
    meta = {**rendered["metadata"], "resourceVersion": "7", "managedFields": managed}
    whole = {**rendered, "status": ready_pod()["status"], "metadata": meta}
    view = pod_view(whole)
    assert view["spec"] == {"volumes": whole["spec"]["volumes"]}  # what the files sweep reads
    assert view["status"] == whole["status"]
    assert "managedFields" not in view["metadata"]
    assert len(json.dumps(view)) * 3 < len(json.dumps(whole))

    cache = ObjectCache()
    cache.keep("Pod", pod_view)
    cache.seen("ADDED", whole)
    assert cache.peek("Pod", meta["namespace"], meta["name"]) == view
