"""``paddock dev`` (``make dev``): the main job on whatever cluster is at hand.

Uses the cluster of the current kubeconfig when one answers, else starts the local one: as
root, with the real node's Debian packages installed first (hack/node-packages.sh) and its
binaries built, so that the examples' sandboxes run as containers there (the operator is given
the node as its sandboxes' placement, and the sandbox image built for it); where a real node
cannot run, on kwok's simulated node, said before anything that runs an agent is applied. Then
installs the CRDs, applies the examples, says what to look at, and runs the operator in the
foreground until interrupted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from paddock import GROUP
from paddock.api import KINDS
from paddock.kube.client import kubeconfig_files, load_kubeconfig
from paddock_dev import cluster, images, node
from paddock_dev.binaries import REPO_ROOT, ensure_binaries
from paddock_dev.processes import ClusterState, wait_established

NEXT_STEPS = """
Paddock is running. In another shell:

  export KUBECONFIG={kubeconfig}
  kubectl get paddock                 # every Paddock object
  kubectl get sbx,run                 # sandboxes and runs, with their phases
  kubectl describe sandbox hello      # conditions and events
  paddock logs hello-run --follow     # the run's event log, replayed and followed

Stop with Ctrl-C; `paddock cluster down` removes the local cluster.
"""


def isolation_notice(nodes: list[dict[str, Any]]) -> str:
    """One line on where the examples' pods run (pods that ask for no node): as containers,
    or on kwok's simulated node, where a "container" is a process on this machine."""
    open_nodes = [n for n in nodes if not _keeps_pods_away(n)]
    simulated = [n["metadata"]["name"] for n in open_nodes if _simulated(n)]
    real = [n["metadata"]["name"] for n in open_nodes if not _simulated(n)]
    if simulated and not real:
        return (
            f"!!! ISOLATION: NONE. Sandbox pods run on kwok's simulated node {simulated[0]}: no "
            "containers; their setup and runs execute as plain processes on THIS machine, as "
            "the user running the cluster. Real containers: a Sandbox with nodeSelector "
            "paddock.dev/node=real (docs/local-cluster.md#the-real-node), or a real cluster."
        )
    if simulated:
        return (
            f"!!! ISOLATION: MIXED. Pods may land on the simulated node(s) {', '.join(simulated)} "
            "(plain processes on their host, no isolation) or on real nodes "
            f"{', '.join(real)} (containers)."
        )
    return (
        ">>> ISOLATION: sandbox pods run as real containers on this cluster's nodes (restricted "
        "Pod Security, no service-account token; NetworkPolicies where the network plugin "
        "enforces them; a runtimeClassName such as gVisor for a stronger boundary)."
    )


def _keeps_pods_away(node: dict[str, Any]) -> bool:
    spec = node.get("spec") or {}
    taints = spec.get("taints") or []
    return bool(spec.get("unschedulable")) or any(
        t.get("effect") in ("NoSchedule", "NoExecute") for t in taints
    )


def _simulated(node: dict[str, Any]) -> bool:
    annotations = node["metadata"].get("annotations") or {}
    return annotations.get(cluster.KWOK_NODE_ANNOTATION) == "fake"


def _isolation(placement: dict[str, str]) -> str:
    """The notice for the current kubeconfig's cluster (nodes that cannot be listed: said)."""
    if placement:
        return (
            f">>> ISOLATION: the examples' sandboxes run as containers on the local cluster's real "
            f"node {node.NODE_NAME} (the operator's placement for sandboxes that name none: "
            f"{placement['PADDOCK_SANDBOX_NODE_SELECTOR']}; restricted Pod Security, "
            "NetworkPolicies enforced)."
        )
    try:
        load_kubeconfig()
        listed = client.CoreV1Api().list_node(_request_timeout=10)
    except Exception as exc:  # e.g. a user who may not list nodes
        return f"!!! ISOLATION: unknown (the cluster's nodes could not be listed: {exc})"
    nodes: list[dict[str, Any]] = client.ApiClient().sanitize_for_serialization(listed)["items"]
    return isolation_notice(nodes)


def current_cluster_answers() -> bool:
    try:
        load_kubeconfig()
        client.VersionApi().get_code(_request_timeout=3)
    except Exception:
        return False
    return True


def _kubectl() -> str:
    return shutil.which("kubectl") or str(ensure_binaries().kubectl)


def _run(*argv: str) -> None:
    print("+ " + " ".join(argv), file=sys.stderr)
    subprocess.run(argv, check=True)


def node_packages() -> None:
    """Install the real node's Debian packages where they are missing (root only; without root
    the script says so and installs nothing)."""
    _run(str(REPO_ROOT / "hack" / "node-packages.sh"))


def local_placement(directory: Path) -> dict[str, str]:
    """The operator's settings that put sandboxes naming no placement on the local cluster's
    real node, in the sandbox image built for it; none where it has no real node."""
    state = ClusterState.load(directory)
    if state is None or not state.node:
        return {}
    image = cluster.load_image(directory, "sandbox")  # cold: Node.js and the agent CLIs
    return cluster.sandbox_placement().settings() | {"PADDOCK_SANDBOX_IMAGE": image}


def _cluster() -> tuple[str, dict[str, str]]:
    """The kubeconfig of the cluster to use (the local one, started, where none answers), and
    the operator's placement of sandboxes when it is the local one with its real node."""
    directory = cluster.default_state_dir()
    if current_cluster_answers():
        kubeconfig = kubeconfig_files()
        print("dev: using the cluster of the current kubeconfig", file=sys.stderr)
        own = (directory / "kubeconfig").resolve()
        local = any(Path(f).resolve() == own for f in kubeconfig.split(os.pathsep) if f)
        return kubeconfig, local_placement(directory) if local else {}
    print("dev: no cluster answers; starting the local one", file=sys.stderr)
    node_packages()
    kubeconfig = str(cluster.up(directory))
    os.environ["KUBECONFIG"] = kubeconfig
    return kubeconfig, local_placement(directory)


def run_dev(*, operator: bool = True) -> int:
    began = time.monotonic()
    try:
        kubeconfig, placement = _cluster()
    except (cluster.ClusterError, images.ImageError, subprocess.CalledProcessError) as exc:
        print(f"dev: the local cluster did not start: {exc}", file=sys.stderr)
        return 1
    for name, value in placement.items():  # the operator's, started below (yours first)
        os.environ.setdefault(name, value)
    # Said before anything that runs an agent is applied.
    print(_isolation(placement) + "\n", file=sys.stderr)
    kubectl = _kubectl()
    _run(kubectl, "apply", "--server-side", "-k", str(REPO_ROOT / "crds"))
    crds = [f"crd/{kind.kind_info.plural}.{GROUP}" for kind in KINDS]
    print("+ waiting for the CRDs to be Established", file=sys.stderr)
    try:
        wait_established([kubectl], crds)
    except cluster.ClusterError as exc:
        print(f"dev: {exc}", file=sys.stderr)
        return 1
    _run(kubectl, "apply", "-k", str(REPO_ROOT / "examples"))
    print(NEXT_STEPS.format(kubeconfig=kubeconfig), file=sys.stderr)
    if placement and not operator:
        said = "\n".join(f"  export {name}={value!r}" for name, value in placement.items())
        print(f"Run the operator with the real node's placement:\n{said}\n", file=sys.stderr)
    print(f"dev: ready for the operator after {time.monotonic() - began:.0f}s", file=sys.stderr)
    if not operator:
        return 0
    from paddock.operator_main import run_operator

    return run_operator(namespaces=[], liveness="", priority=None, log_format="text", verbose=False)
