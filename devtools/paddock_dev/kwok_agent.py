"""What a kubelet and a storage provisioner would do for the local kwok node.

- Exec directories: kwok runs a ``pods/exec`` request as a local process configured by an
  ``Exec`` object named after the pod. This agent creates one per pod, with the working
  directory ``<root>/pods/<namespace>/<pod>``, owned by the pod so that garbage collection
  removes it, and removes the directory when the pod is gone. Its containers' mounts (one
  exec environment stands for them all: the first container's, then the sidecar's) appear
  under ``<pod dir>/fs/<mount path>`` (a claim's volume as a link to its directory, one file
  of a volume as an empty file, any other volume as a directory), and their literal env vars
  are passed on with any value naming a mount path translated, so ``$PADDOCK_WORKSPACE``
  names the pod's workspace volume. Its PATH
  stands in for the sandbox image's programs: ``<pod dir>/image-bin`` (empty unless something
  puts programs there, as tests do), the pinned agent CLIs that ``make agent-clis`` installed
  (the published sandbox image holds them), then the host's. It stands in for a container's
  filesystem without any isolation: processes run on the host.
- Volumes: PVCs of the ``paddock-local`` StorageClass (the default) get a PersistentVolume of
  the CSI driver ``local-path.paddock.dev`` whose handle is a directory under ``<root>/volumes``
  once the scheduler has picked the node (``WaitForFirstConsumer``); the volume and its
  directory go when the claim does. kwok mounts nothing, so no CSI node plugin is needed. The
  real node's ``paddock-node-csi`` claims get the same, of the driver ``node-local.paddock.dev``,
  which the node's CSI node plugin (``hack/csi-node``) bind-mounts into its pods. The drivers'
  snapshots are ``local_snapshots``'s, and a claim whose ``dataSource`` is a VolumeSnapshot
  starts as a copy of it (it waits until the snapshot is ready).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from paddock_dev import local_snapshots
from paddock_dev.binaries import REPO_ROOT, cache_dir

POD_UID = "PADDOCK_KWOK_POD_UID"
log = logging.getLogger("paddock.kwok_agent")

KWOK_GROUP, KWOK_VERSION = "kwok.x-k8s.io", "v1alpha1"
STORAGE_CLASS = "paddock-local"
NODE_STORAGE_CLASS = "paddock-node-csi"  # the real node's, mounted by its CSI node plugin
# A CSI driver provisions under its own name, which the matching VolumeSnapshotClass names too.
PROVISIONER = local_snapshots.DRIVER
# The StorageClasses this agent provisions, with their drivers: kwok's (claims of pods on the
# kwok node) and the real node's (claims of pods on it).
DRIVERS = {STORAGE_CLASS: PROVISIONER, NODE_STORAGE_CLASS: local_snapshots.NODE_DRIVER}
SELECTED_NODE = "volume.kubernetes.io/selected-node"
MOUNTED = "kwok.paddock.dev/mounted"  # kwok-stages.yaml starts a pod's containers only then


IMAGE_BIN = "image-bin"  # under a pod's directory: programs its "image" holds
AGENT_CLIS = REPO_ROOT / "hack" / "agent-clis" / "package.json"


def pod_dir(root: Path, namespace: str, name: str) -> Path:
    return root / "pods" / namespace / name


def agent_clis_bin() -> Path:
    """Where hack/agent-clis.sh installs the pinned CLIs (its cache key: package.json's hash)."""
    key = hashlib.sha256(AGENT_CLIS.read_bytes()).hexdigest()[:16] if AGENT_CLIS.is_file() else ""
    return cache_dir() / "agent-clis" / key / "node_modules" / ".bin"


def image_path(directory: Path) -> str:
    """The PATH of a pod's processes: its image's programs, then the host's."""
    host = os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    return ":".join([str(directory / IMAGE_BIN), str(agent_clis_bin()), host])


def _containers(pod: Any) -> list[Any]:
    """The first container, then the others and the init containers (the gate's sidecar)."""
    return [*(pod.spec.containers or []), *(pod.spec.init_containers or [])]


def _mounts(pod: Any) -> list[Any]:
    """Every container's mounts, the first's first; one per mount path."""
    seen: dict[str, Any] = {}
    for container in _containers(pod):
        for mount in container.volume_mounts or []:
            seen.setdefault(mount.mount_path, mount)
    return list(seen.values())


def _translate(value: str, directory: Path, mount_paths: list[str]) -> str:
    """A value naming a mount path (or a path under one) as the host path standing in for it."""
    for path in mount_paths:
        if value == path or value.startswith(path.rstrip("/") + "/"):
            return str(directory / "fs") + value
    return value


def exec_env(pod: Any, directory: Path) -> list[dict[str, str]]:
    mount_paths = sorted((m.mount_path for m in _mounts(pod)), key=len, reverse=True)
    env = {"HOME": str(directory / "home")}
    for index, container in enumerate(_containers(pod)):
        for var in container.env or []:
            if var.value is None:  # valueFrom (Secrets, fields) is not emulated
                continue
            if index == 0 or var.name not in env:  # the first container's win
                env[var.name] = _translate(var.value, directory, mount_paths)
    env |= {"POD_NAME": pod.metadata.name, "POD_NAMESPACE": pod.metadata.namespace}
    env[POD_UID] = pod.metadata.uid  # how end_processes knows the pod's processes
    env["PATH"] = image_path(directory)
    return [{"name": name, "value": value} for name, value in env.items()]


def link_mounts(core: client.CoreV1Api, pod: Any, directory: Path, root: Path) -> bool:
    """Make ``<pod dir>/fs/<mount path>`` for each mount of the first container: a link to the
    claim's volume directory once the claim is bound, a directory for anything else; whether
    every mount is there."""
    volumes = {v.name: v for v in pod.spec.volumes or []}
    complete = True
    for mount in _mounts(pod):
        target = directory / "fs" / mount.mount_path.lstrip("/")
        if target.exists() or target.is_symlink():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        volume = volumes.get(mount.name)
        claim = volume.persistent_volume_claim if volume is not None else None
        if mount.sub_path:  # one file of a volume (a shell startup file): empty here
            target.touch()
            continue
        if claim is None:
            target.mkdir()
            continue
        try:
            pvc: Any = core.read_namespaced_persistent_volume_claim(
                claim.claim_name, pod.metadata.namespace
            )
        except ApiException:
            complete = False  # not there yet
            continue
        source = root / "volumes" / f"pvc-{pvc.metadata.uid}"
        if pvc.status.phase != "Bound":
            complete = False
        elif pvc.spec.volume_name != source.name:  # a volume not of this agent: nothing here
            target.mkdir()
        elif source.is_dir():
            target.symlink_to(source)
        else:
            complete = False
    return complete


class Mounter:
    """Marks a pod ``MOUNTED`` once every mount of it is there; kwok's stages run its init
    containers and containers only then, as a kubelet mounts volumes before starting either
    (else a sandbox could be Ready, and a run launched in it, before its workspace is).
    A pod whose claim is not bound yet is looked at again every ``RETRY`` seconds."""

    RETRY = 0.2
    GIVE_UP = 600.0  # seconds

    def __init__(self, root: Path) -> None:
        self.root = root
        self._waiting: set[str] = set()  # pod uids with a retry pending
        self._lock = threading.Lock()

    def mount(self, core: client.CoreV1Api, pod: Any, waited: float = 0) -> None:
        if (pod.metadata.annotations or {}).get(MOUNTED):
            return
        directory = pod_dir(self.root, pod.metadata.namespace, pod.metadata.name)
        if not link_mounts(core, pod, directory, self.root):
            with self._lock:
                if pod.metadata.uid in self._waiting and not waited:
                    return  # its retries are under way
                self._waiting.add(pod.metadata.uid)
            if waited < self.GIVE_UP:
                retry = threading.Timer(self.RETRY, self._again, (pod, waited + self.RETRY))
                retry.daemon = True
                retry.start()
            return
        with self._lock:
            self._waiting.discard(pod.metadata.uid)
        body = {"metadata": {"annotations": {MOUNTED: "true"}}}
        try:
            core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace, body)
        except ApiException as exc:
            if exc.status != 404:
                log.warning("pod %s/%s not marked mounted: %s", *_key(pod), exc.reason)

    def _again(self, pod: Any, waited: float) -> None:
        core = client.CoreV1Api()
        try:
            fresh: Any = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
        except ApiException:
            fresh = None
        if fresh is None or fresh.metadata.uid != pod.metadata.uid:
            with self._lock:
                self._waiting.discard(pod.metadata.uid)
            return
        self.mount(core, fresh, waited)


