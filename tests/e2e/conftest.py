"""End-to-end fixtures: the local cluster's real node, and a kind cluster where a Docker engine
runs (skipped elsewhere)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock.devcluster import cluster as local
from paddock.devcluster import node
from support.kube import ROOT, Cluster

IMAGE = "localhost/paddock:e2e"


def kind_unavailable() -> str | None:
    """Why kind cannot run here, or None when it can."""
    if shutil.which("kind") is None:
        return "the kind binary is not installed"
    if shutil.which("docker") is None:
        return "there is no docker client"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if info.returncode != 0:
        return "no Docker engine answers `docker info`"
    return None


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


@pytest.fixture(scope="session")
def kind_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Create a kind cluster, load the operator image into it, install the CRDs; delete it
    at the end of the session."""
    reason = kind_unavailable()
    if reason:
        pytest.skip(f"e2e tests need a kind cluster, and {reason}")
    name = f"paddock-e2e-{uuid.uuid4().hex[:6]}"
    kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
    subprocess.run(
        ["kind", "create", "cluster", "--name", name, f"--kubeconfig={kubeconfig}", "--wait=180s"],
        check=True,
    )
    try:
        if (ROOT / "Dockerfile").is_file():
            subprocess.run(["docker", "build", "-t", IMAGE, str(ROOT)], check=True)
            subprocess.run(["kind", "load", "docker-image", IMAGE, "--name", name], check=True)
        kubectl = shutil.which("kubectl")
        assert kubectl, "kubectl is needed next to kind"
        cluster = Cluster("kind", Path(kubeconfig), kubectl)
        cluster.install_crds()
        yield cluster
    finally:
        subprocess.run(["kind", "delete", "cluster", "--name", name], check=False)


@pytest.fixture
def kind_namespace(kind_cluster: Cluster) -> Iterator[str]:
    name = kind_cluster.create_namespace()
    yield name
    kind_cluster.delete_namespace(name)
