"""From the observed pod and PVC of a sandbox to its phase, reason and timings. Pure.

The checks run in order of what a person must hear about first: an init container that
failed, an image that cannot be pulled, a pod that stopped, a pod that cannot be scheduled,
and only then progress (ready, setting up, starting).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from paddock.api.reasons import SandboxReason as R
from paddock.api.sandbox import SandboxPhase
from paddock.times import parse_time
from paddock.vocab.names import GATE_CONTAINER

Obj = dict[str, Any]

VOLUME_WORDS = ("persistentvolumeclaim", "persistent volume", "volume node affinity")
IMAGE_PULL_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
INIT_FAILURE_REASONS = {
    "clone": (
        R.CLONE_FAILED,
        "Check the repository URL and ref in the Workspace, and the token Secret for a "
        "private repository.",
    ),
    "project": (
        R.PROJECTION_FAILED,
        "Check the skills of the Workspace (git skill URLs and refs, file paths).",
    ),
    "setup": (
        R.SETUP_FAILED,
        "Fix the setup step in the Workspace; the sandbox is prepared again when the "
        "Workspace changes or the Sandbox is recreated.",
    ),
}


@dataclass
class Observation:
    """What the pod and PVC say, as Paddock's status vocabulary."""

    phase: SandboxPhase
    reason: R
    message: str
    ready: bool = False
    setup_complete: bool | None = None
    volume_bound: bool | None = None
    failed_permanently: bool = False
    recreate_pod: bool = False
    setup_seconds: float | None = None
    ready_at: datetime | None = None


def setup_seconds(pod: Obj) -> float | None:
    """From the first init container's start to the last one's finish."""
    states = [s.get("state", {}).get("terminated") for s in _init_statuses(pod)]
    if not states or not all(states):
        return None
    starts = [parse_time(s.get("startedAt")) for s in states if s]
    ends = [parse_time(s.get("finishedAt")) for s in states if s]
    if None in starts or None in ends:
        return None
    started = min(t for t in starts if t is not None)
    finished = max(t for t in ends if t is not None)
    return max((finished - started).total_seconds(), 0.0)


def pod_view(pod: Obj) -> Obj:
    """All the operator keeps of a sandbox pod it watches: what a reconcile reads (its
    metadata, status and volumes), not its containers, which are most of its size."""
    meta = {key: value for key, value in pod["metadata"].items() if key != "managedFields"}
    volumes = (pod.get("spec") or {}).get("volumes")
    return {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": pod["kind"],
        "metadata": meta,
        "spec": {} if volumes is None else {"volumes": volumes},
        "status": pod.get("status") or {},
    }


def _init_statuses(pod: Obj) -> list[Obj]:
    """The init containers that prepare the workspace (not the gate's sidecar, which runs
    for as long as the pod)."""
    statuses = pod.get("status", {}).get("initContainerStatuses") or []
    return [s for s in statuses if s.get("name") != GATE_CONTAINER]


def _container_statuses(pod: Obj) -> list[Obj]:
    return list(pod.get("status", {}).get("containerStatuses") or [])


def _pod_condition(pod: Obj, type_: str) -> Obj | None:
    conditions = pod.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def serving(pod: Obj | None) -> Observation | None:
    """The pod as observed while it is Running and Ready; None while it starts, stops or is
    gone."""
    seen = None if pod is None else _progress(pod, None)
    return seen if seen is not None and seen.ready else None


def observe(pod: Obj, pvc: Obj | None) -> Observation:
    """The sandbox's state as its pod and PVC show it (pause and deletion are decided by the
    caller, which knows the spec). A pod being created is observed as one with no status."""
    bound = None if pvc is None else pvc.get("status", {}).get("phase") == "Bound"
    for check in (_failed_init, _image_pull, _stopped, _unschedulable, _progress):
        seen = check(pod, bound)
        if seen is not None:
            return seen
    raise AssertionError("_progress always observes something")  # pragma: no cover


