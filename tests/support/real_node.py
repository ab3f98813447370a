"""Sandboxes on the local cluster's real node, for the tests that run containers there."""

from __future__ import annotations

from typing import Any

from paddock.devcluster import images, node
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
