"""A real node for the local cluster: containerd, runc, a CNI bridge and a kubelet on this
machine, next to kwok's pretend node, so that pods really run (init containers, exec, volumes).

Everything the node creates on the host is named after the cluster's state directory and
recorded in ``state.json`` before it is created, so ``down`` removes exactly that:

- processes: containerd (its own root, state and socket), the kubelet, local-path-provisioner,
  the CSI node plugin, and the containers' shims and processes (found by their cgroup and
  containerd address);
- mounts under the state directory (container root filesystems, volumes, network namespaces);
- a Linux bridge ``pdk<id>`` with its veths, and one MASQUERADE rule for the pod subnet;
- the NetworkPolicy controller, its nftables table and one rule (``network_policies``);
- a cgroup ``/paddock-<id>`` in each hierarchy, the kubelet's cgroup root.

The node is tainted (``paddock.dev/node=real:NoSchedule``), so only pods that ask for it run
there; it has its own StorageClasses: ``paddock-node-local``, served by rancher's
local-path-provisioner (a host process), whose volumes are directories under the state dir, and
``paddock-node-csi``, with snapshots: the local CSI driver's volumes (provisioned and
snapshotted by the kwok-agent, as kwok's), which the node plugin ``hack/csi-node`` bind-mounts.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from paddock_dev import gateway, images, local_snapshots, network_policies, services
from paddock_dev.binaries import Binaries
from paddock_dev.certs import client_kubeconfig, issue_client_cert
from paddock_dev.processes import (
    ClusterError,
    ClusterState,
    alive,
    free_ports,
    spawn,
    terminate,
    wait_until,
)

NODE_NAME = "paddock-node"
NODE_LABEL = "paddock.dev/node"
NODE_TAINT = f"{NODE_LABEL}=real:NoSchedule"
STORAGE_CLASS = "paddock-node-local"
CSI_STORAGE_CLASS = "paddock-node-csi"  # snapshots: the local CSI driver's, mounted by csi-node
PROVISIONER = "paddock.dev/node-local-path"
PROVISIONER_NAMESPACE = "paddock-node"
CNI_BIN = Path("/usr/lib/cni")
HOST_TOOLS = (
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "ctr",
    "ip",
    "iptables",
    "nft",
    "mount",
)
CNI_PLUGINS = ("bridge", "host-local", "loopback")
# Pods of the node and the (pretend) pods of kwok use different ranges.
SUBNET_BASE = ipaddress.ip_network("10.245.0.0/16")
RUN_ROOT = Path("/run/paddock")
CSI_NODE = "csi-node"
COMPONENTS = (
    "containerd",
    "kubelet",
    "local-path-provisioner",
    network_policies.COMPONENT,
    services.COMPONENT,
    CSI_NODE,
    gateway.COMPONENT,
)

Kubectl = Callable[..., str]  # kubectl(*args, stdin=None) against the cluster, as admin


# --- whether it can run -------------------------------------------------------------------------


def unavailable_reason() -> str | None:
    """Why this machine cannot run a real node, or None when it can."""
    setting = os.environ.get("PADDOCK_REAL_NODE", "auto")
    if setting in ("0", "false", "off", "no"):
        return f"it is turned off (PADDOCK_REAL_NODE={setting})"
    if os.geteuid() != 0:
        return "it needs root (it creates containers, mounts and network interfaces)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs"
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool) is None]
    missing += [f"{CNI_BIN}/{p}" for p in CNI_PLUGINS if not (CNI_BIN / p).is_file()]
    if missing:
        return (
            f"{', '.join(missing)} not found (hack/node-packages.sh installs containerd, runc, "
            "the CNI plugins, iptables and nftables from Debian's packages)"
        )
    fence = network_policies.unavailable_reason()
    if fence is not None:
        return f"its NetworkPolicies could not be enforced: {fence}"
    if host_ip() is None:
        return "the host has no non-loopback IPv4 address for the kubelet"
    return None


def required() -> bool:
    """PADDOCK_REAL_NODE=1: a node that cannot start fails ``up`` instead of falling back."""
    return os.environ.get("PADDOCK_REAL_NODE", "auto") in ("1", "true", "on", "yes")


def host_ip() -> str | None:
    """The address the host reaches the world from (where the API server finds the kubelet),
    else its first global IPv4 address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # TEST-NET-3; a UDP connect sends nothing
            address: str = probe.getsockname()[0]
            return address
        except OSError:
            pass
    listing = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True
    ).stdout.split()
    addresses = [listing[i + 1] for i, word in enumerate(listing[:-1]) if word == "inet"]
    return addresses[0].split("/")[0] if addresses else None


