"""Kubernetes API access as plain dicts, in the API's own camelCase shape.

Requests go through the client's connection pool as JSON in and out (``_request``), so what the
services see is exactly what ``kubectl get -o json`` shows, not the client's Python models.
Every function raises ``paddock.kube.errors.KubeError`` (never the client's ``ApiException``).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from kubernetes import client, config
from urllib3.util.retry import Retry

from paddock import GROUP, VERSION
from paddock.kube.errors import (
    ConflictError,
    NoClusterConfigError,
    NotFoundError,
    converting,
)
from paddock.vocab import secret_data

Obj = dict[str, Any]


# Connections kept open to the API server (``tune`` sets them for the operator: one per
# thread that may be mid-request), and the longest a request may take (connect, then each
# read): a connection that hangs without closing must not hold its thread, or the reconcile
# of its key, for ever.
POOL_SIZE = 168
REQUEST_TIMEOUT: tuple[float, float] = (10.0, 60.0)
# A 429 (the API server's priority and fairness turning a request away, before doing
# anything) is sent again after the Retry-After the server gives, or after a backoff of
# 0.25, 0.5, 1, 2, 4 s; after that, the caller sees the refusal. Nothing else is retried
# here: a write whose answer was lost is not sent twice; a 409 goes back to the reconcile,
# which reads again.
THROTTLED_RETRY = Retry(
    total=None,
    connect=0,
    read=0,
    redirect=0,
    other=0,
    status=5,
    status_forcelist=(429,),
    allowed_methods=None,
    backoff_factor=0.25,
    respect_retry_after_header=True,
    raise_on_status=False,
)
_shared: client.ApiClient | None = None
_shared_lock = threading.Lock()


def kubeconfig_files() -> str:
    """The kubeconfig file(s) to read now: ``$KUBECONFIG`` as it is at this moment (a list
    separated by ``:`` as kubectl takes it), else ``~/.kube/config``. The client library reads
    ``$KUBECONFIG`` once, when it is imported, so every load names the file explicitly."""
    return os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def load_kubeconfig() -> None:
    """Load the kubeconfig named now (``kubeconfig_files``); raises ``NoClusterConfigError``
    with one line saying what was looked for when there is none to load."""
    files = kubeconfig_files()
    if not any(Path(f).expanduser().is_file() for f in files.split(os.pathsep) if f):
        raise NoClusterConfigError(
            f"no cluster to talk to: not in a pod, and no kubeconfig at {files} "
            "(set KUBECONFIG, or start the local cluster with `make dev`)"
        )
    try:
        config.load_kube_config(config_file=files)
    except config.ConfigException as exc:
        raise NoClusterConfigError(f"the kubeconfig at {files} cannot be used: {exc}") from exc


def load_config() -> None:
    """In a pod, the service account; elsewhere, the current kubeconfig. Every later call
    shares one API client, and so one pool of kept-alive connections."""
    global _shared
    try:
        config.load_incluster_config()
    except config.ConfigException:
        load_kubeconfig()
    with _shared_lock:
        _shared = None  # the next call builds one from this configuration


def tune(pool_size: int, request_timeout: float) -> None:
    """Size the shared client's connections and bound its requests (before the first)."""
    global _shared, POOL_SIZE, REQUEST_TIMEOUT
    with _shared_lock:
        POOL_SIZE, REQUEST_TIMEOUT = pool_size, (min(10.0, request_timeout), request_timeout)
        _shared = None


def _client() -> client.ApiClient:
    """The shared API client (thread-safe: urllib3 pools are). A new client per call would
    mean a new connection pool, and a TLS handshake, for every request."""
    global _shared
    with _shared_lock:
        if _shared is None:
            configuration = client.Configuration.get_default_copy()
            configuration.connection_pool_maxsize = POOL_SIZE
            configuration.retries = THROTTLED_RETRY
            _shared = client.ApiClient(configuration)
        return _shared


def server_url() -> str:
    """The API server's URL, as the loaded configuration has it."""
    return str(_client().configuration.host)


