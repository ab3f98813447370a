"""The Sandbox lifecycle as a table: for each observed world, the phase, the Ready reason, the
writes and the Events that the pure decision plans (docs/sandboxes.md lists the same)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.policy.choice import choose_policy
from paddock.render.network_policy import ClusterNetwork, Gateway
from paddock.sandboxes.decide import decide_sandbox
from paddock.sandboxes.inputs import SandboxWorld
from paddock.sandboxes.plan import Create, Delete, Loaded, Patch, Plan
from paddock.sandboxes.refusals import refused
from paddock.vocab import names
from paddock.vocab.names import ACTIVITY_ANNOTATION
from support.pods import BOUND, PENDING_PVC, pod, ready_pod, running, terminated, unscheduled
from support.pods import waiting as waiting_container

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)
IMAGE = "localhost/sandbox:test"


def sandbox(spec: Obj | None = None, status: Obj | None = None, **meta: Any) -> Obj:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {
            "name": "sbx",
            "namespace": "team",
            "uid": "uid-1",
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            **meta,
        },
        "spec": spec or {"workspaceRef": {"name": "ws"}},
        "status": status or {},
    }


def world(body: Obj | None = None, **parts: Any) -> SandboxWorld:
    """A world where everything the sandbox needs exists, and its owned objects do not yet."""
    body = body or sandbox()
    spec = SandboxSpec.model_validate(body["spec"])
    base = SandboxWorld(
        body,
        Loaded("sbx", spec),
        Loaded("ws", WorkspaceSpec(setup=["make"]), uid="ws-uid"),
        Loaded("pol", SandboxPolicySpec()) if spec.policy_ref else None,
        namespace_uid="ns-uid",
    )
    return replace(base, **parts)


def settled(**parts: Any) -> SandboxWorld:
    """A world whose ConfigMap, NetworkPolicy and PVC exist as they should."""
    first = decide_sandbox(world(), IMAGE, NOW)
    made = {w.obj["metadata"]["name"]: w.obj for w in first.writes if isinstance(w, Create)}
    volume = parts.pop("volume", BOUND)
    owned = {
        "files": tuple(obj for obj in made.values() if obj["kind"] == "ConfigMap"),
        "baseline": made["paddock-baseline"],
        "network_policy": made["paddock-no-policy"],
        "pvc": {**made["sbx-workspace"], **volume},
    }
    body = parts.pop("sandbox", None)
    return world(body, **(owned | parts))


def decide(w: SandboxWorld, now: datetime = NOW) -> Plan:
    return decide_sandbox(w, IMAGE, now)


def ready(plan: Plan) -> Obj:
    return next(c for c in plan.status.to_api()["conditions"] if c["type"] == "Ready")


def kinds(plan: Plan, write: type) -> list[str]:
    return sorted(
        (w.obj["kind"] if isinstance(w, Create) else w.kind)
        for w in plan.writes
        if isinstance(w, write)
    )


def _ending(pod: Obj) -> Obj:
    return {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:59:00Z"}}


# Four files of 256 KiB: over the 900 KiB a sandbox's files ConfigMap may hold.
BIG = WorkspaceSpec.model_validate(
    {
        "skills": [
            {"name": f"f{i}", "file": {"path": f"f{i}", "content": "x" * 262_144}} for i in range(4)
        ]
    }
)
CASES = {
    "deleting": (
        world(sandbox(deletionTimestamp="2026-01-01T00:59:00Z")),
        "Terminating",
        None,
    ),
    "invalid spec": (
        world(spec=Loaded("sbx", error="spec.storage.size: bad")),
        "Failed",
        "InvalidSpec",
    ),
    "workspace not found": (world(workspace=Loaded("ws")), "Pending", "WorkspaceNotFound"),
    "workspace invalid": (
        world(workspace=Loaded("ws", error="setup: bad")),
        "Pending",
        "WorkspaceInvalid",
    ),
    "policy not found": (
        world(
            sandbox({"workspaceRef": {"name": "ws"}, "policyRef": {"name": "pol"}}),
            policy=Loaded("pol"),
        ),
        "Pending",
        "PolicyNotFound",
    ),
    "policy invalid": (
        world(
            sandbox({"workspaceRef": {"name": "ws"}, "policyRef": {"name": "pol"}}),
            policy=Loaded("pol", error="commands: bad"),
        ),
        "Pending",
        "PolicyInvalid",
    ),
    "secret not found": (world(missing_secrets=["token/key"]), "Pending", "SecretNotFound"),
    "workspace too large": (
        world(workspace=Loaded("ws", BIG)),
        "Failed",
        "WorkspaceTooLarge",
    ),
    "no pod yet: created, and said to be starting": (settled(), "Provisioning", "Starting"),
    "clone failed": (
        settled(pod=pod("Failed", init=[terminated("clone", 128, "clone failed: x at main")])),
        "Failed",
        "CloneFailed",
    ),
    "projection failed": (
        settled(pod=pod("Failed", init=[terminated("clone", 0), terminated("project", 1)])),
        "Failed",
        "ProjectionFailed",
    ),
    "setup failed": (
        settled(
            pod=pod("Failed", init=[terminated("setup", 2, "setup step failed: make (exit 2)")])
        ),
        "Failed",
        "SetupFailed",
    ),
    "other init container failed": (
        settled(pod=pod("Failed", init=[terminated("extra", 3)])),
        "Failed",
        "InitFailed",
    ),
    "image pull failed": (
        settled(pod=pod(containers=[waiting_container("sandbox", "ImagePullBackOff")])),
        "Provisioning",
        "ImagePullFailed",
    ),
    "pod evicted": (
        settled(pod=pod("Failed", reason="Evicted", message="low on memory")),
        "Provisioning",
        "PodEvicted",
    ),
    "pod failed": (settled(pod=pod("Failed", message="node lost")), "Provisioning", "PodFailed"),
    "volume not bound": (
        settled(
            pod=unscheduled("pod has unbound immediate PersistentVolumeClaims."), volume=PENDING_PVC
        ),
        "Provisioning",
        "VolumeNotBound",
    ),
    "unschedulable": (
        settled(pod=unscheduled("0/2 nodes are available: insufficient cpu.")),
        "Provisioning",
        "Unschedulable",
    ),
    "no node matches, the volume waiting for one": (
        settled(
            pod=unscheduled("0/2 nodes are available: 2 node(s) didn't match Pod's node selector."),
            volume=PENDING_PVC,
        ),
        "Provisioning",
        "Unschedulable",
    ),
    "starting": (settled(pod=pod()), "Provisioning", "Starting"),
    "setting up": (
        settled(pod=pod(init=[terminated("clone", 0), running("setup")])),
        "SettingUp",
        "SettingUp",
    ),
    "set up, the container starting": (
        settled(pod=pod(init=[terminated("project", 0), terminated("setup", 0)])),
        "SettingUp",
        "Starting",
    ),
    "ready": (settled(pod=ready_pod()), "Ready", "Ready"),
    # Resumed while the pod a pause deleted still runs (and says Ready): not Ready on it.
    "its earlier pod still ending": (
        settled(pod=_ending(ready_pod())),
        "Provisioning",
        "Starting",
    ),
    "paused by the spec": (
        world(
            sandbox({"workspaceRef": {"name": "ws"}, "lifecycle": {"paused": True}}),
            pod=ready_pod(),
        ),
        "Paused",
        "Paused",
    ),
    "idle past its timeout": (
        world(
            sandbox(
                {"workspaceRef": {"name": "ws"}, "lifecycle": {"idleTimeout": "30m"}},
                annotations={ACTIVITY_ANNOTATION: "2026-01-01T00:10:00Z"},
            ),
            pod=ready_pod(),
        ),
        "Paused",
        "IdleTimeout",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_the_lifecycle_table(case: str) -> None:
    observed, phase, reason = CASES[case]
    plan = decide(observed)
    status = plan.status.to_api()
    assert status["phase"] == phase
    assert status["observedGeneration"] == 3
    if reason is not None:
        assert ready(plan)["reason"] == reason
        assert ready(plan)["observedGeneration"] == 3
    # A change: one Event (besides, on the first Ready, the snapshot's: none fits here), but
    # none for a step of progress towards Ready, unless it is a problem.
    phase_events = [n.reason for n in plan.notices if n.reason != "SnapshotsUnsupported"]
    progress = phase in ("Provisioning", "SettingUp") and (reason or "") not in WARNINGS
    assert phase_events == ([] if progress else [reason or "Deleting"])


WARNINGS = {
    "InvalidSpec",
    "WorkspaceNotFound",
    "WorkspaceInvalid",
    "PolicyNotFound",
    "PolicyInvalid",
    "SecretNotFound",
    "WorkspaceTooLarge",
    "CloneFailed",
    "ProjectionFailed",
    "SetupFailed",
    "InitFailed",
    "ImagePullFailed",
    "PodEvicted",
    "PodFailed",
    "VolumeNotBound",
    "Unschedulable",
}


@pytest.mark.parametrize("case", CASES)
def test_a_reason_a_user_must_act_on_is_a_warning(case: str) -> None:
    observed, phase, reason = CASES[case]
    notices = decide(observed).notices
    assert notices or (phase in ("Provisioning", "SettingUp") and reason not in WARNINGS)
    for notice in notices:
        assert notice.type == ("Warning" if notice.reason in WARNINGS else "Normal")


def test_missing_inputs_are_looked_for_again_and_nothing_is_created() -> None:
    for case in ("workspace not found", "policy not found", "secret not found"):
        plan = decide(CASES[case][0])
        assert plan.retry_after == 15.0
        assert plan.writes == []


def controller(obj: Obj) -> tuple[str, str]:
    (owner,) = obj["metadata"]["ownerReferences"]
    assert owner["controller"] is True
    return owner["kind"], owner["uid"]


OPEN = {"commands": {"default": "allow"}}  # lets the Workspace's setup run
# How a sandbox chooses its policy -> the fence its pod is under, and what controls it.
FENCES = {
    "no policy": ({}, None, "paddock-no-policy", ("Namespace", "ns-uid")),
    "its namespace's": ({"policyRef": {"name": "pol"}}, None, "pol.paddock-policy",
                        ("SandboxPolicy", "pol-uid")),
    "the default, of another namespace": ({}, "platform/pol", "pol.platform.paddock-default",
                                          ("Namespace", "ns-uid")),
    "inline": ({"policy": OPEN}, None, "sbx-egress", ("Sandbox", "uid-1")),
}  # fmt: skip


@pytest.mark.parametrize("case", FENCES)
def test_a_new_sandbox_makes_its_files_volume_and_pod_and_is_fenced_in_first(case: str) -> None:
    extra, default, fence, owner = FENCES[case]
    body = sandbox({"workspaceRef": {"name": "ws"}, **extra})
    choice = choose_policy(SandboxSpec.model_validate(body["spec"]), "team", default)
    policy = (
        Loaded("pol", SandboxPolicySpec.model_validate(OPEN), uid="pol-uid")
        if choice.name
        else None
    )
    plan = decide(world(body, policy_choice=choice, policy=policy))
    made = [w.obj for w in plan.writes if isinstance(w, Create)]
    assert len(made) == len(plan.writes)
    by_name = {obj["metadata"]["name"]: obj for obj in made}
    files = made[0]["metadata"]["name"]
    assert files.startswith("ws.")  # the Workspace's (see below)
    # The baseline and the fence come before the pod, which no write leaves unfenced.
    assert [obj["metadata"]["name"] for obj in made] == [
        files, "paddock-baseline", fence, "sbx-workspace", "sbx",
    ]  # fmt: skip
    for name in ("sbx-workspace", "sbx"):
        assert controller(by_name[name]) == ("Sandbox", "uid-1")
    assert controller(by_name["paddock-baseline"]) == ("Namespace", "ns-uid")
    assert controller(by_name[fence]) == owner
    label = by_name["sbx"]["metadata"]["labels"][names.NETWORK_LABEL]
    assert by_name[fence]["spec"]["podSelector"] == {"matchLabels": {names.NETWORK_LABEL: label}}


def test_a_pod_moves_to_its_new_policys_fence_by_its_label_and_its_own_fence_goes_last() -> None:
    base = settled(pod=ready_pod())
    body = sandbox({"workspaceRef": {"name": "ws"}, "policyRef": {"name": "pol"}})
    choice = choose_policy(SandboxSpec.model_validate(body["spec"]), "team", None)
    own = {"kind": "NetworkPolicy", "metadata": {
        "name": "sbx-egress", "uid": "np-uid", "ownerReferences": [
            {"kind": "Sandbox", "name": "sbx", "uid": "uid-1", "controller": True}]}}  # fmt: skip
    moved = replace(
        base,
        sandbox=body,
        policy_choice=choice,
        policy=Loaded("pol", SandboxPolicySpec.model_validate(OPEN), uid="pol-uid"),
        network_policy=None,
        own_network_policy=own,
    )
    plan = decide(moved)
    fence = next(w for w in plan.writes if isinstance(w, Create))
    relabel = next(w for w in plan.writes if isinstance(w, Patch))
    assert fence.obj["metadata"]["name"] == "pol.paddock-policy"
    assert (relabel.kind, relabel.body["metadata"]["labels"]) == (
        "Pod",
        {names.NETWORK_LABEL: "pol.paddock-policy"},
    )
    assert plan.writes[-1] == Delete("NetworkPolicy", "sbx-egress", "np-uid")
    assert plan.writes.index(fence) < plan.writes.index(relabel)
    # Someone else's NetworkPolicy of that name is not the sandbox's to delete.
    theirs = {**own, "metadata": {**own["metadata"], "ownerReferences": []}}
    assert (
        Delete("NetworkPolicy", "sbx-egress", "np-uid")
        not in decide(replace(moved, own_network_policy=theirs)).writes
    )


def test_a_shared_fence_someone_else_controls_is_a_name_conflict() -> None:
    base = settled(pod=ready_pod())
    assert base.baseline is not None
    taken = {**base.baseline, "metadata": {**base.baseline["metadata"], "ownerReferences": []}}
    plan = decide(replace(base, baseline=taken))
    assert ready(plan)["reason"] == "NameConflict"
    assert "NetworkPolicy paddock-baseline exists and does not belong" in ready(plan)["message"]
    assert plan.writes == []


def test_a_settled_sandbox_plans_no_write_and_no_event_the_second_time() -> None:
    first = decide(settled(pod=ready_pod()))
    again = decide(settled(pod=ready_pod(), sandbox=sandbox(status=first.status.to_api())))
    assert again.writes == []
    assert again.notices == []
    assert again.status.to_api() == first.status.to_api()


def test_a_drifted_fence_is_patched_back() -> None:
    base = settled(pod=ready_pod())
    assert base.network_policy is not None
    drifted = replace(base, network_policy={**base.network_policy, "spec": {"podSelector": {}}})
    (patch,) = [w for w in decide(drifted).writes if isinstance(w, Patch)]
    assert (patch.kind, patch.name) == ("NetworkPolicy", "paddock-no-policy")
    assert patch.body["spec"] == base.network_policy["spec"]


def test_the_files_configmap_is_the_workspaces_named_by_what_it_holds_and_immutable() -> None:
    first = decide(world())
    (files,) = [
        w.obj for w in first.writes if isinstance(w, Create) and w.obj["kind"] == "ConfigMap"
    ]
    assert files["immutable"] is True
    assert controller(files) == ("Workspace", "ws-uid")
    (volume,) = [v for v in created_pod(first)["spec"]["volumes"] if "configMap" in v]
    assert volume["configMap"]["name"] == files["metadata"]["name"]
    # Another sandbox of the Workspace mounts the same; a changed Workspace, another one.
    other = decide(world(sandbox(name="other")))
    assert files in [w.obj for w in other.writes if isinstance(w, Create)]
    changed = decide(world(workspace=Loaded("ws", WorkspaceSpec(setup=["make all"]), uid="ws-uid")))
    assert files not in [w.obj for w in changed.writes if isinstance(w, Create)]
    # One that exists is not made again, whatever sandbox looks.
    assert "ConfigMap" not in kinds(decide(world(files=(files,))), Create)


def created_pod(plan: Plan) -> Obj:
    (pod,) = [w.obj for w in plan.writes if isinstance(w, Create) and w.obj["kind"] == "Pod"]
    return pod


def test_a_pod_not_yet_started_whose_files_are_gone_is_made_again() -> None:
    base = settled(pod=pod("Pending"))
    gone = {"name": "files", "configMap": {"name": "ws.0123456789abcdef.paddock-files"}}
    stranded = {**base.pod, "spec": {"volumes": [gone]}}
    assert kinds(decide(replace(base, pod=stranded)), Delete) == ["Pod"]
    running = {**stranded, "status": {"phase": "Running"}}  # mounted already: kept
    assert "Pod" not in kinds(decide(replace(base, pod=running)), Delete)


def test_pausing_deletes_the_pod_and_keeps_the_volume() -> None:
    plan = decide(CASES["paused by the spec"][0])
    assert kinds(plan, Delete) == ["Pod"]
    assert "PersistentVolumeClaim" not in kinds(plan, Delete)


def test_an_evicted_pod_is_deleted_to_be_recreated_without_setup() -> None:
    plan = decide(CASES["pod evicted"][0])
    assert kinds(plan, Delete) == ["Pod"]


def test_ready_records_timings_and_setup_complete() -> None:
    plan = decide(settled(pod=ready_pod()))
    status = plan.status.to_api()
    assert status["timings"] == {
        "readyAt": "2026-01-01T00:00:05Z",
        "readySeconds": 5.0,
        "setupSeconds": 4.0,
    }
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["SetupComplete"]["status"] == "True"
    assert conditions["VolumeBound"]["status"] == "True"
    assert status["workspaceHash"]


def test_a_pod_recreated_after_setup_runs_no_init_container() -> None:
    prepared = decide(settled(pod=ready_pod())).status.to_api()
    plan = decide(settled(sandbox=sandbox(status=prepared)))
    (created,) = [w.obj for w in plan.writes if isinstance(w, Create)]
    assert created["kind"] == "Pod"
    assert [c["name"] for c in created["spec"]["initContainers"]] == ["gate"]  # the sidecar


def test_a_changed_workspace_is_reported_not_re_prepared() -> None:
    prepared = decide(settled(pod=ready_pod())).status.to_api()
    changed = settled(
        sandbox=sandbox(status=prepared),
        pod=ready_pod(),
        workspace=Loaded("ws", WorkspaceSpec(setup=["make", "make test"])),
    )
    status = decide(changed).status.to_api()
    up_to_date = next(c for c in status["conditions"] if c["type"] == "UpToDate")
    assert (up_to_date["status"], up_to_date["reason"]) == ("False", "WorkspaceChanged")
    assert status["workspaceHash"] == prepared["workspaceHash"]


def test_activity_after_an_idle_pause_resumes_the_sandbox() -> None:
    spec = {"workspaceRef": {"name": "ws"}, "lifecycle": {"idleTimeout": "30m"}}
    idle = settled(
        sandbox=sandbox(spec, annotations={ACTIVITY_ANNOTATION: "2026-01-01T00:10:00Z"}),
        pod=ready_pod(),
    )
    paused = decide(idle).status.to_api()
    assert paused["phase"] == "Paused"
    later = NOW + timedelta(minutes=5)
    still = settled(
        sandbox=sandbox(spec, paused, annotations={ACTIVITY_ANNOTATION: "2026-01-01T00:10:00Z"})
    )
    assert decide(still, later).status.to_api()["phase"] == "Paused"
    touched = settled(
        sandbox=sandbox(spec, paused, annotations={ACTIVITY_ANNOTATION: "2026-01-01T01:04:00Z"})
    )
    resumed = decide(touched, later)
    assert resumed.status.to_api()["phase"] == "Provisioning"
    assert kinds(resumed, Create) == ["Pod"]


def test_the_idle_clock_runs_only_while_the_pod_serves_and_from_its_ready() -> None:
    # Touched 50 minutes ago with a 30-minute timeout: a pod still starting (a resume slower
    # than the timeout) is not paused again; one Ready 20 minutes ago is not idle yet; one
    # Ready 40 minutes ago is.
    spec = {"workspaceRef": {"name": "ws"}, "lifecycle": {"idleTimeout": "30m"}}
    body = sandbox(spec, annotations={ACTIVITY_ANNOTATION: "2026-01-01T00:10:00Z"})
    starting = decide(settled(sandbox=body, pod=pod("Pending")))
    assert starting.status.to_api()["phase"] != "Paused"
    recent = decide(settled(sandbox=body, pod=ready_pod("2026-01-01T00:40:00Z")))
    assert recent.status.to_api()["phase"] == "Ready"
    idle = decide(settled(sandbox=body, pod=ready_pod("2026-01-01T00:20:00Z")))
    assert idle.status.to_api()["phase"] == "Paused"


THREAD_LABELS = {"app.kubernetes.io/managed-by": "paddock", "paddock.dev/thread-key": "abc"}
LAST_ACTIVE = {ACTIVITY_ANNOTATION: "2026-01-01T00:00:00Z"}  # an hour before NOW
HOUR = 3600


@pytest.mark.parametrize(
    ("labels", "limit", "paused", "deleted"),
    [
        (THREAD_LABELS, HOUR, False, True),
        (THREAD_LABELS, 2 * HOUR, False, False),
        (THREAD_LABELS, None, False, False),  # the setting is never
        (THREAD_LABELS, HOUR, True, False),  # a person paused it
        ({"paddock.dev/thread-key": "abc"}, HOUR, False, False),  # not made by Paddock
        ({"app.kubernetes.io/managed-by": "paddock"}, HOUR, False, False),  # no thread's
    ],
)
def test_a_threads_sandbox_idle_longer_than_the_limit_is_deleted(
    labels: dict[str, str], limit: int | None, paused: bool, deleted: bool
) -> None:
    spec = {"workspaceRef": {"name": "ws"}, "lifecycle": {"paused": paused}}
    body = sandbox(spec, labels=labels, annotations=LAST_ACTIVE)
    plan = decide(settled(sandbox=body, pod=ready_pod(), thread_idle_limit=limit))
    gone = [w for w in plan.writes if isinstance(w, Delete) and w.kind == "Sandbox"]
    if not deleted:
        assert gone == []
        assert plan.status.to_api()["phase"] != "Terminating"
        return
    assert gone == [Delete("Sandbox", "sbx", "uid-1")]
    assert (plan.status.to_api()["phase"], ready(plan)["reason"]) == ("Terminating", "IdleExpired")
    assert [n.reason for n in plan.notices] == ["IdleExpired"]


def test_a_threads_sandbox_is_looked_at_again_when_its_idle_limit_passes() -> None:
    body = sandbox(labels=THREAD_LABELS, annotations=LAST_ACTIVE)
    plan = decide(settled(sandbox=body, pod=ready_pod(), thread_idle_limit=2 * HOUR))
    assert plan.retry_after == HOUR


FOREIGN = {
    "pod": ("Pod", lambda w: {"pod": ready_pod(owner=None)}),
    "pvc": (
        "PersistentVolumeClaim",
        lambda w: {"pvc": {**w.pvc, "metadata": {**w.pvc["metadata"], "ownerReferences": []}}},
    ),
    "files": (
        "ConfigMap",
        lambda w: {
            "files": ({**w.files[0], "metadata": {"name": w.files[0]["metadata"]["name"]}},)
        },
    ),
    "network_policy": (
        "NetworkPolicy",
        lambda w: {
            "network_policy": {
                **w.network_policy,
                "metadata": {
                    "name": "sbx-egress",
                    "ownerReferences": [{"kind": "Sandbox", "uid": "other", "controller": True}],
                },
            }
        },
    ),
}


@pytest.mark.parametrize("part", FOREIGN)
def test_a_name_held_by_another_object_is_a_conflict_and_nothing_is_touched(part: str) -> None:
    kind, foreign = FOREIGN[part]
    base = settled(pod=ready_pod())
    plan = decide(replace(base, **foreign(base)))
    assert plan.writes == []
    assert plan.status.to_api()["phase"] == "Pending"
    assert ready(plan)["reason"] == "NameConflict"
    assert ready(plan)["message"].startswith(f"{kind} ")
    assert plan.retry_after == 30.0
    (notice,) = plan.notices
    assert notice.type == "Warning"


def test_a_paused_sandbox_deletes_only_its_own_pod_as_read() -> None:
    (delete,) = [w for w in decide(CASES["paused by the spec"][0]).writes if isinstance(w, Delete)]
    assert (delete.kind, delete.name, delete.uid) == ("Pod", "sbx", "pod-sbx")


def test_a_drift_patch_carries_the_version_it_was_read_at() -> None:
    base = settled(pod=ready_pod())
    assert base.network_policy is not None
    drifted = {**base.network_policy, "spec": {}, "metadata": {**base.network_policy["metadata"]}}
    drifted["metadata"]["resourceVersion"] = "41"
    plan = decide(replace(base, network_policy=drifted))
    (patch,) = [w for w in plan.writes if isinstance(w, Patch)]
    assert patch.body["metadata"] == {"resourceVersion": "41"}


@pytest.mark.parametrize(("invalid", "phase"), [(True, "Failed"), (False, "Pending")])
def test_a_refused_write_is_reported_in_the_servers_words(invalid: bool, phase: str) -> None:
    observed = settled()
    plan = decide(observed)
    (create,) = plan.writes
    message = 'Pod "sbx" is invalid: spec.containers[0].image: Invalid value: "bad image"'
    failed = refused(observed, plan, create, message, invalid=invalid, now=NOW, retry_after=40)
    status = failed.status.to_api()
    assert status["phase"] == phase
    assert ready(failed)["reason"] == "PodRefused"
    assert ready(failed)["message"] == f"The API server refused to create Pod sbx: {message}"
    assert failed.retry_after == 40
    assert [(n.type, n.reason) for n in failed.notices] == [("Warning", "PodRefused")]


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    first = decide(settled(pod=pod())).status.to_api()
    later = decide(settled(sandbox=sandbox(status=first), pod=pod()), NOW + timedelta(hours=1))
    assert ready(later)["lastTransitionTime"] == "2026-01-01T01:00:00Z"


def test_objects_as_the_server_stores_them_are_not_patched_again() -> None:
    """The server drops a NetworkPolicy's empty ``ingress``: that is no drift to patch."""
    w = settled(pod=ready_pod())
    stored = json.loads(json.dumps(w.network_policy))
    del stored["spec"]["ingress"]
    stored["metadata"]["resourceVersion"] = "7"
    assert kinds(decide(replace(w, network_policy=stored)), Patch) == []
    stored["spec"]["egress"] = []
    assert kinds(decide(replace(w, network_policy=stored)), Patch) == ["NetworkPolicy"]


