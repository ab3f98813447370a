"""Watches: a listing's resourceVersion, then each change after it, until the server ends the
watch. The callers list again when a watch's version has expired."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from paddock.kube.client import _CUSTOM
from paddock.kube.client import _client as _shared_client
from paddock.kube.errors import converted, converting

Obj = dict[str, Any]
API_SERVER_NAMESPACE = "default"  # where the API server publishes the Service kubernetes
CONNECT_SECONDS = 10


def _decode(response: Any) -> Obj:
    """A listing read with ``_preload_content=False``, as JSON (not the client's models)."""
    data: Obj = json.loads(response.data)
    return data


def _core() -> client.CoreV1Api:
    return client.CoreV1Api(_shared_client())


def _custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(_shared_client())


class WatchExpiredError(Exception):
    """410: the resourceVersion a watch started from is older than the server keeps; list
    again and watch from the new listing."""


@converting
def list_configmaps_at(namespace: str, selector: str) -> tuple[list[Obj], str]:
    """The ConfigMaps the selector picks, and the listing's resourceVersion to watch from."""
    listing = _decode(
        _core().list_namespaced_config_map(
            namespace, label_selector=selector, _preload_content=False
        )
    )
    return listing["items"], str(listing["metadata"]["resourceVersion"])


def watch_configmaps(
    namespace: str, selector: str, resource_version: str, timeout_seconds: int
) -> Iterator[tuple[str, Obj]]:
    """Each change to the ConfigMaps the selector picks after ``resource_version``, as
    ``(ADDED|MODIFIED|DELETED, object)``, until the server ends the watch after
    ``timeout_seconds``. Only what changes is sent: nothing already listed is read again."""
    return _watched(
        _core().list_namespaced_config_map,
        namespace,
        label_selector=selector,
        resource_version=resource_version,
        timeout_seconds=timeout_seconds,
    )


def watch_one(
    kind: str, namespace: str, name: str, resource_version: str, timeout_seconds: int
) -> Iterator[tuple[str, Obj]]:
    """Each change to one Paddock object after ``resource_version``, as ``(type, object)``,
    until the server ends the watch after ``timeout_seconds``."""
    selector = f"metadata.name={name}"
    return watch_in(kind, namespace, resource_version, timeout_seconds, field_selector=selector)


@converting
def list_in_at(kind: str, namespace: str) -> tuple[list[Obj], str]:
    """Every Paddock ``kind`` object of ``namespace``, and the listing's resourceVersion to
    watch from."""
    group, version, plural = _CUSTOM[kind]
    listing = _decode(
        _custom().list_namespaced_custom_object(
            group, version, namespace, plural, _preload_content=False
        )
    )
    return listing["items"], str(listing["metadata"]["resourceVersion"])


def watch_in(
    kind: str, namespace: str, resource_version: str, timeout_seconds: int, field_selector: str = ""
) -> Iterator[tuple[str, Obj]]:
    """Each change to the Paddock ``kind`` objects of ``namespace`` (those ``field_selector``
    picks) after ``resource_version``, until the server ends the watch after
    ``timeout_seconds``."""
    group, version, plural = _CUSTOM[kind]
    return _watched(
        _custom().list_namespaced_custom_object,
        group,
        version,
        namespace,
        plural,
        field_selector=field_selector,
        resource_version=resource_version,
        timeout_seconds=timeout_seconds,
    )


def _cluster_listing(kind: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The call that lists ``kind`` in every namespace (EndpointSlices: the API server's
    namespace's; Secrets: a ``Secret:NAMESPACE``'s), and its leading arguments."""
    if kind.startswith("Secret:"):
        return _core().list_namespaced_secret, (kind.partition(":")[2],)
    if kind == "Pod":
        return _core().list_pod_for_all_namespaces, ()
    if kind == "Node":
        return _core().list_node, ()
    if kind == "EndpointSlice":
        discovery = client.DiscoveryV1Api(_shared_client())
        return discovery.list_namespaced_endpoint_slice, (API_SERVER_NAMESPACE,)
    group, version, plural = _CUSTOM[kind]
    return _custom().list_cluster_custom_object, (group, version, plural)


@converting
def list_all_at(kind: str, selector: str = "") -> tuple[list[Obj], str]:
    """Every ``kind`` object the selector picks, in all namespaces, and the listing's
    resourceVersion to watch from."""
    call, args = _cluster_listing(kind)
    listing = _decode(call(*args, label_selector=selector, _preload_content=False))
    return listing["items"], str(listing["metadata"]["resourceVersion"])


def watch_all(
    kind: str, selector: str, resource_version: str, timeout_seconds: int
) -> Iterator[tuple[str, Obj]]:
    """Each change to the ``kind`` objects the selector picks, in all namespaces, after
    ``resource_version``, until the server ends the watch after ``timeout_seconds``; and the
    server's bookmarks (``BOOKMARK``, an object with only its resourceVersion), so that a watch
    of a quiet kind starts again from a version the server still keeps."""
    call, args = _cluster_listing(kind)
    return _watched(
        call,
        *args,
        label_selector=selector,
        resource_version=resource_version,
        timeout_seconds=timeout_seconds,
        allow_watch_bookmarks=True,
    )


def _watched(list_call: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[tuple[str, Obj]]:
    """The watch of a listing call, its objects as the server sent them; ``WatchExpiredError``
    when the version it starts from is too old, ``KubeError`` for any other error the server
    sends in the stream. Read here, line by line: the client library's own reader fails on an
    error event of a watch that is not deserialized (``KeyError: 'raw_object'``)."""
    # Read no longer than the server's own end of the watch, and a minute more: a connection
    # gone quiet without closing ends too.
    timeout = (CONNECT_SECONDS, kwargs["timeout_seconds"] + 60)
    with converted():
        try:
            response = list_call(
                *args, watch=True, _preload_content=False, _request_timeout=timeout, **kwargs
            )
        except ApiException as exc:
            if exc.status == 410:  # told as the answer's status, before any event
                raise WatchExpiredError(str(exc.reason)) from None
            raise
        try:
            for line in iter_resp_lines(response):
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    raise _stream_error(event["object"])
                yield str(event["type"]), event["object"]
        finally:
            response.close()
            response.release_conn()


def _stream_error(status: Obj) -> Exception:
    """The error a watch's ERROR event stands for (its object is a Status)."""
    if status.get("code") == 410:
        return WatchExpiredError(str(status.get("message")))
    reason = f"{status.get('reason')}: {status.get('message')}"
    return ApiException(status=status.get("code"), reason=reason)
