"""End-to-end fixtures: the local cluster's real node."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock_dev import cluster as local
from paddock_dev import node
from support.kube import Cluster


@pytest.fixture(scope="session")
def real_node(cluster: Cluster) -> str:
    """The local cluster's real node. Skipped only where this machine cannot run one (not
    root, no overlayfs, the node packages missing); a cluster started without it fails."""
    reason = node.unavailable_reason()
    if reason:
        pytest.skip(f"needs the local cluster's real node, and {reason}")
    found = cluster.kubectl("get", "node", node.NODE_NAME, check=False)
    assert found.returncode == 0, (
        f"the local cluster in {local.default_state_dir()} runs without its real node (was it "
        "started with PADDOCK_REAL_NODE=0?): `paddock cluster down`, then run the tests again"
    )
    return node.NODE_NAME


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A directory with a short path, for a second cluster's state: its kubelet makes unix
    sockets under it, and a socket's path holds at most 107 bytes (pytest's own tmp_path, one
    level deeper under parallel workers, leaves too few)."""
    directory = Path(tempfile.mkdtemp(prefix="pdk-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)
