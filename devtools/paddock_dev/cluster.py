"""``paddock cluster up | down | status``: the local control plane as processes we own.

Every process is started in its own session with its pid recorded in ``state.json`` before
anything waits on it, so ``down`` can stop whatever ``up`` started, even after a failed start.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from paddock_dev import flux, forge, images, local_snapshots, node, object_store
from paddock_dev.binaries import Binaries, ensure_binaries
from paddock_dev.certs import Pki, generate_pki
from paddock_dev.kwok_agent import PROVISIONER, STORAGE_CLASS
from paddock_dev.processes import (
    ClusterError as ClusterError,  # re-exported: callers use cluster.ClusterError/State
)
from paddock_dev.processes import (
    ClusterState as ClusterState,
)
from paddock_dev.processes import (
    alive,
    free_ports,
    spawn,
    terminate,
    wait_established,
    wait_until,
)

NODE_NAME = "paddock-kwok"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.1/24"
STAGES = Path(__file__).with_name("kwok-stages.yaml")
HOSTS = (
    "127.0.0.1",
    "localhost",
    "10.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def default_state_dir() -> Path:
    if "PADDOCK_CLUSTER_DIR" in os.environ:
        return Path(os.environ["PADDOCK_CLUSTER_DIR"])
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "paddock" / "cluster"


def _pods_processes(pods_dir: Path) -> list[int]:
    """Processes whose working directory is a kwok pod directory: what exec left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = (entry / "cwd").resolve()
        except OSError:
            continue
        if cwd == pods_dir or pods_dir in cwd.parents:
            found.append(int(entry.name))
    return found


# --- the API server ----------------------------------------------------------------------------


def _ssl_context(pki: Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_cert))
    context.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return context


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as response:  # noqa: S310
            return bool(response.status == 200)
    except OSError:
        return False


def api_ready(state: ClusterState) -> bool:
    port = state.ports.get("apiserver")
    if port is None or not state.pki.ca_cert.is_file():
        return False
    return _http_ok(f"https://127.0.0.1:{port}/readyz", _ssl_context(state.pki))


def write_kubeconfig(state: ClusterState) -> None:
    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "paddock-local",
                "cluster": {
                    "server": f"https://127.0.0.1:{state.ports['apiserver']}",
                    "certificate-authority-data": b64(state.pki.ca_cert),
                },
            }
        ],
        "users": [
            {
                "name": "paddock-admin",
                "user": {
                    "client-certificate-data": b64(state.pki.admin_cert),
                    "client-key-data": b64(state.pki.admin_key),
                },
            }
        ],
        "contexts": [
            {
                "name": "paddock-local",
                "context": {"cluster": "paddock-local", "user": "paddock-admin"},
            }
        ],
        "current-context": "paddock-local",
    }
    state.kubeconfig.write_text(yaml.safe_dump(config))
    state.kubeconfig.chmod(0o600)