def _hosts_world(gateway: Gateway | None) -> SandboxWorld:
    policy = {"commands": {"default": "allow"}, "network": {"hosts": {"allow": ["x.io"]}}}
    body = sandbox(spec={"workspaceRef": {"name": "ws"}, "policy": policy})
    choice = choose_policy(SandboxSpec.model_validate(body["spec"]), "team", None)
    return world(body, policy_choice=choice, network=ClusterNetwork(gateway=gateway))


def test_a_policy_with_hosts_says_whether_a_gateway_is_in_the_way() -> None:
    gateway = Gateway(proxy="http://192.0.2.9:3128", port=3128, cidrs=("192.0.2.9",))
    through = decide(_hosts_world(gateway))
    condition = next(
        c for c in through.status.to_api()["conditions"] if c["type"] == "EgressGateway"
    )
    assert (condition["status"], condition["reason"]) == ("True", "ThroughGateway")
    assert "ThroughGateway" not in [n.reason for n in through.notices]  # as meant: no Event
    pod = next(w.obj for w in through.writes if w.obj["kind"] == "Pod")
    # Every container that runs the workspace's code; the gate's sidecar reaches nothing.
    for container in pod["spec"]["containers"] + pod["spec"]["initContainers"]:
        env = {var["name"]: var.get("value") for var in container["env"]}
        proxy = "http://192.0.2.9:3128" if container["name"] != "gate" else None
        assert env.get("HTTPS_PROXY") == env.get("http_proxy") == proxy, container["name"]

    alone = decide(_hosts_world(None))
    condition = next(c for c in alone.status.to_api()["conditions"] if c["type"] == "EgressGateway")
    assert (condition["status"], condition["reason"]) == ("False", "NoGateway")
    assert [n.reason for n in alone.notices if n.reason == "NoGateway"] == ["NoGateway"]
    pod = next(w.obj for w in alone.writes if w.obj["kind"] == "Pod")
    assert not any("HTTPS_PROXY" in str(c["env"]) for c in pod["spec"]["containers"])
    assert "reaches no host by name" in condition["message"]
    fences = [w.obj for w in alone.writes if w.obj["kind"] == "NetworkPolicy"]
    assert fences, alone.writes
    assert "0.0.0.0/0" not in str(fences)  # fails closed
    assert "::/0" not in str(fences)
    without_hosts = decide(world(network=ClusterNetwork(gateway=gateway)))
    assert "EgressGateway" not in str(without_hosts.status.to_api())


def test_the_model_route_is_reached_without_the_proxy() -> None:
    gateway = Gateway(proxy="http://192.0.2.9:3128", port=3128, model_port=3130,
                      model_host="gw.paddock.svc", cidrs=("192.0.2.9",))  # fmt: skip
    pod = next(w.obj for w in decide(_hosts_world(gateway)).writes if w.obj["kind"] == "Pod")
    sandbox_container = next(c for c in pod["spec"]["containers"] if c["name"] == "sandbox")
    env = {var["name"]: var.get("value") for var in sandbox_container["env"]}
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost,127.0.0.1,::1,gw.paddock.svc"


def test_a_pod_still_ending_is_neither_used_nor_replaced_until_it_is_gone() -> None:
    plan = decide(settled(pod=_ending(ready_pod())))
    assert ready(plan)["status"] == "False"
    assert "Pod" not in kinds(plan, Create)
    assert "Pod" not in kinds(plan, Delete)
    assert "Pod" in kinds(decide(settled()), Create)  # once it is gone, a new one
