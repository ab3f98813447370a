"""The parts of a sandbox pod's containers that its main container and its sidecar share,
and the sidecar: the gate's container, of another user than the agent's."""

from __future__ import annotations

from typing import Any

from paddock.vocab import names

CONTROL_DIR = "/paddock/control"  # the sidecar's; read-only in the sandbox container
GATE_DIR = "/paddock/gate"  # the sidecar's alone: the gate's pending requests
RUN_DIR = "/paddock/run"  # the run journals: the sandbox container's; read-only in the sidecar
GATE_UID = 1001  # the sidecar's user: not the agent's, so the agent cannot signal it
GATE_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}}

# The containers stay up, doing nothing, until the pod is deleted; runs exec into them.
KEEP_ALIVE = ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]

CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
}


def mount(volume: str, path: str, *, read_only: bool = False) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": volume, "mountPath": path}
    if read_only:
        mount["readOnly"] = True
    return mount


def gate_container(image: str) -> dict[str, Any]:
    """The sidecar (a native one: an init container that runs as long as the pod): kept
    alive, as another user than the agent's, with no workspace, HOME or secret. The operator
    execs into it to write a run's control files and start the gate's server, and follows
    the run from there (``render/gate_scripts.py``): it reads the run's journals, which the
    sandbox's user writes group-readable for it (the pod's fsGroup is one of its groups)."""
    return {
        "name": names.GATE_CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": list(KEEP_ALIVE),
        "workingDir": GATE_DIR,
        "env": [
            {"name": "HOME", "value": GATE_DIR},
            {"name": "PADDOCK_CONTROL_DIR", "value": CONTROL_DIR},
            {"name": "PADDOCK_GATE_DIR", "value": GATE_DIR},
            {"name": "PADDOCK_RUN_DIR", "value": RUN_DIR},
        ],
        "volumeMounts": [
            mount("control", CONTROL_DIR),
            mount("gate", GATE_DIR),
            mount("run", RUN_DIR, read_only=True),
        ],
        "securityContext": {
            **CONTAINER_SECURITY,
            "capabilities": {"drop": ["ALL"]},
            "runAsUser": GATE_UID,
            "runAsGroup": GATE_UID,
            "readOnlyRootFilesystem": True,
        },
        "resources": GATE_RESOURCES,
        "terminationMessagePolicy": "File",
    }