def exec_object(pod: Any, directory: Path) -> dict[str, Any]:
    meta = pod.metadata
    return {
        "apiVersion": f"{KWOK_GROUP}/{KWOK_VERSION}",
        "kind": "Exec",
        "metadata": {
            "name": meta.name,
            "namespace": meta.namespace,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": meta.name, "uid": meta.uid}
            ],
        },
        "spec": {
            "execs": [
                {
                    "local": {
                        "workDir": str(directory),
                        "envs": exec_env(pod, directory),
                    }
                }
            ]
        },
    }


def _key(pod: Any) -> tuple[str, str]:
    return pod.metadata.namespace, pod.metadata.name


def ensure_exec(
    core: client.CoreV1Api, custom: client.CustomObjectsApi, pod: Any, mounter: Mounter
) -> None:
    directory = pod_dir(mounter.root, pod.metadata.namespace, pod.metadata.name)
    (directory / "home").mkdir(parents=True, exist_ok=True)
    mounter.mount(core, pod)
    try:
        custom.create_namespaced_custom_object(
            KWOK_GROUP, KWOK_VERSION, pod.metadata.namespace, "execs", exec_object(pod, directory)
        )
        log.info(
            "exec directory for %s/%s: %s", pod.metadata.namespace, pod.metadata.name, directory
        )
    except ApiException as exc:
        # 409: already there (a re-listed pod). Anything else (a namespace being deleted, say)
        # concerns this pod only: say so and carry on with the others.
        if exc.status != 409:
            log.warning("no exec directory for %s/%s: %s", *_key(pod), exc.reason)