def _failed_init(pod: Obj, bound: bool | None) -> Observation | None:
    for init in _init_statuses(pod):
        terminated = init.get("state", {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            reason, advice = INIT_FAILURE_REASONS.get(
                init["name"], (R.INIT_FAILED, "See the init container's log.")
            )
            detail = (terminated.get("message") or "").strip() or (
                f"init container {init['name']} exited {terminated.get('exitCode')}"
            )
            return Observation(
                SandboxPhase.FAILED,
                reason,
                f"{detail}\n{advice}",
                setup_complete=False,
                volume_bound=bound,
                failed_permanently=True,
            )
    return None


def _image_pull(pod: Obj, bound: bool | None) -> Observation | None:
    for container in _init_statuses(pod) + _container_statuses(pod):
        waiting = container.get("state", {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return Observation(
                SandboxPhase.PROVISIONING,
                R.IMAGE_PULL_FAILED,
                f"The image {container.get('image')} cannot be pulled "
                f"({waiting.get('reason')}: {waiting.get('message', '')}). Check the image name "
                "in the Workspace or Sandbox and the registry's credentials.",
                volume_bound=bound,
            )
    return None


def _stopped(pod: Obj, bound: bool | None) -> Observation | None:
    status = pod.get("status", {})
    if status.get("phase") != "Failed":
        return None
    why = status.get("reason") or "PodFailed"
    return Observation(
        SandboxPhase.PROVISIONING,
        R.POD_EVICTED if why == "Evicted" else R.POD_FAILED,
        f"The sandbox pod stopped ({why}: {status.get('message', '')}); recreating it "
        "from the workspace volume.",
        volume_bound=bound,
        recreate_pod=True,
    )


def _unschedulable(pod: Obj, bound: bool | None) -> Observation | None:
    scheduled = _pod_condition(pod, "PodScheduled")
    if not scheduled or scheduled.get("status") != "False":
        return None
    message = scheduled.get("message", "")
    # With WaitForFirstConsumer a claim stays unbound until its pod is scheduled: an unbound
    # claim says nothing by itself, the scheduler's message says what is wrong.
    if any(word in message.lower() for word in VOLUME_WORDS):
        return Observation(
            SandboxPhase.PROVISIONING,
            R.VOLUME_NOT_BOUND,
            f"The workspace volume cannot be bound: {message} Check spec.storage "
            "(storageClassName, size) and that the cluster can provision it.",
            volume_bound=False,
        )
    return Observation(
        SandboxPhase.PROVISIONING,
        R.UNSCHEDULABLE,
        f"The sandbox pod cannot be scheduled: {message}",
        volume_bound=bound,
    )


def _progress(pod: Obj, bound: bool | None) -> Observation:
    ready = _pod_condition(pod, "Ready")
    if pod.get("status", {}).get("phase") == "Running" and ready and ready.get("status") == "True":
        return Observation(
            SandboxPhase.READY,
            R.READY,
            "The sandbox is ready.",
            ready=True,
            setup_complete=True,
            volume_bound=True,
            setup_seconds=setup_seconds(pod),
            ready_at=parse_time(ready.get("lastTransitionTime")),
        )
    running = next(
        (i["name"] for i in _init_statuses(pod) if "running" in (i.get("state") or {})), None
    )
    if running:
        return Observation(
            SandboxPhase.SETTING_UP,
            R.SETTING_UP,
            f"Preparing the workspace: {running}.",
            setup_complete=False,
            volume_bound=bound,
        )
    inits = [i.get("state", {}).get("terminated") for i in _init_statuses(pod)]
    if inits and all(t and t.get("exitCode") == 0 for t in inits):
        return Observation(
            SandboxPhase.SETTING_UP,
            R.STARTING,
            "The workspace is prepared; starting the sandbox container.",
            volume_bound=bound,
        )
    return Observation(
        SandboxPhase.PROVISIONING,
        R.STARTING,
        "Waiting for the sandbox pod to start.",
        volume_bound=bound,
    )
