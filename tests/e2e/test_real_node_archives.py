"""Portable snapshots on the local cluster's real node, against the local S3 server: a sandbox of
the node's StorageClass without VolumeSnapshots is set up in a container and archived into the
bucket; the next sandbox of the same workspace is filled from that archive before it is Ready
(setup not run again), and the archive goes with its Workspace; an archive past its
snapshotMaxAge is deleted, and the next sandbox is set up from scratch; an archive gone from
the bucket gives a clear RestoreFailed and a cold start, not a broken sandbox."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

import pytest

from paddock_dev import node
from support.kube import Cluster, object_store_in_use
from support.objects import ObjectStore
from support.real_node import exec_in, node_sandbox
from support.sandboxes import (
    condition,
    events_for,
    get,
    secret,
    setup_containers,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]
SETUP = ["echo ran >> setup-runs.txt", "mkdir -p build && echo artefact > build/out.txt"]
TOKEN = "tok-archived-0123456789"
TOKEN_ENV = {"name": "TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}}


@pytest.fixture(autouse=True)
def _store_in_use() -> Iterator[None]:
    with object_store_in_use():
        yield


@pytest.fixture
def archives(cluster: Cluster, namespace: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Operators started by the test keep snapshots as archives in the local bucket (the
    "auto" store: the node's local-path class has no VolumeSnapshotClass), under a prefix of
    the test's own; the folder of the Workspace "app"'s archives."""
    store = ObjectStore.of(cluster)
    prefix = f"tests/{namespace}"
    for name, value in store.operator_env(prefix).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PADDOCK_LOG_BACKEND", "configmap")
    return f"{prefix}/snapshots/{namespace}/app/"