def run_forever(name: str, loop: Callable[[], None]) -> None:
    """Keep a watch loop going through API errors and dropped connections."""
    backoff = 0.5
    while True:
        try:
            loop()
        except Exception:
            log.exception("%s: watch failed; retrying in %.1fs", name, backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


def volume_object(pvc: Any, node: str, directory: Path) -> dict[str, Any]:
    meta = pvc.metadata
    driver = DRIVERS[pvc.spec.storage_class_name]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta.uid}",
            "annotations": {"pv.kubernetes.io/provisioned-by": driver},
        },
        "spec": {
            "capacity": {"storage": pvc.spec.resources.requests["storage"]},
            "accessModes": pvc.spec.access_modes,
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": pvc.spec.storage_class_name,
            "csi": {"driver": driver, "volumeHandle": str(directory)},
            "claimRef": {"namespace": meta.namespace, "name": meta.name, "uid": meta.uid},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def provision_volumes(node: str, root: Path) -> None:
    core = client.CoreV1Api()
    for event in watch.Watch().stream(core.list_persistent_volume_claim_for_all_namespaces):
        pvc = event["object"]
        name = f"pvc-{pvc.metadata.uid}"
        if event["type"] == "DELETED":
            try:
                core.delete_persistent_volume(name)
            except ApiException as exc:
                if exc.status != 404:
                    log.warning("volume %s not deleted: %s", name, exc.reason)
            shutil.rmtree(root / "volumes" / name, ignore_errors=True)
            continue
        provision(core, pvc, node, root)


RESTORE_WAIT = 600.0  # seconds a claim waits for its snapshot to become ready


def provision(core: client.CoreV1Api, pvc: Any, node: str, root: Path, waited: float = 0) -> None:
    """A volume for a pending claim of ours (kwok's on its node, the real node's on that); one
    from a snapshot once it is ready (looked at again every second: a snapshot becoming ready
    changes nothing on the claim)."""
    annotations = pvc.metadata.annotations or {}
    selected = annotations.get(SELECTED_NODE)
    storage_class = pvc.spec.storage_class_name
    if (
        pvc.status.phase != "Pending"
        or storage_class not in DRIVERS
        or not selected
        or (storage_class == STORAGE_CLASS and selected != node)
    ):
        return
    node = selected
    name = f"pvc-{pvc.metadata.uid}"
    directory = root / "volumes" / name
    source = pvc.spec.data_source
    snapshot: Path | None = None
    if source is not None and source.kind == "VolumeSnapshot":
        snapshot = local_snapshots.snapshot_directory(pvc.metadata.namespace, source.name)
        if snapshot is None:
            if waited < RESTORE_WAIT:
                retry = threading.Timer(1.0, _provision_again, (pvc, node, root, waited + 1.0))
                retry.daemon = True
                retry.start()
            else:
                log.warning("volume %s: snapshot %s never became ready", name, source.name)
            return
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o777)  # any pod user may write, as on a fresh volume
    if snapshot is not None:
        local_snapshots.restore(snapshot, directory)
    try:
        volume: Any = volume_object(pvc, node, directory)  # the client takes plain dicts
        core.create_persistent_volume(volume)
        restored = f" from snapshot {source.name}" if snapshot is not None else ""
        log.info("volume %s for %s/%s%s", name, pvc.metadata.namespace, pvc.metadata.name, restored)
    except ApiException as exc:
        if exc.status != 409:
            log.warning("volume %s not created: %s", name, exc.reason)


