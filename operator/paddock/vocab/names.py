"""Names and labels of the objects Paddock creates, in one place."""

from __future__ import annotations

import hashlib

from paddock import GROUP

MANAGED_BY = {"app.kubernetes.io/managed-by": "paddock"}
SANDBOX_LABEL = f"{GROUP}/sandbox"
WORKSPACE_HASH_LABEL = f"{GROUP}/workspace-hash"
PREPARED_ANNOTATION = f"{GROUP}/prepared"
ACTIVITY_ANNOTATION = f"{GROUP}/last-activity"
LAST_RUN_ANNOTATION = f"{GROUP}/last-run"  # the run that ended last in a sandbox (uid prefix)
THREAD_KEY_LABEL = f"{GROUP}/thread-key"  # the thread and what its sandbox is made from
THREAD_LABEL = f"{GROUP}/thread"  # the thread alone: its sandboxes before a template changed
RUN_LABEL = f"{GROUP}/run"
# Where a sandbox keeps its CLIs' conversations, relative to the workspace: on its volume, so a
# pause, an idle timeout, an operator's restart and a restore from a snapshot keep them. No
# part of the work: Paddock's own git leaves it out of a run's changes and a delivery, and its
# ``.gitignore`` (``*``) out of the agent's git (docs/runs.md, "Sessions").
SESSIONS_DIR = ".paddock/sessions"
POOL_LABEL = f"{GROUP}/pool"  # an unclaimed member of a SandboxPool: the pool's name
POOL_TEMPLATE_LABEL = f"{GROUP}/pool-template"  # the template and Workspace it was made from
CLAIMED_FROM_LABEL = f"{GROUP}/claimed-from"  # a sandbox a run took from a pool: the pool
HELD_BY_ANNOTATION = f"{GROUP}/held-by"  # the run (uid) that holds a sandbox: one at a time
HELD_BY_RUN_ANNOTATION = f"{GROUP}/held-by-run"  # and its name, to read it by
WORKSPACE_LABEL = f"{GROUP}/workspace"  # a snapshot's or files ConfigMap's Workspace
FILES_LABEL = f"{GROUP}/files"  # a files ConfigMap: the hash of what it holds
SNAPSHOT_OF_LABEL = f"{GROUP}/snapshot-of"  # the Sandbox whose volume a snapshot is of
MAX_AGE_ANNOTATION = f"{GROUP}/max-age-seconds"  # how long a snapshot is restored from
STORAGE_CLASS_ANNOTATION = f"{GROUP}/storage-class"  # the StorageClass of a snapshot's volume
IMAGE_ANNOTATION = f"{GROUP}/image"  # the image a snapshot's volume was set up in
RESTORE_ARCHIVE_ANNOTATION = f"{GROUP}/restore-archive"  # the archive a PVC is filled from
UNPACKED_ANNOTATION = f"{GROUP}/archive-unpacked"  # "true" once that archive is in the volume
NETWORK_LABEL = f"{GROUP}/network"  # on a pod and its NetworkPolicy: which fence it is under
BASELINE_NETWORK_POLICY = "paddock-baseline"  # isolates every sandbox pod of its namespace
NO_POLICY_NETWORK_POLICY = "paddock-no-policy"  # the fence of the sandboxes with no policy
SANDBOX_CONTAINER = "sandbox"  # the sandbox pod's main container, where runs exec
GATE_CONTAINER = "gate"  # its sidecar, of another user: the gate's server and control files


def sandbox_labels(sandbox: str) -> dict[str, str]:
    return {**MANAGED_BY, SANDBOX_LABEL: sandbox}


def pod_name(sandbox: str) -> str:
    return sandbox


def pvc_name(sandbox: str) -> str:
    return f"{sandbox}-workspace"


def files_configmap_name(workspace: str, key: str) -> str:
    """The files ConfigMap of a Workspace's sandboxes, ``key`` a hash of what it holds."""
    return _fitted(f"{workspace}.{key}", ".paddock-files", 253)


def network_policy_name(sandbox: str) -> str:
    return f"{sandbox}-egress"


def policy_network_policy_name(policy: str, policy_namespace: str | None = None) -> str:
    """The NetworkPolicy the sandboxes of a SandboxPolicy share: of the sandboxes' namespace
    (``policy_namespace`` None), or of another (the operator's default policy). The endings
    keep these apart from each other and from a sandbox's own (``-egress``)."""
    if policy_namespace is None:
        return _fitted(policy, ".paddock-policy", 253)
    return _fitted(f"{policy}.{policy_namespace}", ".paddock-default", 253)


def label_value(name: str) -> str:
    """``name`` as a label value (at most 63 characters): itself when it fits, else its
    start and a hash of the whole."""
    return _fitted(name, "", 63)


def _fitted(name: str, suffix: str, limit: int) -> str:
    if len(name) + len(suffix) <= limit:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    start = name[: limit - len(suffix) - len(digest) - 1].rstrip(".-_")
    return f"{start}-{digest}{suffix}"


def snapshot_name(sandbox: str, sandbox_uid: str, moment: str) -> str:
    """A snapshot of a sandbox's volume at one moment ("setup", or a run's): unique to the
    sandbox (its uid), since snapshots outlive it and a new Sandbox may take its name."""
    return f"{sandbox}-{sandbox_uid[:8]}-{moment}"
