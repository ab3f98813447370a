"""Paddock's own watches (paddock.kube.watches) against the real API server. A watch from a
version the server no longer keeps is answered with an ERROR event inside a 200 stream, which
the gateway's watches meet once the server has moved on: read by the client library's reader,
that event killed the watch's thread (``KeyError: 'raw_object'``), and the gateway refused
every model route from then on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from paddock.kube import client as kube
from paddock.kube import watches
from support.kube import Cluster

pytestmark = pytest.mark.integration

TOO_OLD = "1"  # older than any watch cache of a running API server starts


@pytest.mark.parametrize(
    "watch",
    [
        lambda namespace: watches.watch_in("Sandbox", namespace, TOO_OLD, 5),
        lambda namespace: watches.watch_all("Sandbox", "", TOO_OLD, 5),
        lambda namespace: watches.watch_configmaps(namespace, "", TOO_OLD, 5),
    ],
    ids=["namespaced", "cluster-wide", "configmaps"],
)
def test_a_watch_from_a_version_the_server_no_longer_keeps_says_it_expired(
    cluster: Cluster, namespace: str, watch: Callable[[str], Iterator[Any]]
) -> None:
    kube.load_config()
    with pytest.raises(watches.WatchExpiredError, match="too old resource version"):
        list(watch(namespace))


def test_a_cluster_wide_watch_of_a_quiet_kind_is_told_newer_versions_by_bookmarks(
    cluster: Cluster, namespace: str
) -> None:
    """The gateway's watches (``watch_all``) take the server's bookmarks: with nothing of their
    kind changing, the version they start again from stays one the server keeps."""
    kube.load_config()
    _, listed = watches.list_all_at(f"Secret:{namespace}", "")
    seen = list(watches.watch_all(f"Secret:{namespace}", "", listed, 10))
    assert seen, "no bookmark in a 10-second watch"
    assert {event for event, _ in seen} == {"BOOKMARK"}
    assert all(obj["metadata"]["resourceVersion"] for _, obj in seen)
