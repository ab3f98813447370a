"""Give each pod on the local kwok node its own exec working directory.

kwok runs a ``pods/exec`` request as a local process configured by an ``Exec`` object named
after the pod. This small watcher creates one per pod, with the working directory
``<root>/<namespace>/<pod>`` and ``HOME`` inside it, owned by the pod so that garbage
collection removes it; it removes the directory when the pod is gone.

It stands in for a container's filesystem without any isolation: processes run on the host.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger("paddock.execdirs")

KWOK_GROUP, KWOK_VERSION = "kwok.x-k8s.io", "v1alpha1"


def pod_dir(root: Path, namespace: str, name: str) -> Path:
    return root / namespace / name


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
                        "envs": [
                            {"name": "HOME", "value": str(directory / "home")},
                            {"name": "POD_NAME", "value": meta.name},
                            {"name": "POD_NAMESPACE", "value": meta.namespace},
                        ],
                    }
                }
            ]
        },
    }


def _key(pod: Any) -> tuple[str, str]:
    return pod.metadata.namespace, pod.metadata.name


def ensure_exec(custom: client.CustomObjectsApi, pod: Any, root: Path) -> None:
    directory = pod_dir(root, pod.metadata.namespace, pod.metadata.name)
    (directory / "home").mkdir(parents=True, exist_ok=True)
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


def run_forever(node: str, root: Path) -> None:
    """Keep watching through API errors and dropped connections, with a capped backoff."""
    backoff = 0.5
    while True:
        try:
            run(node, root)
        except Exception:
            log.exception("watch failed; retrying in %.1fs", backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


def run(node: str, root: Path) -> None:
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    selector = f"spec.nodeName={node}"
    while True:
        pods = core.list_pod_for_all_namespaces(field_selector=selector)
        for pod in pods.items:
            ensure_exec(custom, pod, root)
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
                    shutil.rmtree(
                        pod_dir(root, pod.metadata.namespace, pod.metadata.name),
                        ignore_errors=True,
                    )
                elif event["type"] in ("ADDED", "MODIFIED"):
                    ensure_exec(custom, pod, root)
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
    run_forever(args.node, args.root)


if __name__ == "__main__":
    main()
