"""Pods and PVCs as a kubelet and the volume controller report them, for the pure tests of
what the operator makes of them."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

BOUND = {"status": {"phase": "Bound"}}
PENDING_PVC = {"status": {"phase": "Pending"}}


def pod(
    phase: str = "Pending",
    *,
    init: list[Obj] | None = None,
    containers: list[Obj] | None = None,
    conditions: list[Obj] | None = None,
    name: str = "sbx",
    owner: str | None = "uid-1",
    fence: str = "paddock-no-policy",
    **status: Any,
) -> Obj:
    """A pod; ``owner`` is the uid of the Sandbox that controls it (None: nothing does);
    ``fence`` the NetworkPolicy it is labelled to be under."""
    refs = [{"kind": "Sandbox", "uid": owner, "controller": True}] if owner else []
    meta = {"name": name, "uid": f"pod-{name}", "ownerReferences": refs}
    return {
        "kind": "Pod",
        "metadata": {**meta, "labels": {"paddock.dev/network": fence}},
        "status": {
            "phase": phase,
            "initContainerStatuses": init or [],
            "containerStatuses": containers or [],
            "conditions": conditions or [],
            **status,
        },
    }


def terminated(name: str, code: int, message: str = "") -> Obj:
    return {
        "name": name,
        "image": "img",
        "state": {
            "terminated": {
                "exitCode": code,
                "message": message,
                "startedAt": "2026-01-01T00:00:00Z",
                "finishedAt": "2026-01-01T00:00:04Z",
            }
        },
    }


def running(name: str) -> Obj:
    return {"name": name, "image": "img", "state": {"running": {}}}


def waiting(name: str, reason: str, message: str = "") -> Obj:
    return {
        "name": name,
        "image": "nope:1",
        "state": {"waiting": {"reason": reason, "message": message}},
    }


def ready_pod(ready_at: str = "2026-01-01T00:00:05Z", **fields: Any) -> Obj:
    return pod(
        "Running",
        **fields,
        init=[terminated("setup", 0)],
        conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": ready_at}],
    )


def unscheduled(message: str) -> Obj:
    return pod(conditions=[{"type": "PodScheduled", "status": "False", "message": message}])