# --- names of what it creates -------------------------------------------------------------------


def _run(argv: list[str], *, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise ClusterError(f"real node: `{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result.stdout


def _used_subnets() -> set[str]:
    routes = _run(["ip", "-4", "route", "show"], check=False).split()
    return {word for word in routes if "/" in word}


@dataclass(frozen=True)
class NodePlan:
    """Names and addresses of one cluster's real node, unique to its state directory on this
    host; recorded in ``state.json`` before anything named here is created."""

    ident: str
    subnet: str
    host_ip: str
    root: Path  # <state>/node: configs, containerd's root, the kubelet's, volumes, pod logs

    @property
    def bridge(self) -> str:
        return f"pdk{self.ident}"  # interface names are at most 15 characters

    @property
    def bridge_mac(self) -> str:
        """The bridge's own MAC address, fixed (locally administered, from the ident). A
        bridge left to choose takes the lowest of its ports' addresses, so it changed as pods
        came and went, and a pod that had the old one cached reached the host through nothing
        until it asked again (the CNI bridge plugin fixes it too, but only on a bridge it
        makes: this one is made before its first pod)."""
        octets = bytes.fromhex(self.ident)[:3]  # (six hex digits)
        return ":".join(f"{b:02x}" for b in (0x02, 0x70, 0x64, *octets))

    @property
    def gateway(self) -> str:
        """The bridge's own address: the host, as its pods see it."""
        return str(next(ipaddress.ip_network(self.subnet).hosts()))

    @property
    def cgroup(self) -> str:
        return f"paddock-{self.ident}"

    @property
    def run_dir(self) -> Path:
        return RUN_ROOT / self.ident  # short: unix socket paths are limited to 107 bytes

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    def to_state(self) -> dict[str, str]:
        return {"ident": self.ident, "subnet": self.subnet, "host_ip": self.host_ip,
                "root": str(self.root)}  # fmt: skip

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> NodePlan | None:
        if not data:
            return None
        return cls(data["ident"], data["subnet"], data["host_ip"], Path(data["root"]))


def plan(state: ClusterState) -> NodePlan:
    """The node's plan for this state directory: the same each time, except that a /24 some
    other interface routes already is passed over."""
    digest = hashlib.sha256(str(state.directory.resolve()).encode()).hexdigest()
    subnets = list(SUBNET_BASE.subnets(new_prefix=24))
    used = _used_subnets()
    start = int(digest[6:10], 16) % len(subnets)
    for offset in range(len(subnets)):
        subnet = subnets[(start + offset) % len(subnets)]
        if str(subnet) not in used:
            break
    else:
        raise ClusterError(f"real node: every /24 of {SUBNET_BASE} is routed already")
    address = host_ip()
    if address is None:
        raise ClusterError("real node: the host has no non-loopback IPv4 address")
    return NodePlan(digest[:6], str(subnet), address, state.directory / "node")


def masquerade_rule(node: NodePlan) -> list[str]:
    subnet = node.subnet
    return [
        "POSTROUTING", "-s", subnet, "!", "-d", subnet, "-j", "MASQUERADE",
        "-m", "comment", "--comment", f"paddock node {node.ident}",
    ]  # fmt: skip


# --- configuration ------------------------------------------------------------------------------


def _containerd_config(node: NodePlan) -> str:
    root = node.root
    return f"""version = 2
root = "{root / "containerd"}"
state = "{node.run_dir}/state"
[grpc]
  address = "{node.socket}"
[ttrpc]
  address = "{node.socket}.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{images.PAUSE_IMAGE}"
  # Root here may lack CAP_SYS_RESOURCE: a negative oom_score_adj would then fail every pod.
  restrict_oom_score_adj = true
  # Network namespaces under the state directory, so down finds ours and no other.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{node.run_dir}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{root / "cni"}"
"""


def _cni_config(node: NodePlan) -> dict[str, Any]:
    return {
        "cniVersion": "0.4.0",
        "name": f"paddock-{node.ident}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": node.bridge,
                "isGateway": True,
                # Outgoing NAT is one rule of our own (see up), not one chain per pod.
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": node.subnet}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node.root / "cni-ipam"),
                },
            }
        ],
    }


