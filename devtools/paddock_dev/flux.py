"""Flux on the local cluster: its source-controller (fetches a git repository, serves each
revision as an artifact) and kustomize-controller (applies an artifact's manifests, server-side,
and waits for their health), as processes of this host with the cluster's admin credentials,
for the GitOps tests. Started the first time something asks for it (``ensure``): its CRDs are
installed then; it is stopped with the cluster.

They watch every namespace and keep no leader lease; the source-controller serves its artifacts
on a loopback port, which it also advertises to the kustomize-controller."""

from __future__ import annotations

import fcntl
import os
import subprocess
import urllib.request
from pathlib import Path

from paddock_dev.binaries import Binaries
from paddock_dev.processes import (
    ClusterError,
    ClusterState,
    alive,
    free_ports,
    spawn,
    wait_established,
    wait_until,
)

SOURCE = "flux-source-controller"
KUSTOMIZE = "flux-kustomize-controller"
COMPONENTS = (SOURCE, KUSTOMIZE)
NAMESPACE = "flux-system"  # the controllers' own (RUNTIME_NAMESPACE); they hold nothing there


def ensure(binaries: Binaries, state: ClusterState) -> None:
    """Flux's CRDs installed and both controllers running and ready (one caller at a time: a
    lock in the cluster's directory)."""
    with (state.directory / "flux.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fresh = ClusterState.load(state.directory)
        if fresh is None:
            raise ClusterError("the local cluster is not up")
        if all(alive(fresh, component) for component in COMPONENTS):
            return
        _install_crds(binaries, fresh)
        for component in COMPONENTS:
            if not alive(fresh, component):
                _start(binaries, fresh, component)


def _install_crds(binaries: Binaries, state: ClusterState) -> None:
    kubectl = [str(binaries.kubectl), f"--kubeconfig={state.kubeconfig}"]
    files = sorted(binaries.flux_crds.glob("*.yaml"))
    applied = subprocess.run(
        [*kubectl, "apply", "--server-side", "--force-conflicts", "--field-manager=paddock-dev",
         *(f"-f={path}" for path in files)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if applied.returncode != 0:
        raise ClusterError(f"flux: its CRDs were refused: {applied.stderr.strip()[-500:]}")
    names = [f"crd/{path.name.removesuffix('.yaml').split('_', 1)[1]}.{_group(path)}"
             for path in files]  # fmt: skip
    wait_established(kubectl, names)
    namespace = subprocess.run(
        [*kubectl, "create", "namespace", NAMESPACE], capture_output=True, text=True, check=False
    )
    if namespace.returncode != 0 and "AlreadyExists" not in namespace.stderr:
        raise ClusterError(f"flux: namespace {NAMESPACE}: {namespace.stderr.strip()[-500:]}")


def _group(path: Path) -> str:
    """The API group of a CRD file named ``GROUP_PLURAL.yaml``."""
    return path.name.split("_", 1)[0]


def _start(binaries: Binaries, state: ClusterState, component: str) -> None:
    names = (f"{component}-health", f"{component}-metrics") + (
        ("flux-artifacts",) if component == SOURCE else ()
    )
    if any(name not in state.ports for name in names):
        state.ports |= free_ports(tuple(name for name in names if name not in state.ports))
        state.record(*names)
    health = f"127.0.0.1:{state.ports[f'{component}-health']}"
    argv = [
        str(binaries.flux_dir / component.removeprefix("flux-")),
        f"--health-addr={health}",
        f"--metrics-addr=127.0.0.1:{state.ports[f'{component}-metrics']}",
        "--enable-leader-election=false",
        "--log-encoding=console",
    ]
    if component == SOURCE:
        artifacts = f"127.0.0.1:{state.ports['flux-artifacts']}"
        storage = state.directory / "flux" / "artifacts"
        storage.mkdir(parents=True, exist_ok=True)
        argv += [f"--storage-path={storage}", f"--storage-addr={artifacts}",
                 f"--storage-adv-addr={artifacts}"]  # fmt: skip
    env = os.environ | {"KUBECONFIG": str(state.kubeconfig), "RUNTIME_NAMESPACE": NAMESPACE}
    process = spawn(state, component, argv, env=env)
    wait_until(state, component, process, lambda: _ready(health), "ready")


def _ready(address: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{address}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
