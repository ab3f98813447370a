"""Snapshots on the local cluster's real node: a sandbox of the node's CSI StorageClass is set
up in a container and snapshotted; the next sandbox of the same workspace is restored from
that snapshot into a new volume, mounted by the node's CSI plugin, with the setup's files
there (owned by the sandbox user, writable) and no setup run again."""

from __future__ import annotations

from typing import Any

import pytest

from paddock_dev import node
from support.kube import Cluster
from support.real_node import exec_in, node_sandbox
from support.sandboxes import condition, get, setup_containers, status_of, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]


def _with_snapshot(status: dict[str, Any]) -> dict[str, Any] | None:
    """The status, once Ready with its snapshot ready."""
    if status.get("phase") != "Ready":
        return None
    return status if condition(status, "SnapshotReady")["status"] == "True" else None


def test_a_restored_sandbox_has_the_setups_files_and_runs_no_setup(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    setup = ["echo ran >> setup-runs.txt", "mkdir -p build && echo artefact > build/out.txt"]
    cluster.apply(workspace("app", setup=setup), namespace)
    cluster.apply(node_sandbox("first"), namespace)
    first = wait_for(
        lambda: _with_snapshot(status_of(cluster, namespace, "sandbox", "first")),
        180,
        what="the first sandbox Ready with its snapshot",
    )
    assert first["timings"]["setupSeconds"] >= 0
    assert exec_in(cluster, namespace, "first", "cat setup-runs.txt") == "ran\n"

    cluster.apply(node_sandbox("second"), namespace)
    second = wait_for_phase(cluster, namespace, "second", "Ready", timeout=180)
    assert second["restoredFrom"] == first["snapshot"]
    pod = get(cluster, namespace, "pod", "second") or {}
    assert pod["spec"]["nodeName"] == node.NODE_NAME
    assert setup_containers(pod) == []  # no clone, project or setup
    # The setup's result is there, once: it ran in the first sandbox only.
    assert exec_in(cluster, namespace, "second", "cat setup-runs.txt build/out.txt") == (
        "ran\nartefact\n"
    )
    owner = exec_in(cluster, namespace, "second", "stat -c %u build/out.txt; touch build/new")
    assert owner == "1000\n"  # the sandbox user's, as in the first: and writable
    # The copy is the second's own: the first does not see what the second writes.
    exec_in(cluster, namespace, "second", "echo second >> setup-runs.txt")
    assert exec_in(cluster, namespace, "first", "cat setup-runs.txt") == "ran\n"


def test_the_nodes_other_storage_class_has_no_snapshots_and_says_so(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app", setup=["true"]), namespace)
    cluster.apply(node_sandbox("plain", node.STORAGE_CLASS), namespace)
    status = wait_for_phase(cluster, namespace, "plain", "Ready", timeout=180)
    snapshot = condition(status, "SnapshotReady")
    assert (snapshot["status"], snapshot["reason"]) == ("False", "SnapshotsUnsupported")
    assert node.STORAGE_CLASS in snapshot["message"]