def kubectl(binaries: Binaries, state: ClusterState, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(binaries.kubectl), f"--kubeconfig={state.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _node_manifest() -> str:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": {KWOK_NODE_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
    }
    return yaml.safe_dump(node)


def _storage_class_manifest() -> str:
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        # The node is known only once a pod using the claim is scheduled.
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    return yaml.safe_dump_all([storage_class, *local_snapshots.manifests()])


# --- up / down / status ------------------------------------------------------------------------


def _control_plane_argv(
    b: Binaries, s: ClusterState, api_address: str | None
) -> dict[str, list[str]]:
    """``api_address``: the host address pods on the real node reach the API server at (it then
    listens on every interface); None: loopback only."""
    p, pki = s.ports, s.pki
    api = f"https://127.0.0.1:{p['apiserver']}"
    return {
        "etcd": [
            str(b.etcd),
            f"--data-dir={s.directory / 'etcd'}",
            "--name=paddock",
            f"--listen-client-urls=http://127.0.0.1:{p['etcd']}",
            f"--advertise-client-urls=http://127.0.0.1:{p['etcd']}",
            f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
            f"--initial-cluster=paddock=http://127.0.0.1:{p['etcd-peer']}",
            # A throwaway test cluster: durability is not worth the fsync latency.
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(b.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{p['etcd']}",
            # With a real node, pods reach it at the host's address: listen there too.
            f"--bind-address={'0.0.0.0' if api_address else '127.0.0.1'}",  # noqa: S104
            f"--advertise-address={api_address or '127.0.0.1'}",
            f"--secure-port={p['apiserver']}",
            f"--cert-dir={s.directory / 'apiserver'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-issuer={api}",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            f"--kubelet-client-certificate={pki.admin_cert}",
            f"--kubelet-client-key={pki.admin_key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--profiling=false",
            # What service accounts (the operator's identity in tests) do, for the RBAC test.
            f"--audit-policy-file={_audit_policy(s)}",
            f"--audit-log-path={audit_log(s.directory)}",
            "--audit-log-format=json",
            "--audit-log-maxsize=500",
            "--audit-log-maxbackup=1",
        ],
        "kube-controller-manager": [
            str(b.kube_controller_manager),
            f"--kubeconfig={s.kubeconfig}",
            f"--authentication-kubeconfig={s.kubeconfig}",
            f"--authorization-kubeconfig={s.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={p['controller-manager']}",
            "--leader-elect=false",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
            "--use-service-account-credentials=false",
            "--profiling=false",
        ],
        "kube-scheduler": [
            str(b.kube_scheduler),
            f"--kubeconfig={s.kubeconfig}",
            f"--authentication-kubeconfig={s.kubeconfig}",
            f"--authorization-kubeconfig={s.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={p['scheduler']}",
            "--leader-elect=false",
            "--profiling=false",
        ],
        "kwok": [
            str(b.kwok),
            f"--kubeconfig={s.kubeconfig}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            f"--config={STAGES}",
            "--enable-crds=Exec",
            "--node-ip=127.0.0.1",
            f"--node-port={p['kwok']}",
            f"--server-address=127.0.0.1:{p['kwok']}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--cidr={POD_CIDR}",
            "--node-lease-duration-seconds=40",
        ],
        "snapshot-controller": [
            str(b.snapshot_controller),
            f"--kubeconfig={s.kubeconfig}",
            "--leader-election=false",
            # No VolumeGroupSnapshot CRDs here: without this it waits 30 s for them first.
            "--feature-gates=CSIVolumeGroupSnapshot=false",
            f"--http-endpoint=127.0.0.1:{p['snapshot-controller']}",
            "--v=2",
        ],
        "kwok-agent": [
            sys.executable,
            "-m",
            "paddock_dev.kwok_agent",
            f"--kubeconfig={s.kubeconfig}",
            f"--node={NODE_NAME}",
            f"--root={s.directory}",
        ],
    }


# The images built on demand, by the name ``paddock cluster load-NAME`` gives them: the name
# of their cache, and their recipe.
ON_DEMAND = {
    "operator": ("operator", images.operator_recipe),
    "sandbox": ("paddock-sandbox", images.paddock_sandbox_recipe),
    "gateway": ("gateway", images.gateway_recipe),
}


def load_image(directory: Path, name: str) -> str:
    """Build an image on demand (cached by its recipe: the operator's from this checkout's
    source, the published sandbox image's content) and import it into the running cluster's
    real node; returns the image reference."""
    state = ClusterState.load(directory)
    plan = node.NodePlan.from_state(state.node) if state else None
    if plan is None:
        raise ClusterError(f"no local cluster with a real node in {directory}")
    cached_as, recipe = ON_DEMAND[name]
    image = images.ensure_image(cached_as, recipe())
    node.import_images(plan, [image])
    return image.reference


@dataclass(frozen=True)
class Placement:
    """Where pods go to run on the real node (its label and taint), and the volumes' class
    there (the CSI one, whose volumes can be snapshotted)."""

    node_selector: dict[str, str]
    tolerations: list[dict[str, str]]
    storage_class: str

    def settings(self) -> dict[str, str]:
        """As the operator's PADDOCK_SANDBOX_* settings."""
        selector = ",".join(f"{k}={v}" for k, v in self.node_selector.items())
        return {
            "PADDOCK_SANDBOX_NODE_SELECTOR": selector,
            "PADDOCK_SANDBOX_TOLERATIONS": json.dumps(self.tolerations),
            "PADDOCK_SANDBOX_STORAGE_CLASS": self.storage_class,
        }


def sandbox_placement() -> Placement:
    toleration = {"key": node.NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}
    return Placement({node.NODE_LABEL: "real"}, [toleration], node.CSI_STORAGE_CLASS)


# The gateway Service's address in the values ``chart_values`` writes: a fixed one, so that
# sandboxes reach the gateway without DNS (the local cluster has none). In the low part of the
# service range, which the API server hands out last on its own.
GATEWAY_CLUSTER_IP = "10.0.0.12"
HELM_VALUES = "helm-values.yaml"


def start_flux(directory: Path) -> None:
    """Flux's source-controller and kustomize-controller on the running cluster (built the
    first time: a few minutes), as the GitOps tests use them."""
    state = ClusterState.load(directory)
    if state is None:
        raise ClusterError(f"no local cluster in {directory}")
    flux.ensure(ensure_binaries(flux=True), state)


def chart_values(directory: Path) -> Path:
    """Build every image the chart deploys (the operator's, which the console and the MCP
    server run too, the gateway's and the sandboxes'), import them into the real node, and
    write a values file that points the chart at them and its pods at the real node."""
    built = {name: load_image(directory, name) for name in ("operator", "gateway", "sandbox")}
    repository, tag = built["operator"].rsplit(":", 1)
    placement = sandbox_placement()
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "operator": {
            "sandboxImage": built["sandbox"],
            "sandboxNodeSelector": placement.node_selector,
            "sandboxTolerations": placement.tolerations,
            "sandboxStorageClass": placement.storage_class,
        },
        "gateway": {"image": built["gateway"], "clusterIP": GATEWAY_CLUSTER_IP},
        "nodeSelector": placement.node_selector,
        "tolerations": placement.tolerations,
    }
    path = directory / HELM_VALUES
    path.write_text(
        "# Written by `paddock cluster images` (make images): the chart's images as built from\n"
        "# this checkout and imported into the local cluster's real node, and its pods there.\n"
        + yaml.safe_dump(values, sort_keys=False)
    )
    return path


def status(directory: Path) -> dict[str, bool]:
    """Component -> running, plus ``api`` -> /readyz answers."""
    state = ClusterState.load(directory)
    if state is None:
        return {}
    report = {component: alive(state, component) for component in state.pids}
    report["api"] = api_ready(state)
    return report


# Bumped when the control plane's flags change: a cluster started by an older revision is
# restarted by the next ``up`` rather than reused.
REVISION = 8
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
"""


def _audit_policy(state: ClusterState) -> Path:
    return state.directory / "audit-policy.yaml"


def audit_log(directory: Path) -> Path:
    """The API server's audit log: every request a service account made, as JSON lines."""
    return directory / "logs" / "audit.log"


def _revision(directory: Path) -> int:
    try:
        return int((directory / "revision").read_text())
    except (OSError, ValueError):
        return 0


def is_up(directory: Path) -> bool:
    report = status(directory)
    return bool(report) and all(report.values())


# How long ``up`` waits for a running cluster's API server to answer ready before it takes it
# for a stale one and starts over: a loaded machine answers /readyz slowly, and starting over
# would pull the cluster from under every test using it.
READY_WAIT_SECONDS = 60.0


# Services tests stop on purpose and start again themselves (a forge out of reach, an object
# store down), and those started on demand: one of them down is no reason to start the whole
# cluster over.
STOPPABLE = (forge.COMPONENT, object_store.COMPONENT, *flux.COMPONENTS)


def _running(directory: Path) -> bool:
    """Whether a cluster runs in ``directory``: every component's process alive (but the
    STOPPABLE services', which are said), and its API server ready within
    READY_WAIT_SECONDS."""
    report = status(directory)
    down = [component for component, alive in report.items() if not alive and component != "api"]
    if not report or any(component not in STOPPABLE for component in down):
        return False
    if down:
        print(f"cluster: running with {', '.join(down)} stopped", file=sys.stderr)
    state = ClusterState.load(directory)
    deadline = time.monotonic() + READY_WAIT_SECONDS
    while state is not None and not report["api"] and time.monotonic() < deadline:
        time.sleep(0.5)
        report["api"] = api_ready(state)  # (each try waits up to its own 2 s timeout)
    return report["api"]


def _real_node_wanted(real_node: bool | None) -> bool:
    """Whether to start the real node: where this machine can, unless told not to; say why
    not, so that nobody mistakes kwok's pretend pods for real ones."""
    if real_node is False:
        return False
    reason = node.unavailable_reason()
    if reason is None:
        return True
    if real_node or node.required():
        raise ClusterError(f"a real node was asked for, but cannot run here: {reason}")
    print(
        f"cluster: no real node ({reason}); kwok only: pods are simulated, init containers "
        "do not run and exec runs on this host",
        file=sys.stderr,
    )
    return False


def up(directory: Path, *, real_node: bool | None = None) -> Path:
    """Start the cluster (or find it running) and return its kubeconfig.

    ``real_node``: None starts a real node next to kwok's where the machine can run one
    (``PADDOCK_REAL_NODE=0`` turns it off, ``=1`` makes it required); False never; True
    requires it. Its binaries are built first where they are not yet (cold: many minutes)."""
    if _revision(directory) == REVISION and _running(directory):
        print(f"cluster: already running in {directory}", file=sys.stderr)
        return directory / "kubeconfig"
    if directory.exists():
        down(directory)  # a stale or half-started cluster: start over cleanly
    started = time.monotonic()
    with_node = _real_node_wanted(real_node)
    binaries = ensure_binaries(real_node=with_node)
    print(f"cluster: binaries ready after {time.monotonic() - started:.0f}s", file=sys.stderr)
    directory.mkdir(parents=True)
    state = ClusterState(directory)
    state.ports = free_ports(
        (
            "etcd",
            "etcd-peer",
            "apiserver",
            "controller-manager",
            "scheduler",
            "kwok",
            "snapshot-controller",
            object_store.COMPONENT,
        )
    )
    state.pods_dir.mkdir()
    state.volumes_dir.mkdir()
    # Pods on the real node reach the API server at the host's address (no kube-proxy runs).
    api_address = node.host_ip() if with_node else None
    generate_pki(state.pki.directory, (*HOSTS, api_address) if api_address else HOSTS)
    write_kubeconfig(state)
    _audit_policy(state).write_text(AUDIT_POLICY)
    (directory / "revision").write_text(f"{REVISION}\n")
    state.save()
    argv = _control_plane_argv(binaries, state, api_address)
    print(f"cluster: starting in {directory}", file=sys.stderr)
    try:
        etcd = spawn(state, "etcd", argv["etcd"])
        wait_until(
            state,
            "etcd",
            etcd,
            lambda: _http_ok(f"http://127.0.0.1:{state.ports['etcd']}/health"),
            "healthy",
        )
        apiserver = spawn(state, "kube-apiserver", argv["kube-apiserver"])
        wait_until(state, "kube-apiserver", apiserver, lambda: api_ready(state), "ready")
        controllers = spawn(state, "kube-controller-manager", argv["kube-controller-manager"])
        spawn(state, "kube-scheduler", argv["kube-scheduler"])
        crds = [binaries.kwok_exec_crd, *sorted(binaries.snapshot_crds.glob("*.yaml"))]
        kubectl(binaries, state, "apply", "--server-side", *(f"-f={crd}" for crd in crds))
        kubectl(binaries, state, "apply", "-f", "-", stdin=_node_manifest())
        wait_established(
            [str(binaries.kubectl), f"--kubeconfig={state.kubeconfig}"], ["crd/execs.kwok.x-k8s.io"]
        )
        spawn(state, "snapshot-controller", argv["snapshot-controller"])
        kwok = spawn(state, "kwok", argv["kwok"])
        kubectl(binaries, state, "apply", "-f", "-", stdin=_storage_class_manifest())
        spawn(state, "kwok-agent", argv["kwok-agent"])
        object_store.start(
            binaries, state, lambda *args, **kw: kubectl(binaries, state, *args, **kw)
        )
        wait_until(
            state, "kwok", kwok, lambda: _node_ready(binaries, state), f"node {NODE_NAME} Ready"
        )
        wait_until(
            state,
            "kube-controller-manager",
            controllers,
            lambda: _has_default_service_account(binaries, state),
            "default service account created",
        )
        if with_node:
            _start_node(binaries, state, required=bool(real_node) or node.required())
    except BaseException:
        down(directory, quiet=True, keep_logs=True)
        raise
    print(f"cluster: up in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return state.kubeconfig


def _start_node(binaries: Binaries, state: ClusterState, *, required: bool) -> None:
    """Start the real node; unless it is required, a node that fails to start leaves the
    cluster running on kwok alone, with the reason said and the node's traces removed."""
    try:
        node.start(binaries, state, lambda *args, **kw: kubectl(binaries, state, *args, **kw))
    except (ClusterError, images.ImageError, OSError) as exc:
        if required:
            raise ClusterError(f"the real node did not start: {exc}") from exc
        node.stop(state)
        print(
            f"cluster: the real node did not start ({exc}); kwok only: pods are simulated "
            f"(logs in {state.log('kubelet').parent})",
            file=sys.stderr,
        )


def _node_ready(binaries: Binaries, state: ClusterState) -> bool:
    try:
        ready = kubectl(
            binaries,
            state,
            "get",
            "node",
            NODE_NAME,
            "-o",
            'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
        )
    except ClusterError:
        return False
    return ready == "True"


def _has_default_service_account(binaries: Binaries, state: ClusterState) -> bool:
    try:
        kubectl(binaries, state, "get", "serviceaccount", "default", "-n", "default")
    except ClusterError:
        return False
    return True


def down(directory: Path, *, quiet: bool = False, keep_logs: bool = False) -> None:
    """Stop every process ``up`` started, and what exec left in pod directories; remove the
    state (except, after a failed start, the logs that say why)."""
    state = ClusterState.load(directory)
    if state is not None:
        node.stop(state)  # first: containers must not outlive their kubelet and runtime
        ours = [pid for component, pid in state.pids.items() if alive(state, component)]
        # One at a time, in reverse start order: an API server whose etcd is stopping with it
        # hangs in its shutdown until it is killed.
        for pid in reversed(ours):
            terminate([pid])
        if state.pods_dir.is_dir():
            terminate(_pods_processes(state.pods_dir.resolve()))
    if keep_logs and (directory / "logs").is_dir():
        for entry in directory.iterdir():
            if entry.name != "logs":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        if not quiet:
            print(f"cluster: stopped; logs kept in {directory / 'logs'}", file=sys.stderr)
        return
    shutil.rmtree(directory, ignore_errors=True)
    if not quiet:
        print(f"cluster: stopped and removed {directory}", file=sys.stderr)