def _kubelet_config(state: ClusterState, node: NodePlan) -> dict[str, Any]:
    root = node.root
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.host_ip,
        "port": state.ports["kubelet"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": state.ports["kubelet-healthz"],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(state.pki.ca_cert)},
        },
        # Only holders of a certificate from the cluster's CA get past authentication.
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{node.cgroup}",
        "containerRuntimeEndpoint": f"unix://{node.socket}",
        "failSwapOn": False,
        # Images are imported, not pulled: garbage collection must never remove them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi"},
        "localStorageCapacityIsolation": False,
        "makeIPTablesUtilChains": False,
        "podLogsDir": str(root / "pod-logs"),
        "registerWithTaints": [{"key": NODE_LABEL, "value": "real", "effect": "NoSchedule"}],
        "resolvConf": "/etc/resolv.conf",
        "serializeImagePulls": False,
    }


def _provisioner_files(node: NodePlan) -> tuple[dict[str, Any], dict[str, Any], str]:
    """local-path-provisioner's config, its helper pod, and the ConfigMap of its scripts."""
    config = {"nodePathMap": [{"node": NODE_NAME, "paths": [str(node.root / "volumes")]}]}
    helper = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "helper-pod"},
        "spec": {
            "securityContext": {"runAsUser": 0, "runAsGroup": 0},
            "containers": [
                {
                    "name": "helper",
                    "image": images.SANDBOX_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
        },
    }
    scripts = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "local-path-config", "namespace": PROVISIONER_NAMESPACE},
        "data": {
            "setup": 'set -eu\nmkdir -m 0777 -p "$VOL_DIR"\n',
            "teardown": 'set -eu\nrm -rf "$VOL_DIR"\n',
        },
    }
    manifests = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PROVISIONER_NAMESPACE}},
        scripts,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": STORAGE_CLASS},
            "provisioner": PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            # Without the Node authorizer, the kubelet's rights come from the system:node role.
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "paddock-node-kubelet"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:node",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
            ],
        },
    ]
    return config, helper, yaml.safe_dump_all(manifests)


# --- cgroups ------------------------------------------------------------------------------------


