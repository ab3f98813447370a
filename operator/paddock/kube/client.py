"""Kubernetes API access as plain dicts, in the API's own camelCase shape.

Objects are read with ``_preload_content=False`` and decoded as JSON, so what the handlers see
is exactly what ``kubectl get -o json`` shows, not the client's Python models.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from paddock import GROUP, VERSION

Obj = dict[str, Any]


def load_config() -> None:
    """In a pod, the service account; elsewhere, the current kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        # The client reads $KUBECONFIG when it is imported; read it now, when it is set.
        config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))


def current_namespace() -> str:
    """The namespace of the current kubeconfig context, or ``default``."""
    try:
        _, context = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
        return str((context or {}).get("context", {}).get("namespace") or "default")
    except (config.ConfigException, OSError):
        return "default"


def _decode(response: Any) -> Obj:
    data: Obj = json.loads(response.data)
    return data


def _core() -> client.CoreV1Api:
    return client.CoreV1Api()


def _custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi()


def _networking() -> client.NetworkingV1Api:
    return client.NetworkingV1Api()


_CORE_KINDS = {
    "Pod": "pod",
    "PersistentVolumeClaim": "persistent_volume_claim",
    "ConfigMap": "config_map",
    "Secret": "secret",
}
PADDOCK_PLURALS = {
    "Workspace": "workspaces",
    "SandboxPolicy": "sandboxpolicies",
    "Sandbox": "sandboxes",
    "AgentRun": "agentruns",
}


def get(kind: str, namespace: str, name: str) -> Obj | None:
    """The object, or None when it does not exist."""
    try:
        if kind in _CORE_KINDS:
            method = getattr(_core(), f"read_namespaced_{_CORE_KINDS[kind]}")
            return _decode(method(name, namespace, _preload_content=False))
        if kind == "NetworkPolicy":
            return _decode(
                _networking().read_namespaced_network_policy(
                    name, namespace, _preload_content=False
                )
            )
        return _decode(
            _custom().get_namespaced_custom_object(
                GROUP, VERSION, namespace, PADDOCK_PLURALS[kind], name, _preload_content=False
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def create(obj: Obj) -> bool:
    """Create the object; False when it exists already (creation is idempotent)."""
    kind, namespace = obj["kind"], obj["metadata"]["namespace"]
    try:
        if kind in _CORE_KINDS:
            getattr(_core(), f"create_namespaced_{_CORE_KINDS[kind]}")(namespace, obj)
        elif kind == "NetworkPolicy":
            body: Any = obj  # the client accepts plain dicts where it annotates its models
            _networking().create_namespaced_network_policy(namespace, body)
        else:
            _custom().create_namespaced_custom_object(
                GROUP, VERSION, namespace, PADDOCK_PLURALS[kind], obj
            )
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


def ensure(obj: Obj, field: str) -> None:
    """Create ``obj``, or patch its ``field`` (a ConfigMap's data, a NetworkPolicy's spec)
    when the existing object's differs."""
    meta = obj["metadata"]
    existing = get(obj["kind"], meta["namespace"], meta["name"])
    if existing is None:
        create(obj)
    elif existing.get(field) != obj[field]:
        patch: Any = {field: obj[field]}
        if obj["kind"] == "ConfigMap":
            _core().patch_namespaced_config_map(meta["name"], meta["namespace"], patch)
        elif obj["kind"] == "NetworkPolicy":
            _networking().patch_namespaced_network_policy(meta["name"], meta["namespace"], patch)
        else:
            raise ValueError(f"ensure() does not patch {obj['kind']}")


def delete(kind: str, namespace: str, name: str) -> bool:
    """Delete the object; False when it was gone already."""
    try:
        if kind in _CORE_KINDS:
            getattr(_core(), f"delete_namespaced_{_CORE_KINDS[kind]}")(name, namespace)
        elif kind == "NetworkPolicy":
            _networking().delete_namespaced_network_policy(name, namespace)
        else:
            _custom().delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PADDOCK_PLURALS[kind], name
            )
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def patch_status(kind: str, namespace: str, name: str, status: Obj) -> None:
    """Merge-patch the status subresource of one of Paddock's own objects."""
    try:
        _custom().patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PADDOCK_PLURALS[kind], name, {"status": status}
        )
    except ApiException as exc:
        if exc.status != 404:  # deleted meanwhile: nothing to report on
            raise


def missing_secret_keys(namespace: str, refs: list[tuple[str, str]]) -> list[str]:
    """``"secret/key"`` for each (Secret, key) reference that does not resolve. Reads the key
    names only; values are never decoded."""
    missing = []
    cache: dict[str, Obj | None] = {}
    for name, key in refs:
        if name not in cache:
            cache[name] = get("Secret", namespace, name)
        secret = cache[name]
        if secret is None or key not in (secret.get("data") or {}) | (
            secret.get("stringData") or {}
        ):
            missing.append(f"{name}/{key}")
    return missing


def list_configmaps(namespace: str, selector: str) -> list[Obj]:
    response = _core().list_namespaced_config_map(
        namespace, label_selector=selector, _preload_content=False
    )
    items: list[Obj] = _decode(response)["items"]
    return items


def replace_configmap(obj: Obj) -> Obj:
    """Replace a ConfigMap; its ``metadata.resourceVersion`` makes this fail with a 409 when
    someone else wrote it since it was read."""
    meta = obj["metadata"]
    body: Any = obj
    return _decode(
        _core().replace_namespaced_config_map(
            meta["name"], meta["namespace"], body, _preload_content=False
        )
    )


def create_configmap(obj: Obj) -> Obj:
    """Create a ConfigMap and return it as stored (with its resourceVersion)."""
    meta = obj["metadata"]
    body: Any = obj
    return _decode(
        _core().create_namespaced_config_map(meta["namespace"], body, _preload_content=False)
    )


def patch(kind: str, namespace: str, name: str, body: Obj) -> None:
    """Merge-patch one of Paddock's own objects (metadata or spec)."""
    _custom().patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PADDOCK_PLURALS[kind], name, body
    )


def secret_values(namespace: str, refs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The decoded values of the (Secret, key) references that resolve. For passing API keys
    to a harness over exec stdin and for scrubbing them from events; never logged."""
    values: dict[tuple[str, str], str] = {}
    cache: dict[str, Obj | None] = {}
    for name, key in refs:
        if name not in cache:
            cache[name] = get("Secret", namespace, name)
        data = (cache[name] or {}).get("data") or {}
        if key in data:
            values[(name, key)] = base64.b64decode(data[key]).decode(errors="replace")
    return values