def current_namespace() -> str:
    """The namespace of the current kubeconfig context, or ``default``."""
    try:
        _, context = config.list_kube_config_contexts(config_file=kubeconfig_files())
        return str((context or {}).get("context", {}).get("namespace") or "default")
    except (config.ConfigException, OSError):
        return "default"


# Where each kind lives: its API path prefix (before ``/namespaces/...``) and plural.
_BUILTIN: dict[str, tuple[str, str]] = {
    "Pod": ("/api/v1", "pods"),
    "PersistentVolumeClaim": ("/api/v1", "persistentvolumeclaims"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Secret": ("/api/v1", "secrets"),
    "Event": ("/api/v1", "events"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
}
PADDOCK_PLURALS = {
    "Workspace": "workspaces",
    "SandboxPolicy": "sandboxpolicies",
    "Sandbox": "sandboxes",
    "SandboxPool": "sandboxpools",
    "AgentRun": "agentruns",
}
# Custom kinds, by group, version and plural: Paddock's own, and the snapshots it takes.
_CUSTOM = {kind: (GROUP, VERSION, plural) for kind, plural in PADDOCK_PLURALS.items()} | {
    "VolumeSnapshot": ("snapshot.storage.k8s.io", "v1", "volumesnapshots"),
}
# A patch of a built-in kind is a strategic merge (lists of containers, volumes ... merged by
# their keys), as kubectl's; custom kinds take a JSON merge patch.
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


def _path(kind: str, namespace: str, name: str = "", subresource: str = "") -> str:
    """The object's (or, without ``name``, the namespace's collection's) API path."""
    if kind in _BUILTIN:
        prefix, plural = _BUILTIN[kind]
    else:
        group, version, plural = _CUSTOM[kind]
        prefix = f"/apis/{group}/{version}"
    path = f"{prefix}/namespaces/{quote(namespace, safe='')}/{plural}"
    for part in (name, subresource):
        if part:
            path += f"/{quote(part, safe='')}"
    return path


def _request(
    method: str,
    path: str,
    body: Any = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> Obj:
    """One request, its answer decoded as JSON. The shared client's connections, retries (429)
    and credentials (refreshed as its configuration says), without the generated API methods:
    their validation of every argument and serialization of every body cost about a
    millisecond of CPU a call, more than the request itself. Raises ``ApiException`` for
    anything but 2xx (``converting`` makes it a ``KubeError``)."""
    from kubernetes.client.exceptions import ApiException

    api = _client()
    headers = {**api.default_headers, "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    queries = list((query or {}).items())
    api.update_params_for_auth(headers, queries, ["BearerToken"], path, method, body)
    url = str(api.configuration.host) + path + (f"?{urlencode(queries)}" if queries else "")
    response = api.call_api(
        method, url, header_params=headers, body=body, _request_timeout=REQUEST_TIMEOUT
    )
    body_bytes = response.read() or b"{}"
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=None, data=None)
    data: Obj = json.loads(body_bytes)
    return data


@converting
def _get(kind: str, namespace: str, name: str) -> Obj:
    return _request("GET", _path(kind, namespace, name))


def get(kind: str, namespace: str, name: str) -> Obj | None:
    """The object, or None when it does not exist."""
    try:
        return _get(kind, namespace, name)
    except NotFoundError:
        return None


@converting
def _create(obj: Obj) -> Obj:
    return _request("POST", _path(obj["kind"], obj["metadata"]["namespace"]), obj)


def create(obj: Obj) -> Obj | None:
    """Create the object: it as stored; None when its name is taken already."""
    try:
        return _create(obj)
    except ConflictError:
        return None


@converting
def patch(kind: str, namespace: str, name: str, body: Obj) -> Obj:
    """Patch an object (metadata, spec, a ConfigMap's data): it as stored after. A built-in
    kind's patch is a strategic merge, a custom kind's a JSON merge patch."""
    kind_type = STRATEGIC if kind in _BUILTIN else MERGE
    return _request("PATCH", _path(kind, namespace, name), body, content_type=kind_type)


def patch_if_unchanged(
    kind: str, namespace: str, name: str, body: Obj, resource_version: str
) -> Obj | None:
    """Merge-patch one of Paddock's objects only if it is still ``resource_version``: the
    object as stored after it; None when it changed since, or is gone (someone else's write
    came first: a claim that lost)."""
    meta = {**(body.get("metadata") or {}), "resourceVersion": resource_version}
    try:
        return patch(kind, namespace, name, {**body, "metadata": meta})
    except (ConflictError, NotFoundError):
        return None


@converting
def listed(kind: str, namespace: str) -> list[Obj]:
    """The objects of one of Paddock's kinds in the namespace, by name (a read for a person's
    tools; the operator reads from its watches, and lists only what they may not have shown
    yet)."""
    items: list[Obj] = _request("GET", _path(kind, namespace)).get("items", [])
    return sorted(items, key=lambda item: str(item["metadata"]["name"]))


@converting
def _delete(kind: str, namespace: str, name: str, uid: str | None, version: str | None) -> None:
    conditions = {"uid": uid} if uid else {}
    if version:
        conditions["resourceVersion"] = version
    body = {"preconditions": conditions} if conditions else None
    _request("DELETE", _path(kind, namespace, name), body)


def delete(
    kind: str, namespace: str, name: str, uid: str | None = None, version: str | None = None
) -> bool:
    """Delete the object (only if its uid is ``uid``, and its resourceVersion ``version``,
    when given: a ``ConflictError`` if the name now belongs to another object, or it changed);
    False when it was gone already."""
    try:
        _delete(kind, namespace, name, uid, version)
    except NotFoundError:
        return False
    return True


def patch_status(
    kind: str, namespace: str, name: str, status: Obj, resource_version: str | None = None
) -> Obj | None:
    """Merge-patch the status subresource of one of Paddock's own objects: the object as
    stored after it; None when the object was deleted meanwhile (nothing left to report on).
    With ``resource_version``, only if the object is still that version (a ``ConflictError``
    if it changed since)."""
    with contextlib.suppress(NotFoundError):
        return _patch_status(kind, namespace, name, status, resource_version)
    return None


@converting
def _patch_status(
    kind: str, namespace: str, name: str, status: Obj, resource_version: str | None
) -> Obj:
    body: Obj = {"status": status}
    if resource_version is not None:
        body["metadata"] = {"resourceVersion": resource_version}
    path = _path(kind, namespace, name, "status")
    return _request("PATCH", path, body, content_type=MERGE)


def read_secrets(namespace: str, names: Iterable[str]) -> dict[str, Obj | None]:
    """Each Secret named, read once (None: not there)."""
    return {name: get("Secret", namespace, name) for name in dict.fromkeys(names)}


def missing_secret_keys(namespace: str, refs: list[tuple[str, str]]) -> list[str]:
    """``"secret/key"`` for each (Secret, key) reference that does not resolve. Reads the key
    names only; values are never decoded."""
    return secret_data.missing_keys(read_secrets(namespace, (n for n, _ in refs)), refs)


def secret_values(namespace: str, refs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The decoded values of the (Secret, key) references that resolve. For passing API keys
    to a harness over exec stdin and for scrubbing them from events; never logged."""
    return secret_data.values(read_secrets(namespace, (n for n, _ in refs)), refs)


@converting
def list_configmaps(namespace: str, selector: str) -> list[Obj]:
    path = _path("ConfigMap", namespace)
    items: list[Obj] = _request("GET", path, query={"labelSelector": selector})["items"]
    return items


@converting
def replace_configmap(obj: Obj) -> Obj:
    """Replace a ConfigMap; its ``metadata.resourceVersion`` makes this fail with a conflict
    when someone else wrote it since it was read."""
    meta = obj["metadata"]
    return _request("PUT", _path("ConfigMap", meta["namespace"], meta["name"]), obj)


@converting
def create_configmap(obj: Obj) -> Obj:
    """Create a ConfigMap and return it as stored (with its resourceVersion)."""
    return _request("POST", _path("ConfigMap", obj["metadata"]["namespace"]), obj)
