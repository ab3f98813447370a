"""Names and labels of the objects Paddock creates, in one place."""

from __future__ import annotations

from paddock import GROUP

MANAGED_BY = {"app.kubernetes.io/managed-by": "paddock"}
SANDBOX_LABEL = f"{GROUP}/sandbox"
WORKSPACE_HASH_LABEL = f"{GROUP}/workspace-hash"
PREPARED_ANNOTATION = f"{GROUP}/prepared"
ACTIVITY_ANNOTATION = f"{GROUP}/last-activity"
THREAD_KEY_LABEL = f"{GROUP}/thread-key"
RUN_LABEL = f"{GROUP}/run"
SANDBOX_CONTAINER = "sandbox"  # the sandbox pod's main container, where runs exec


def sandbox_labels(sandbox: str) -> dict[str, str]:
    return {**MANAGED_BY, SANDBOX_LABEL: sandbox}


def pod_name(sandbox: str) -> str:
    return sandbox


def pvc_name(sandbox: str) -> str:
    return f"{sandbox}-workspace"


def files_configmap_name(sandbox: str) -> str:
    return f"{sandbox}-files"


def network_policy_name(sandbox: str) -> str:
    return f"{sandbox}-egress"
