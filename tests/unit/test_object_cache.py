"""The watch cache reconciles read: what a watch showed last, the API only on a miss."""

from __future__ import annotations

from typing import Any

import pytest

from paddock.kube import cache as cache_module
from paddock.kube.cache import ObjectCache


def pod(name: str, version: str) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "t", "resourceVersion": version}}


def test_the_last_event_is_what_is_read_and_a_deletion_drops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[tuple[str, str, str]] = []

    def from_api(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        asked.append((kind, namespace, name))
        return None

    monkeypatch.setattr(cache_module.client, "get", from_api)
    cache = ObjectCache()
    cache.seen(None, pod("a", "1"))  # the first listing
    cache.seen("MODIFIED", pod("a", "2"))
    assert cache.get("Pod", "t", "a") == pod("a", "2")
    assert asked == []
    cache.seen("DELETED", pod("a", "3"))
    assert cache.get("Pod", "t", "a") is None
    assert asked == []  # seen deleted: nothing to ask
    assert cache.get("Pod", "t", "b") is None
    assert asked == [("Pod", "t", "b")]  # a miss asks the API server
    cache.seen("ADDED", pod("a", "4"))
    assert cache.get("Pod", "t", "a") == pod("a", "4")
    cache.clear()
    assert cache.get("Pod", "t", "a") is None
    assert len(asked) == 2


def test_deletions_are_remembered_within_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module.client, "get", lambda *_: None)
    cache = ObjectCache(remembered_deletions=2)
    for name in "abc":
        cache.seen("DELETED", pod(name, "1"))
    assert len(cache._deleted) == 2
    assert ("Pod", "t", "a") not in cache._deleted
