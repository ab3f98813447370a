"""Benchmark: a sandbox restored from a snapshot against one set up cold, on the local cluster's
real node (real containers), for each kind of snapshot: a VolumeSnapshot (the node's CSI
StorageClass) and an archive in the local S3 server (the node's local-path class, which has no
VolumeSnapshotClass).

For each, a Workspace whose setup takes about ``--setup-seconds`` (60) and writes
``--archive-mib`` (64) of files is applied; the first Sandbox of it is set up (cold) and
snapshotted; the next one is restored from that snapshot. Prints each one's time from creation
to Ready (``status.timings.readySeconds``) and the ratio restored / cold: the cold start is the
baseline measured in the same run. Then the archive path alone at 1 and 4 times
``--archive-mib``, set up in no time: the time to archive and to restore at 4x the bytes as a
ratio of the time at 1x (linear growth: 4).

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

from bench_runs import s3_env, s3_settings  # noqa: E402  (run as bench/bench_snapshots.py)
from bench_sandboxes import Operator, wait  # noqa: E402

from paddock.kube import client as kube  # noqa: E402
from paddock_dev import cluster as local  # noqa: E402
from paddock_dev import images, node  # noqa: E402
from paddock_dev.binaries import ensure_binaries  # noqa: E402
from support import identity  # noqa: E402
from support.kube import Cluster  # noqa: E402

SCALE = 4
Statuses = tuple[dict[str, Any], dict[str, Any]]
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


def sandbox(name: str, workspace: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": name},
        "spec": {
            "workspaceRef": {"name": workspace},
            "image": images.SANDBOX_IMAGE,
            "storage": {"size": "1Gi", "storageClassName": storage_class},
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


def snapshot_ready(cluster: Cluster, namespace: str, name: str) -> bool:
    found = status(cluster, namespace, name)
    conditions = found.get("conditions") or []
    taken = any(c["type"] == "SnapshotReady" and c["status"] == "True" for c in conditions)
    return bool(found.get("snapshot")) and taken


def cold_and_restored(
    cluster: Cluster,
    namespace: str,
    kind: str,
    storage_class: str,
    setup_seconds: int,
    mib: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The statuses of a cold sandbox of a new Workspace, once snapshotted, and of the next
    one, restored from that snapshot."""
    setup = [
        f"sleep {setup_seconds}",
        # Incompressible files, so that an archive carries as many bytes as the volume holds.
        f"mkdir -p build && head -c {mib}M /dev/urandom > build/blob && echo done > prepared.txt",
    ]
    workspace = {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": f"bench-{kind}"},
        "spec": {"setup": setup},
    }
    apply(cluster, namespace, workspace)
    timeout = setup_seconds + 300
    apply(cluster, namespace, sandbox(f"{kind}-cold", f"bench-{kind}", storage_class))
    cold = ready(cluster, namespace, f"{kind}-cold", timeout)
    wait(
        lambda: snapshot_ready(cluster, namespace, f"{kind}-cold"),
        timeout,
        f"the cold sandbox's {kind} snapshot ready",
    )
    apply(cluster, namespace, sandbox(f"{kind}-restored", f"bench-{kind}", storage_class))
    return cold, ready(cluster, namespace, f"{kind}-restored", timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup-seconds", type=int, default=60)
    parser.add_argument("--archive-mib", type=int, default=64)
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
    # Snapshots "auto": a VolumeSnapshot on the CSI class, an archive on local-path; logs stay
    # in ConfigMaps.
    kube.load_config()
    os.environ.update({**s3_env(s3_settings()), "PADDOCK_LOG_BACKEND": "configmap"})
    operator = Operator(namespace, operator_config, scratch / "operator.log")
    results = {}
    try:
        for kind, storage_class in (
            ("volume", node.CSI_STORAGE_CLASS),
            ("archive", node.STORAGE_CLASS),
        ):
            mib = args.archive_mib
            results[kind] = cold_and_restored(
                cluster, namespace, kind, storage_class, args.setup_seconds, mib
            )
        # The archive path at 1 and SCALE times the bytes, set up in no time: taking and
        # restoring must grow with the bytes, not faster.
        for times in (1, SCALE):
            results[f"archive-x{times}"] = cold_and_restored(
                cluster, namespace, f"archive-x{times}", node.STORAGE_CLASS, 0,
                args.archive_mib * times,
            )  # fmt: skip
    finally:
        operator.stop()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    for kind, (cold, restored) in results.items():
        if kind.startswith("archive-x"):
            continue
        if restored.get("restoredFrom") != cold.get("snapshot"):
            print(
                f"snapshots: the second {kind} sandbox was not restored: {restored.get('message')}"
            )
            return 1
        cold_s = cold["timings"]["readySeconds"]
        restored_s = restored["timings"]["readySeconds"]
        print(
            f"snapshots as {kind} (real node, setup of {args.setup_seconds} s, "
            f"{args.archive_mib} MiB): cold start to Ready {cold_s:.1f} s (baseline), restored "
            f"{restored_s:.1f} s: ratio {restored_s / cold_s:.3f}"
        )
    print(scaling(results["archive-x1"], results[f"archive-x{SCALE}"], args.archive_mib))
    return 0


def scaling(small: Statuses, large: Statuses, mib: int) -> str:
    """The restore and the archive's taking at SCALE times the bytes, against ``mib``'s."""
    restored = large[1]["timings"]["readySeconds"] / small[1]["timings"]["readySeconds"]
    taken = archive_seconds(large[0]) / archive_seconds(small[0])
    return (
        f"archives of {mib * SCALE} MiB against {mib} MiB (x{SCALE} the bytes): "
        f"restored to Ready x{restored:.2f} the time, archive taken x{taken:.2f} "
        f"(linear: x{SCALE})"
    )


def archive_seconds(cold: dict[str, Any]) -> float:
    """The cold sandbox's time to Ready past its setup: an archive being taken holds Ready."""
    timings = cold["timings"]
    return float(timings["readySeconds"] - (timings.get("setupSeconds") or 0))


if __name__ == "__main__":
    sys.exit(main())
