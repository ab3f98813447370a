"""`paddock cluster up` / `down` on a second cluster of its own: everything it started stops,
including what exec left running in a pod, and its state is removed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paddock_dev import binaries, object_store
from paddock_dev import cluster as local
from paddock_dev.processes import ESTABLISHED
from support.kube import Cluster, object_store_in_use
from support.sandboxes import get
from support.waiting import wait_for

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        return not Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except OSError:
        return False


def test_down_leaves_no_process_behind(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    kubeconfig = local.up(directory, real_node=False)  # kwok's behaviour is under test
    try:
        report = local.status(directory)
        assert report, "no state after up"
        assert all(report.values()), report
        state = local.ClusterState.load(directory)
        assert state is not None
        started = dict(state.pids)
        other = Cluster("second", kubeconfig, str(local.ensure_binaries().kubectl))
        other.kubectl("run", "idle", "--image=busybox", "--restart=Never")
        wait_for(
            lambda: (
                other.kubectl(
                    "exec",
                    "idle",
                    "--",
                    "sh",
                    "-c",
                    "setsid sleep 600 >/dev/null 2>&1 < /dev/null &",
                    check=False,
                ).returncode
                == 0
            ),
            60,
            what="a detached process started through exec",
        )
        leftovers = wait_for(
            lambda: local._pods_processes(state.pods_dir.resolve()), 10, what="the sleep process"
        )
    finally:
        local.down(directory)
    for component, pid in started.items():
        assert not _alive(pid), f"{component} (pid {pid}) still running after down"
    for pid in leftovers:
        assert not _alive(pid), f"exec'd process {pid} still running after down"
    assert not directory.exists()
    assert local.status(directory) == {}


def test_up_reuses_a_running_cluster_even_with_a_service_a_test_stopped(
    cluster: Cluster,
) -> None:
    """Another test may have stopped the object store (or the forge) on purpose: ``up`` then
    reuses the cluster as it is, never starting it over from under every test using it."""
    directory = local.default_state_dir()
    with object_store_in_use(alone=True):
        state = local.ClusterState.load(directory)
        assert state is not None
        object_store.stop(state)
        try:
            stopped = local.ClusterState.load(directory)
            assert stopped is not None
            before = dict(stopped.pids)
            assert local.up(directory) == cluster.kubeconfig
            after = local.ClusterState.load(directory)
            assert after is not None
            assert after.pids == before
        finally:
            object_store.restart(binaries.ensure_binaries(), state)
    assert os.environ["KUBECONFIG"] == str(cluster.kubeconfig)


def test_default_kustomization_builds_and_the_server_accepts_it(cluster: Cluster) -> None:
    import yaml

    from support.kube import ROOT

    built = cluster.kubectl("kustomize", str(ROOT / "config" / "default")).stdout
    docs = [doc for doc in yaml.safe_load_all(built) if doc]
    kinds = {doc["kind"] for doc in docs}
    assert {"CustomResourceDefinition", "ClusterRole", "Deployment", "Namespace"} <= kinds
    deployment = next(doc for doc in docs if doc["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == "paddock-system"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    # Everything but the CRDs (installed already) and the Namespace, checked by the server.
    rest = [doc for doc in docs if doc["kind"] not in {"CustomResourceDefinition", "Namespace"}]
    # The namespace may exist already (the local object store's Secret is in it): then it
    # is not this test's to delete.
    created = cluster.kubectl("create", "namespace", "paddock-system", check=False)
    try:
        cluster.kubectl("apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(rest))
    finally:
        if created.returncode == 0:
            cluster.kubectl("delete", "namespace", "paddock-system", "--wait=false")


def test_dev_on_a_fresh_machine_reads_the_kubeconfig_of_the_cluster_it_found(
    cluster: Cluster, tmp_path: Path
) -> None:
    # A fresh machine: no KUBECONFIG and no ~/.kube/config, so `paddock dev` finds no cluster
    # answering and brings up the local one (here: finds it up) and sets KUBECONFIG itself.
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PADDOCK_CLUSTER_DIR": str(local.default_state_dir()),
        "PADDOCK_CACHE": str(binaries.cache_dir()),
    }
    done = subprocess.run(
        [sys.executable, "-m", "paddock.cli", "dev", "--no-operator"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    isolation = [line for line in done.stderr.splitlines() if "ISOLATION:" in line]
    assert len(isolation) == 1, done.stderr
    assert "unknown" not in isolation[0], isolation[0]


def test_a_crd_created_an_instant_ago_is_waited_on_until_established(cluster: Cluster) -> None:
    """Waiting starts while the new CRD's conditions are still null (kubectl wait fails there)."""
    suffix = os.urandom(4).hex()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"probes{suffix}.test.paddock.dev"},
        "spec": {
            "group": "test.paddock.dev",
            "scope": "Namespaced",
            "names": {"plural": f"probes{suffix}", "singular": f"probe{suffix}",
                      "kind": f"Probe{suffix}", "listKind": f"Probe{suffix}List"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}],
        },
    }  # fmt: skip
    name = f"crd/{crd['metadata']['name']}"
    cluster.kubectl("create", "-f", "-", stdin=yaml.safe_dump(crd))
    try:
        cluster.wait_established(name)
        shown = cluster.kubectl("get", name, "-o", f"jsonpath={ESTABLISHED}").stdout
        assert shown == "True"
    finally:
        cluster.kubectl("delete", name, "--wait=false")


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(") ")[2][0] != "Z"
    except OSError:
        return False


def test_a_deleted_kwok_pods_processes_end_as_a_kubelet_ends_them(
    cluster: Cluster, namespace: str
) -> None:
    """kwok runs a pod's execs as processes of this machine: once the pod is gone, so are they
    (a harness left running would load every later test)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "doomed"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }
    cluster.apply(pod, namespace)
    wait_for(lambda: (get(cluster, namespace, "pod", "doomed") or {}).get("status", {})
             .get("phase") == "Running", 60, what="the pod Running")  # fmt: skip
    started = cluster.kubectl(
        "exec", "-n", namespace, "doomed", "-c", "main", "--",
        "bash", "-c", "setsid sleep 1996 > /dev/null 2>&1 < /dev/null & echo $!",
    )  # fmt: skip
    pid = int(started.stdout)
    assert _running(pid)
    cluster.kubectl("delete", "pod", "-n", namespace, "doomed", "--wait=true")
    wait_for(lambda: not _running(pid), 30, what="the deleted pod's process gone")
