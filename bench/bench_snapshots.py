"""Benchmark: a sandbox restored from a snapshot against one set up cold, on the local cluster's
real node (real containers, the node's CSI StorageClass).

A Workspace whose setup takes about ``--setup-seconds`` (60) is applied; the first Sandbox of
it is set up (cold) and snapshotted; the next one is restored from that snapshot. Prints each
one's time from creation to Ready (``status.timings.readySeconds``) and the ratio restored /
cold: the cold start is the baseline measured in the same run.

Usage: ``make bench`` (after the other benchmarks), or
``python bench/bench_snapshots.py --setup-seconds 60``. Skipped, saying why, where the local
cluster has no real node.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the operator's test identity (support/identity.py)

from bench_sandboxes import Operator, wait  # noqa: E402  (run as bench/bench_snapshots.py)

from paddock.devcluster import cluster as local  # noqa: E402
from paddock.devcluster import images, node  # noqa: E402
from paddock.devcluster.binaries import ensure_binaries  # noqa: E402
from support import identity  # noqa: E402
from support.kube import Cluster  # noqa: E402

ON_NODE: dict[str, Any] = {
    "nodeSelector": {node.NODE_LABEL: "real"},
    "tolerations": [{"key": node.NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}


def apply(cluster: Cluster, namespace: str, doc: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(doc))


def status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "sandbox", name, "-n", namespace, "-o", "json").stdout
    found: dict[str, Any] = json.loads(out).get("status") or {}
    return found


def sandbox(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": name},
        "spec": {
            "workspaceRef": {"name": "bench"},
            "image": images.SANDBOX_IMAGE,
            "storage": {"size": "1Gi", "storageClassName": node.CSI_STORAGE_CLASS},
            "policy": {"commands": {"default": "allow"}},
            **ON_NODE,
        },
    }


def ready(cluster: Cluster, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        found = status(cluster, namespace, name)
        seconds = (found.get("timings") or {}).get("readySeconds")
        return found if found.get("phase") == "Ready" and seconds is not None else None

    result: dict[str, Any] = wait(check, timeout, f"sandbox {name} Ready")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup-seconds", type=int, default=60)
    args = parser.parse_args()
    reason = node.unavailable_reason()
    if reason:
        print(f"snapshots: skipped: the local cluster's real node cannot run here ({reason})")
        return 0
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    kubeconfig = local.up(directory)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    cluster = Cluster("local", kubeconfig, str(ensure_binaries().kubectl))
    cluster.install_crds()
    scratch = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    operator_config = identity.operator_kubeconfig(cluster, scratch)
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    operator = Operator(namespace, operator_config, scratch / "operator.log")
    try:
        setup = [f"sleep {args.setup_seconds}", "echo prepared > prepared.txt"]
        workspace = {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": "bench"},
            "spec": {"setup": setup},
        }
        apply(cluster, namespace, workspace)
        timeout = args.setup_seconds + 300
        apply(cluster, namespace, sandbox("cold"))
        cold = ready(cluster, namespace, "cold", timeout)
        wait(
            lambda: (
                status(cluster, namespace, "cold").get("snapshot")
                and any(
                    c["type"] == "SnapshotReady" and c["status"] == "True"
                    for c in status(cluster, namespace, "cold").get("conditions") or []
                )
            ),
            timeout,
            "the cold sandbox's snapshot ready",
        )
        apply(cluster, namespace, sandbox("restored"))
        restored = ready(cluster, namespace, "restored", timeout)
    finally:
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    if restored.get("restoredFrom") != cold.get("snapshot"):
        print(f"snapshots: the second sandbox was not restored: {restored.get('message')}")
        return 1
    cold_s = cold["timings"]["readySeconds"]
    restored_s = restored["timings"]["readySeconds"]
    print(
        f"snapshots (real node, setup of {args.setup_seconds} s): cold start to Ready "
        f"{cold_s:.1f} s (baseline), restored {restored_s:.1f} s: ratio {restored_s / cold_s:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
