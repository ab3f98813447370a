"""Sandboxes on the local cluster's real node, for the tests that run containers there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from paddock_dev import cluster as local
from paddock_dev import images, node
from paddock_dev.node import NodePlan
from paddock_dev.processes import ClusterState
from support.kube import Cluster
from support.sandboxes import sandbox

ON_NODE: dict[str, Any] = {
    "nodeSelector": {node.NODE_LABEL: "real"},
    "tolerations": [{"key": node.NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}


def node_sandbox(name: str, storage_class: str = node.CSI_STORAGE_CLASS) -> dict[str, Any]:
    """A Sandbox of the Workspace "app" on the real node, in the image built for it."""
    return sandbox(
        name,
        "app",
        image=images.SANDBOX_IMAGE,
        storage={"size": "1Gi", "storageClassName": storage_class},
        policy={"commands": {"default": "allow"}},
        **ON_NODE,
    )


def exec_in(cluster: Cluster, namespace: str, pod: str, script: str) -> str:
    return cluster.kubectl(
        "exec", "-n", namespace, pod, "-c", "sandbox", "--", "bash", "-c", script
    ).stdout


def processes_of(pod_uid: str, words: str) -> list[int]:
    """The pids, seen from this machine, of the pod's processes whose command line holds
    ``words`` (the real node's containers run here; a pod's cgroup path names its uid, with
    ``_`` for ``-`` under the systemd driver)."""
    marks = (pod_uid, pod_uid.replace("-", "_"))
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cgroup = (proc / "cgroup").read_text()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if any(mark in cgroup for mark in marks) and words in command:
            found.append(int(proc.name))
    return found


def local_cluster_plan() -> tuple[ClusterState, NodePlan]:
    """The running local cluster's state and its real node's plan (ports, addresses)."""
    state = ClusterState.load(local.default_state_dir())
    assert state is not None
    plan = NodePlan.from_state(state.node)
    assert plan is not None
    return state, plan