def _archived(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    """The sandbox's status, once Ready with its archive stored."""
    status = status_of(cluster, namespace, "sandbox", name)
    if status.get("phase") != "Ready":
        return None
    return status if condition(status, "SnapshotReady")["status"] == "True" else None


def _first_archived(
    cluster: Cluster, namespace: str, first: dict[str, Any], app: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Workspace "app" (``app``, or one that runs SETUP) and the sandbox ``first`` of it
    applied: its status once archived."""
    cluster.apply(app or workspace("app", setup=SETUP), namespace)
    cluster.apply(first, namespace)
    name = first["metadata"]["name"]
    return wait_for(lambda: _archived(cluster, namespace, name), 180, what=f"{name} archived")


def _event(cluster: Cluster, namespace: str, name: str, reason: str, words: str) -> str | None:
    """The message of an Event of ``reason`` about ``name`` that says ``words``, if any."""
    for event in events_for(cluster, namespace, name):
        if event["reason"] == reason and words in event["message"]:
            return str(event["message"])
    return None


def _keys(cluster: Cluster, folder: str) -> list[str]:
    return ObjectStore.of(cluster).keys(folder)


def test_an_archive_is_taken_after_setup_and_restored_into_the_next_sandbox(
    cluster: Cluster, namespace: str, archives: str, operator: Any
) -> None:
    """...and a secret value a process of the sandbox wrote into a file is masked in the
    archive (stored and restored), its file's size and everything else as it was."""
    cluster.apply(secret("creds", token=TOKEN), namespace)
    leak = 'printf "before %s after\\n" "$TOKEN" > leaked.txt'
    setup = workspace("app", setup=[*SETUP, leak], secrets=[TOKEN_ENV])
    first = _first_archived(cluster, namespace, node_sandbox("first", node.STORAGE_CLASS), setup)
    name = first["snapshot"]
    assert "archive" in condition(first, "SnapshotReady")["message"]
    assert _keys(cluster, archives) == [f"{archives}{name}.json", f"{archives}{name}.tar.gz"]
    stored, _ = ObjectStore.of(cluster).bucket_client().get(f"{archives}{name}.tar.gz")
    assert TOKEN.encode() not in gzip.decompress(stored)
    listed = wait_for(
        lambda: status_of(cluster, namespace, "workspace", "app").get("snapshots") or None,
        30,
        what="the Workspace listing its archive",
    )
    assert [(s["name"], s["ready"]) for s in listed] == [(name, True)]
    assert listed[0]["location"].endswith(f"/{archives}{name}.tar.gz")

    cluster.apply(node_sandbox("second", node.STORAGE_CLASS), namespace)
    second = wait_for_phase(cluster, namespace, "second", "Ready", timeout=180)
    assert second["restoredFrom"] == name
    restored = condition(second, "Restored")
    assert (restored["status"], restored["reason"]) == ("True", "Restored")
    assert condition(second, "SetupComplete")["reason"] == "Restored"
    pod = get(cluster, namespace, "pod", "second") or {}
    assert setup_containers(pod) == []  # no clone, project or setup
    assert exec_in(cluster, namespace, "second", "cat setup-runs.txt build/out.txt") == (
        "ran\nartefact\n"
    )
    masked = f"before {'*' * len(TOKEN)} after\n"
    assert exec_in(cluster, namespace, "second", "cat leaked.txt") == masked
    owner = exec_in(cluster, namespace, "second", "stat -c %u build/out.txt; touch build/new")
    assert owner == "1000\n"  # the sandbox user's, and writable
    pvc = get(cluster, namespace, "pvc", "second-workspace") or {}
    assert "dataSource" not in pvc["spec"]
    # The Workspace's archives go with it, as its VolumeSnapshots would.
    cluster.kubectl("delete", "workspace", "app", "-n", namespace)
    wait_for(lambda: not _keys(cluster, archives), 60, what="the Workspace's archives deleted")


def test_an_archive_past_its_max_age_is_deleted_and_the_next_sandbox_starts_cold(
    cluster: Cluster, namespace: str, archives: str, operator: Any
) -> None:
    short = node_sandbox("first", node.STORAGE_CLASS)
    short["spec"]["lifecycle"] = {"snapshotMaxAge": "20s"}
    first = _first_archived(cluster, namespace, short)
    wait_for(lambda: not _keys(cluster, archives), 90, what="the expired archive deleted")
    wait_for(
        lambda: _event(cluster, namespace, "app", "SnapshotDeleted", first["snapshot"]),
        30,
        what="the Workspace's SnapshotDeleted Event",
    )

    cluster.apply(node_sandbox("second", node.STORAGE_CLASS), namespace)
    second = wait_for_phase(cluster, namespace, "second", "Ready", timeout=180)
    assert "restoredFrom" not in second
    assert condition(second, "Restored")["reason"] == "NoSnapshot"
    assert exec_in(cluster, namespace, "second", "cat setup-runs.txt") == "ran\n"  # its own setup


def test_an_archive_gone_from_the_bucket_gives_restore_failed_and_a_cold_start(
    cluster: Cluster, namespace: str, archives: str, operator: Any
) -> None:
    first = _first_archived(cluster, namespace, node_sandbox("first", node.STORAGE_CLASS))
    # Behind the operator's back: its index still lists the archive, the bytes are gone.
    ObjectStore.of(cluster).bucket_client().delete([f"{archives}{first['snapshot']}.tar.gz"])

    cluster.apply(node_sandbox("second", node.STORAGE_CLASS), namespace)
    wait_for(
        lambda: _event(cluster, namespace, "second", "RestoreFailed", first["snapshot"]),
        180,
        what="the Sandbox's RestoreFailed Event",
    )
    second = wait_for_phase(cluster, namespace, "second", "Ready", timeout=180)
    assert "restoredFrom" not in second
    assert condition(second, "Restored")["reason"] == "RestoreFailed"
    assert first["snapshot"] in condition(second, "Restored")["message"]
    assert exec_in(cluster, namespace, "second", "cat setup-runs.txt") == "ran\n"  # set up anew
