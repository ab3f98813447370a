"""Helpers for tests of Workspaces and Sandboxes on a cluster."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from paddock.vocab.names import GATE_CONTAINER
from support.kube import Cluster
from support.waiting import wait_for


def workspace(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": name},
        "spec": {"setup": ["echo ready"], **spec},
    }


def sandbox(name: str, workspace_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Sandbox",
        "metadata": {"name": name},
        "spec": {"workspaceRef": {"name": workspace_name}, **spec},
    }


def secret(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def assert_never_shown(value: str, seen: dict[str, str]) -> None:
    """``value``, plain or base64-encoded, is in none of the texts (named by where they are)."""
    encoded = base64.b64encode(value.encode()).decode()
    for where, text in seen.items():
        assert value not in text, where
        assert encoded not in text, where


def get(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any] | None:
    result = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
    if result.returncode != 0:
        return None
    obj: dict[str, Any] = json.loads(result.stdout)
    return obj


def status_of(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    obj = get(cluster, namespace, kind, name) or {}
    status: dict[str, Any] = obj.get("status") or {}
    return status


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def wait_for_phase(
    cluster: Cluster, namespace: str, name: str, phase: str, timeout: float = 60
) -> dict[str, Any]:
    """The sandbox's status once it is in ``phase``; a timeout says where it was instead."""
    seen: dict[str, Any] = {}

    def reached() -> dict[str, Any] | None:
        seen.update(status=status_of(cluster, namespace, "sandbox", name))
        return seen["status"] if seen["status"].get("phase") == phase else None

    try:
        return wait_for(reached, timeout, what=f"sandbox {name} in phase {phase}")
    except TimeoutError as exc:
        last = seen.get("status") or {}
        said = [(c["type"], c["status"], c.get("reason")) for c in last.get("conditions", [])]
        raise TimeoutError(
            f"{exc}; it was {last.get('phase')}: {last.get('message')} {said}"
        ) from (exc.__cause__)


def wait_for_reason(
    cluster: Cluster, namespace: str, name: str, reason: str, timeout: float = 60
) -> dict[str, Any]:
    return wait_for(
        lambda: (
            condition(s := status_of(cluster, namespace, "sandbox", name), "Ready").get("reason")
            == reason
            and s
        ),
        timeout,
        what=f"sandbox {name} with Ready reason {reason}",
    )


def events_for(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items = json.loads(cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)
    return [e for e in items["items"] if e["involvedObject"]["name"] == name]


def posted(cluster: Cluster, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    """The object's Events of ``reason``, once there is one. The operator posts its Events
    through kopf's queue, after it wrote the status: a test that saw the status waits for
    them (under load they follow it by seconds)."""
    return wait_for(
        lambda: [e for e in events_for(cluster, namespace, name) if e["reason"] == reason],
        60,
        what=f"a {reason} Event of {name}",
    )


def merge_patch(
    cluster: Cluster,
    namespace: str,
    kind: str,
    name: str,
    patch: dict[str, Any],
    *,
    subresource: str | None = None,
) -> None:
    args = ["patch", kind, name, "-n", namespace, "--type=merge", "-p", json.dumps(patch)]
    if subresource:
        args.append(f"--subresource={subresource}")
    cluster.kubectl(*args)


def ready_sandbox(cluster: Cluster, namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    """A Workspace "app" and a Sandbox ``name`` of it, once the Sandbox is Ready."""
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox(name, "app", **spec), namespace)
    return wait_for_phase(cluster, namespace, name, "Ready")


def kwok_pod_dir(namespace: str, pod: str) -> Path:
    """Where a kwok pod's processes run on this host: ``image-bin/`` holds what its image
    would (first on their PATH)."""
    from paddock_dev import cluster as local
    from paddock_dev.kwok_agent import pod_dir

    return pod_dir(local.default_state_dir(), namespace, pod)


def install_in_image(namespace: str, pod: str, name: str, script: str) -> None:
    """Put an executable ``name`` into a kwok pod's "image", ahead of the host's programs."""
    from paddock_dev.kwok_agent import IMAGE_BIN

    bin_dir = kwok_pod_dir(namespace, pod) / IMAGE_BIN
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text(script)
    (bin_dir / name).chmod(0o755)


def project_on_kwok(cluster: Cluster, namespace: str, sandbox_name: str, scratch: Path) -> None:
    """What the pod's ``project`` init container does, done in a kwok pod (kwok runs no init
    containers): its own script, with the files of the sandbox's ConfigMap as mounted there,
    run in the pod's sandbox container, so the workspace holds what the Workspace projects."""
    pod = get(cluster, namespace, "pod", sandbox_name) or {}
    (files,) = [v["configMap"] for v in pod["spec"]["volumes"] if v["name"] == "files"]
    data = (get(cluster, namespace, "configmap", files["name"]) or {})["data"]
    for item in files["items"]:
        path = scratch / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(data[item["key"]])
    cluster.kubectl(
        "exec", "-n", namespace, sandbox_name, "-c", "sandbox", "--",
        "env", f"PADDOCK_FILES={scratch}", "bash", str(scratch / "project.sh"),
    )  # fmt: skip


def setup_containers(pod: dict[str, Any]) -> list[str]:
    """The init containers that prepare a sandbox's workspace (clone, project, setup), in
    order: not the gate's sidecar, which every sandbox pod has."""
    containers = pod.get("spec", {}).get("initContainers") or []
    return [c["name"] for c in containers if c["name"] != GATE_CONTAINER]
