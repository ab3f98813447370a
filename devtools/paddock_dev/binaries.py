"""Where the local cluster's binaries are: built once by hack/k8s-binaries.sh and cached."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "hack" / "k8s-binaries.sh"


def cache_dir() -> Path:
    """Where built binaries and images are kept (the build script's ``$PADDOCK_CACHE``)."""
    if "PADDOCK_CACHE" in os.environ:
        return Path(os.environ["PADDOCK_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "paddock"


@dataclass(frozen=True)
class Binaries:
    kubernetes: Path
    etcd_dir: Path
    kwok_dir: Path
    snapshot_crds: Path
    snapshot_controller_dir: Path
    kubelet_dir: Path
    local_path_dir: Path
    network_policies_dir: Path
    csi_node_dir: Path
    versitygw_dir: Path
    gitea_dir: Path
    flux_dir: Path  # source-controller, kustomize-controller and crds/

    @property
    def kubelet(self) -> Path:
        return self.kubelet_dir / "kubelet"

    @property
    def local_path_provisioner(self) -> Path:
        return self.local_path_dir / "local-path-provisioner"

    @property
    def snapshot_controller(self) -> Path:
        return self.snapshot_controller_dir / "snapshot-controller"

    @property
    def network_policies(self) -> Path:
        return self.network_policies_dir / "paddock-network-policies"

    @property
    def csi_node(self) -> Path:
        return self.csi_node_dir / "paddock-csi-node"

    @property
    def versitygw(self) -> Path:
        return self.versitygw_dir / "versitygw"

    @property
    def gitea(self) -> Path:
        return self.gitea_dir / "gitea"

    @property
    def flux_crds(self) -> Path:
        return self.flux_dir / "crds"

    @property
    def kube_apiserver(self) -> Path:
        return self.kubernetes / "kube-apiserver"

    @property
    def kube_controller_manager(self) -> Path:
        return self.kubernetes / "kube-controller-manager"

    @property
    def kube_scheduler(self) -> Path:
        return self.kubernetes / "kube-scheduler"

    @property
    def kubectl(self) -> Path:
        return self.kubernetes / "kubectl"

    @property
    def etcd(self) -> Path:
        return self.etcd_dir / "etcd"

    @property
    def kwok(self) -> Path:
        return self.kwok_dir / "kwok"

    @property
    def kwok_exec_crd(self) -> Path:
        return self.kwok_dir / "crds" / "kwok.x-k8s.io_execs.yaml"


def ensure_binaries(*, real_node: bool = True, forge: bool = False, flux: bool = False) -> Binaries:
    """Build what is missing (the script's progress goes to stderr) and return the paths;
    without ``real_node``, not the real node's binaries, without ``forge``, not the forge
    (which only the delivery tests start), and without ``flux``, not Flux's controllers (which
    only the GitOps tests start); their paths are returned all the same.

    The script is idempotent and returns at once when everything is cached.
    """
    if not BUILD_SCRIPT.is_file():
        raise RuntimeError(
            f"{BUILD_SCRIPT} not found: the local cluster is run from a Paddock source checkout"
        )
    env = (
        os.environ
        | ({} if real_node else {"PADDOCK_REAL_NODE": "0"})
        | ({"PADDOCK_FORGE": "1"} if forge else {})
        | ({"PADDOCK_FLUX": "1"} if flux else {})
    )
    output = subprocess.run(
        [str(BUILD_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True, env=env
    ).stdout
    paths = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    return Binaries(
        kubernetes=Path(paths["K8S_BIN"]),
        etcd_dir=Path(paths["ETCD_BIN"]),
        kwok_dir=Path(paths["KWOK_BIN"]),
        snapshot_crds=Path(paths["SNAPSHOT_CRDS"]),
        snapshot_controller_dir=Path(paths["SNAPSHOT_CONTROLLER_BIN"]),
        kubelet_dir=Path(paths["KUBELET_BIN"]),
        local_path_dir=Path(paths["LOCAL_PATH_BIN"]),
        network_policies_dir=Path(paths["NETWORK_POLICIES_BIN"]),
        csi_node_dir=Path(paths["CSI_NODE_BIN"]),
        versitygw_dir=Path(paths["VERSITYGW_BIN"]),
        gitea_dir=Path(paths["GITEA_BIN"]),
        flux_dir=Path(paths["FLUX_BIN"]),
    )
