"""From the observed pod and PVC of a sandbox to its phase, conditions and timings. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from paddock.api.sandbox import SandboxPhase

IMAGE_PULL_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
INIT_FAILURE_REASONS = {
    "clone": (
        "CloneFailed",
        "Check the repository URL and ref in the Workspace, and the token Secret for a "
        "private repository.",
    ),
    "project": (
        "ProjectionFailed",
        "Check the skills of the Workspace (git skill URLs and refs, file paths).",
    ),
    "setup": (
        "SetupFailed",
        "Fix the setup step in the Workspace; the sandbox is prepared again when the "
        "Workspace changes or the Sandbox is recreated.",
    ),
}


@dataclass
class Observation:
    """What the pod and PVC say, as Paddock's status vocabulary."""

    phase: SandboxPhase
    reason: str
    message: str
    ready: bool = False
    setup_complete: bool | None = None
    volume_bound: bool | None = None
    failed_permanently: bool = False
    recreate_pod: bool = False
    setup_seconds: float | None = None
    ready_at: str | None = None
    warnings: list[str] = field(default_factory=list)


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def setup_seconds(pod: dict[str, Any]) -> float | None:
    """From the first init container's start to the last one's finish."""
    states = [s.get("state", {}).get("terminated") for s in _init_statuses(pod)]
    if not states or not all(states):
        return None
    started = min(_parse_time(s.get("startedAt")) or datetime.max for s in states if s)
    finished = max(_parse_time(s.get("finishedAt")) or datetime.min for s in states if s)
    if started == datetime.max or finished == datetime.min:
        return None
    return max((finished - started).total_seconds(), 0.0)


def _init_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod.get("status", {}).get("initContainerStatuses") or [])


def _container_statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod.get("status", {}).get("containerStatuses") or [])


def _pod_condition(pod: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conditions = pod.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), None)


def observe(pod: dict[str, Any] | None, pvc: dict[str, Any] | None) -> Observation:
    """The sandbox's state as its pod and PVC show it (pause and deletion are decided by the
    caller, which knows the spec)."""
    volume_bound = None if pvc is None else pvc.get("status", {}).get("phase") == "Bound"
    if pod is None:
        return Observation(
            SandboxPhase.PROVISIONING,
            "CreatingPod",
            "Creating the sandbox pod.",
            volume_bound=volume_bound,
        )
    status = pod.get("status", {})

    for init in _init_statuses(pod):
        terminated = init.get("state", {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            reason, advice = INIT_FAILURE_REASONS.get(
                init["name"], ("InitFailed", "See the init container's log.")
            )
            detail = (terminated.get("message") or "").strip() or (
                f"init container {init['name']} exited {terminated.get('exitCode')}"
            )
            return Observation(
                SandboxPhase.FAILED,
                reason,
                f"{detail}\n{advice}",
                setup_complete=False,
                volume_bound=volume_bound,
                failed_permanently=True,
            )

    for container in _init_statuses(pod) + _container_statuses(pod):
        waiting = container.get("state", {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return Observation(
                SandboxPhase.PROVISIONING,
                "ImagePullFailed",
                f"The image {container.get('image')} cannot be pulled "
                f"({waiting.get('reason')}: {waiting.get('message', '')}). Check the image name "
                "in the Workspace or Sandbox and the registry's credentials.",
                volume_bound=volume_bound,
            )

    if status.get("phase") == "Failed":
        reason = status.get("reason") or "PodFailed"
        return Observation(
            SandboxPhase.PROVISIONING,
            "PodEvicted" if reason == "Evicted" else "PodFailed",
            f"The sandbox pod stopped ({reason}: {status.get('message', '')}); recreating it "
            "from the workspace volume.",
            volume_bound=volume_bound,
            recreate_pod=True,
        )

    scheduled = _pod_condition(pod, "PodScheduled")
    if scheduled and scheduled.get("status") == "False":
        message = scheduled.get("message", "")
        if "PersistentVolumeClaim" in message or not volume_bound:
            return Observation(
                SandboxPhase.PROVISIONING,
                "VolumeNotBound",
                f"The workspace volume cannot be bound: {message} Check spec.storage "
                "(storageClassName, size) and that the cluster can provision it.",
                volume_bound=False,
            )
        return Observation(
            SandboxPhase.PROVISIONING,
            "Unschedulable",
            f"The sandbox pod cannot be scheduled: {message}",
            volume_bound=volume_bound,
        )

    ready_condition = _pod_condition(pod, "Ready")
    if (
        status.get("phase") == "Running"
        and ready_condition
        and ready_condition.get("status") == "True"
    ):
        return Observation(
            SandboxPhase.READY,
            "Ready",
            "The sandbox is ready.",
            ready=True,
            setup_complete=True,
            volume_bound=True,
            setup_seconds=setup_seconds(pod),
            ready_at=ready_condition.get("lastTransitionTime"),
        )

    running_init = next(
        (i["name"] for i in _init_statuses(pod) if "running" in (i.get("state") or {})), None
    )
    if running_init:
        return Observation(
            SandboxPhase.SETTING_UP,
            "SettingUp",
            f"Preparing the workspace: {running_init}.",
            setup_complete=False,
            volume_bound=volume_bound,
        )
    return Observation(
        SandboxPhase.PROVISIONING,
        "Starting",
        "Waiting for the sandbox pod to start.",
        volume_bound=volume_bound,
    )
