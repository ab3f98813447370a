"""Streaming a workspace through exec on the local cluster's real node, the building block of
portable snapshots: a sandbox's /workspace archived with tar into a file (bytes, never held
whole), and that archive written into another sandbox's /workspace."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.vocab.names import SANDBOX_CONTAINER
from paddock_dev import node
from support.kube import Cluster
from support.real_node import exec_in, node_sandbox
from support.sandboxes import wait_for_phase, workspace

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]
# The volume's entries, not "." itself: the volume's root is not the sandbox user's to chmod.
ARCHIVE = [
    "sh", "-c",
    "cd /workspace && find . -mindepth 1 -maxdepth 1 -print0 | tar --null -T - -czf -",
]  # fmt: skip


def test_a_workspace_streams_out_as_an_archive_and_into_another_sandbox(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    for name in ("source", "target"):
        cluster.apply(node_sandbox(name, node.STORAGE_CLASS), namespace)
    for name in ("source", "target"):
        wait_for_phase(cluster, namespace, name, "Ready", timeout=180)
    # Random bytes do not compress: the archive is as large as the data, several chunks.
    exec_in(cluster, namespace, "source", "mkdir -p d && head -c 3000000 /dev/urandom > d/blob "
            "&& sha256sum d/blob > sum.txt")  # fmt: skip
    kube.load_config()
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "workspace.tar.gz"
        with archive.open("wb") as sink:
            out = kube_exec.stream_out(
                namespace, "source", SANDBOX_CONTAINER,
                ARCHIVE, sink, 120,
            )  # fmt: skip
        assert out.exit_code == 0, out.stderr
        size = archive.stat().st_size
        assert size > 3_000_000
        with archive.open("rb") as source:
            into = kube_exec.stream_in(
                namespace, "target", SANDBOX_CONTAINER,
                ["sh", "-c", 'head -c "$1" | tar -xzf - -C /workspace', "restore", str(size)],
                source, 120,
            )  # fmt: skip
    assert into.exit_code == 0, into.stderr
    assert exec_in(cluster, namespace, "target", "sha256sum -c sum.txt") == "d/blob: OK\n"


def test_a_failing_streamed_command_gives_its_exit_code_and_stderr(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(node_sandbox("lone", node.STORAGE_CLASS), namespace)
    wait_for_phase(cluster, namespace, "lone", "Ready", timeout=180)
    kube.load_config()
    with tempfile.TemporaryFile() as sink:
        out = kube_exec.stream_out(
            namespace, "lone", SANDBOX_CONTAINER,
            ["tar", "-czf", "-", "-C", "/no/such/dir", "."], sink, 60,
        )  # fmt: skip
    assert out.exit_code == 2
    assert "/no/such/dir" in out.stderr