def cgroup_dirs(name: str) -> list[Path]:
    """The cgroup ``name`` in every hierarchy (cgroup v1), or in the one tree (v2)."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").is_file():
        return [base / name]
    return [
        entry / name
        for entry in sorted(base.iterdir())
        if entry.is_dir() and not entry.is_symlink() and (entry / "cgroup.procs").is_file()
    ]


def _create_cgroups(name: str) -> None:
    for directory in cgroup_dirs(name):
        directory.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # a v1 cpuset starts empty: inherit
            if (directory / knob).is_file() and not (directory / knob).read_text().strip():
                (directory / knob).write_text((directory.parent / knob).read_text())


def cgroup_processes(name: str) -> list[int]:
    pids: set[int] = set()
    for directory in cgroup_dirs(name):
        for procs in directory.rglob("cgroup.procs") if directory.is_dir() else []:
            try:
                pids.update(int(line) for line in procs.read_text().split())
            except OSError:
                continue
    return sorted(pids)


def _remove_cgroups(name: str) -> None:
    for directory in cgroup_dirs(name):
        if not directory.is_dir():
            continue
        # Children first (bottom-up); a cgroup directory is removed with rmdir, never its
        # files. The kubelet may be removing some of them meanwhile: a walk that finds one
        # gone goes on (os.walk ignores it), where rglob raised FileNotFoundError.
        for parent, children, _ in os.walk(directory, topdown=False):
            for child in children:
                with contextlib.suppress(OSError):
                    (Path(parent) / child).rmdir()
        with contextlib.suppress(OSError):
            directory.rmdir()


# --- up -----------------------------------------------------------------------------------------


def _ctr(node: NodePlan, *args: str) -> str:
    return _run(["ctr", f"--address={node.socket}", "--namespace=k8s.io", *args])


def import_images(node: NodePlan, wanted: list[images.Image]) -> None:
    """Import image archives into the node's containerd, where pods find them by reference;
    one containerd has already, under its reference, is not imported again (a 1.4 GB
    archive is tens of seconds on a loaded machine, and each real-node test asks for it)."""
    for image in wanted:
        listed = _ctr(node, "images", "ls", f"name=={image.reference}")
        if images.manifest_digest(image.archive) in listed:
            continue
        started = time.monotonic()
        _ctr(node, "images", "import", str(image.archive))
        print(
            f"  containerd: imported {image.reference} ({time.monotonic() - started:.1f}s)",
            file=sys.stderr,
        )


def _node_condition(kubectl: Kubectl) -> str:
    try:
        return kubectl(
            "get", "node", NODE_NAME,
            "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
        )  # fmt: skip
    except ClusterError:
        return ""


def start(binaries: Binaries, state: ClusterState, kubectl: Kubectl) -> None:
    """Bring the node up and wait until it is Ready. Every host resource is recorded in the
    state before it is created; on failure the caller's ``down`` removes what there is."""
    node = plan(state)
    state.node = node.to_state()
    state.ports |= free_ports(("kubelet", "kubelet-healthz"))
    state.save()
    root = node.root
    for sub in ("cni", "volumes", "pod-logs", "kubelet", "pki"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    node.run_dir.mkdir(parents=True, exist_ok=True)
    wanted = images.node_images()  # built and cached the first time (about a minute)

    (root / "containerd.toml").write_text(_containerd_config(node))
    (root / "cni" / "10-paddock.conflist").write_text(json.dumps(_cni_config(node), indent=2))
    _create_cgroups(node.cgroup)
    _create_bridge(node)
    _run(["iptables", "-t", "nat", "-A", *masquerade_rule(node)])

    containerd = spawn(
        state, "containerd", [_which("containerd"), f"--config={root / 'containerd.toml'}"]
    )
    wait_until(
        state, "containerd", containerd,
        lambda: node.socket.is_socket() and _answers(node), "serving",
    )  # fmt: skip
    import_images(node, wanted)

    cert, key = root / "pki" / "kubelet-client.crt", root / "pki" / "kubelet-client.key"
    issue_client_cert(state.pki, f"system:node:{NODE_NAME}", "system:nodes", cert, key)
    server = f"https://127.0.0.1:{state.ports['apiserver']}"
    kubeconfig = client_kubeconfig(server, state.pki, "kubelet", cert, key)
    (root / "kubelet.kubeconfig").write_text(kubeconfig)
    (root / "kubelet.yaml").write_text(yaml.safe_dump(_kubelet_config(state, node)))
    config, helper, manifests = _provisioner_files(node)
    (root / "local-path.json").write_text(json.dumps(config))
    (root / "local-path-helper.yaml").write_text(yaml.safe_dump(helper))
    kubectl("apply", "-f", "-", stdin=manifests)

    kubelet = spawn(
        state,
        "kubelet",
        [
            str(binaries.kubelet),
            f"--config={root / 'kubelet.yaml'}",
            f"--kubeconfig={root / 'kubelet.kubeconfig'}",
            f"--root-dir={root / 'kubelet'}",
            f"--cert-dir={root / 'pki'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={node.host_ip}",
            f"--node-labels={NODE_LABEL}=real",
            "--v=1",
        ],
        # Without iptables on its PATH the kubelet adds no chains of its own to the host's
        # firewall (KUBE-FIREWALL, canaries), which no other process would remove; the node
        # needs none: containerd's CNI plugins do the pods' networking.
        env={**os.environ, "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )
    spawn(
        state,
        "local-path-provisioner",
        [
            str(binaries.local_path_provisioner),
            "start",
            f"--kubeconfig={state.kubeconfig}",
            f"--config={root / 'local-path.json'}",
            f"--provisioner-name={PROVISIONER}",
            f"--namespace={PROVISIONER_NAMESPACE}",
            f"--helper-image={images.SANDBOX_IMAGE}",
            f"--helper-pod-file={root / 'local-path-helper.yaml'}",
            "--configmap-name=local-path-config",
            "--service-account-name=default",
        ],
    )
    wait_until(
        state, "kubelet", kubelet, lambda: _node_condition(kubectl) == "True",
        f"node {NODE_NAME} Ready",
    )  # fmt: skip
    network_policies.start(binaries, state, node, kubectl)
    services.start(state, node, NODE_NAME, kubectl, sys.executable)
    _start_csi_node(binaries, state, node, kubectl)
    gateway.start(state, node, kubectl)


def _start_csi_node(
    binaries: Binaries, state: ClusterState, node: NodePlan, kubectl: Kubectl
) -> None:
    """The node plugin of the local CSI driver, registered with the kubelet, and its
    StorageClass and VolumeSnapshotClass: volumes the kwok-agent provisions and snapshots, that
    this plugin mounts into the node's pods."""
    registry = node.root / "kubelet" / "plugins_registry"
    process = spawn(
        state,
        CSI_NODE,
        [
            str(binaries.csi_node),
            f"--driver-name={local_snapshots.NODE_DRIVER}",
            f"--node-id={NODE_NAME}",
            f"--root={state.directory / 'volumes'}",
            f"--csi-socket={node.run_dir / 'csi.sock'}",
            # Short: a socket path has at most 107 bytes, and the kubelet's root may be deep
            # (no longer here than the kubelet's own pod-resources/kubelet.sock).
            f"--registration-socket={registry / 'p.sock'}",
        ],
    )
    jsonpath = "jsonpath={.spec.drivers[*].name}"

    def registered() -> bool:
        found = kubectl("get", "csinode", NODE_NAME, "-o", jsonpath, "--ignore-not-found")
        return local_snapshots.NODE_DRIVER in found.split()

    wait_until(state, CSI_NODE, process, registered, f"{local_snapshots.NODE_DRIVER} registered")
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": CSI_STORAGE_CLASS},
        "provisioner": local_snapshots.NODE_DRIVER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    manifests = local_snapshots.manifests(
        local_snapshots.NODE_DRIVER, local_snapshots.NODE_SNAPSHOT_CLASS
    )
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all([storage_class, *manifests]))


def _create_bridge(node: NodePlan) -> None:
    """The pods' bridge with its gateway address, made now rather than by the CNI plugin at the
    first pod: its route then marks the subnet as taken for any other cluster's plan."""
    prefix = ipaddress.ip_network(node.subnet).prefixlen
    _run(["ip", "link", "add", "name", node.bridge, "address", node.bridge_mac, "type", "bridge"])
    _run(["ip", "address", "add", f"{node.gateway}/{prefix}", "dev", node.bridge])
    _run(["ip", "link", "set", node.bridge, "up"])


def _which(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ClusterError(f"real node: {tool} not found")
    return path


def _answers(node: NodePlan) -> bool:
    try:
        _ctr(node, "version")
    except ClusterError:
        return False
    return True


# --- down ---------------------------------------------------------------------------------------


def _processes_naming(text: str) -> list[int]:
    """Processes whose command line contains ``text`` (the shims name their containerd)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _mounts_under(directories: list[Path]) -> list[str]:
    """Mount points at or under any of ``directories``, deepest first."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")  # octal escapes: \040 etc.
        if any(point == str(d) or point.startswith(f"{d}/") for d in directories):
            points.append(point)
    return sorted(set(points), key=lambda p: -p.count("/"))


def stop(state: ClusterState) -> None:
    """Remove what ``start`` created, in an order that leaves nothing running or mounted:
    kubelet, the containers' processes, shims and containerd, mounts, network, cgroups."""
    node = NodePlan.from_state(state.node)
    if node is None:
        return
    for component in COMPONENTS[1:]:
        pid = state.pids.get(component)
        if pid is not None and alive(state, component):
            terminate([pid])
    network_policies.remove_rules(node)
    services.remove_table(services.table_name(node))
    _kill(cgroup_processes(node.cgroup))
    _kill(_processes_naming(f"-address {node.socket}"))
    pid = state.pids.get("containerd")
    if pid is not None and alive(state, "containerd"):
        terminate([pid])
    directories = [node.root.resolve(), node.run_dir]
    for point in _mounts_under(directories):
        _run(["umount", "--lazy", point], check=False)
    bridge = node.bridge
    if Path(f"/sys/class/net/{bridge}").exists():
        for veth in Path(f"/sys/class/net/{bridge}/brif").iterdir():
            _run(["ip", "link", "delete", veth.name], check=False)
        _run(["ip", "link", "delete", bridge], check=False)
    rule = masquerade_rule(node)
    while rule_exists(rule):
        _run(["iptables", "-t", "nat", "-D", *rule])
    _remove_cgroups(node.cgroup)
    shutil.rmtree(node.run_dir, ignore_errors=True)
    with contextlib.suppress(OSError):
        RUN_ROOT.rmdir()  # only when no other cluster's node uses it
    left = _mounts_under(directories)
    if left:
        raise ClusterError(f"real node: still mounted after down: {', '.join(left)}")
    state.node = {}
    for component in COMPONENTS:
        state.pids.pop(component, None)
        state.commands.pop(component, None)
    state.save()


def rule_exists(rule: list[str]) -> bool:
    check = subprocess.run(["iptables", "-t", "nat", "-C", *rule], capture_output=True)
    return check.returncode == 0