def _provision_again(pvc: Any, node: str, root: Path, waited: float) -> None:
    core = client.CoreV1Api()
    try:
        fresh: Any = core.read_namespaced_persistent_volume_claim(
            pvc.metadata.name, pvc.metadata.namespace
        )
    except ApiException:
        return  # gone
    if fresh.metadata.uid == pvc.metadata.uid:
        provision(core, fresh, node, root, waited)


def end_processes(uid: str) -> None:
    """What a kubelet does as a pod goes: kill its processes (each exec runs with the pod's
    uid in its environment, and what it starts inherits it), twice, for what the first pass
    missed starting."""
    mark = f"{POD_UID}={uid}".encode()
    for _ in range(2):
        for proc in Path("/proc").iterdir():
            try:
                environ = (proc / "environ").read_bytes() if proc.name.isdigit() else b""
            except OSError:
                continue
            if mark in environ.split(b"\0"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(proc.name), signal.SIGKILL)


def watch_pods(node: str, root: Path) -> None:
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    mounter = Mounter(root)
    selector = f"spec.nodeName={node}"
    while True:
        pods = core.list_pod_for_all_namespaces(field_selector=selector)
        for pod in pods.items:
            ensure_exec(core, custom, pod, mounter)
        stream = watch.Watch().stream(
            core.list_pod_for_all_namespaces,
            field_selector=selector,
            resource_version=pods.metadata.resource_version if pods.metadata else None,
            timeout_seconds=300,
        )
        try:
            for event in stream:
                pod = event["object"]
                if event["type"] == "DELETED":
                    end_processes(pod.metadata.uid)
                    shutil.rmtree(
                        pod_dir(root, pod.metadata.namespace, pod.metadata.name),
                        ignore_errors=True,
                    )
                elif event["type"] in ("ADDED", "MODIFIED"):
                    ensure_exec(core, custom, pod, mounter)
        except ApiException as exc:
            if exc.status != 410:  # 410 Gone: the watch is too old; list again
                raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--root", required=True, type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    volumes = threading.Thread(
        target=run_forever,
        args=("volumes", lambda: provision_volumes(args.node, args.root)),
        daemon=True,
    )
    volumes.start()
    snapshots = threading.Thread(
        target=run_forever,
        args=("snapshots", local_snapshots.Snapshotter(args.root).watch),
        daemon=True,
    )
    snapshots.start()
    run_forever("exec directories", lambda: watch_pods(args.node, args.root))


if __name__ == "__main__":
    main()
