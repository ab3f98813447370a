"""A run's take of a pool member when its write is refused (``taking._take``): the member is
read as it is now, taken at its new version if still free, passed over if another run took
it; and a refill's creates, all finished before its reconcile ends. The API writes are fakes
here (the conditional patch and the read); the integration tests take members from a real
pool on the real API server (test_pools.py)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_pool_decisions import CURRENT, WORKSPACE, _member, _pool

from paddock.agentruns import claims, taking
from paddock.kube.cache import CACHE
from paddock.sandboxes import pool_service
from paddock.times import utcnow

Obj = dict[str, Any]
RUN = {"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
       "metadata": {"name": "r1", "namespace": "team", "uid": "run-uid"}}  # fmt: skip
OTHER = {**RUN, "metadata": {"name": "r0", "namespace": "team", "uid": "other-run"}}


class Server:
    """The members as the API server has them; a patch lands only on the version it names."""

    def __init__(self, *members: Obj) -> None:
        self.stored = {m["metadata"]["name"]: copy.deepcopy(m) for m in members}
        self.patches: list[tuple[str, str]] = []  # (member, the version it named)

    def patch_if_unchanged(
        self, kind: str, namespace: str, name: str, body: Obj, version: str
    ) -> Obj | None:
        self.patches.append((name, version))
        member = self.stored[name]
        if member["metadata"]["resourceVersion"] != version:
            return None
        member["metadata"]["labels"] = {
            k: v for k, v in {**member["metadata"]["labels"], **body["metadata"]["labels"]}.items()
            if v is not None
        }  # fmt: skip
        member["metadata"]["annotations"] = body["metadata"]["annotations"]
        self.touch(name)
        return copy.deepcopy(member)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return copy.deepcopy(self.stored.get(name))

    def touch(self, name: str) -> None:
        meta = self.stored[name]["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


@pytest.fixture(autouse=True)
def cache() -> Iterator[None]:
    CACHE.clear()
    CACHE.seen("ADDED", {"kind": "Workspace", **WORKSPACE,
                         "metadata": {**WORKSPACE["metadata"], "namespace": "team"}})  # fmt: skip
    yield
    CACHE.clear()


def _take(server: Server, monkeypatch: pytest.MonkeyPatch, seen: list[Obj]) -> Obj | None:
    monkeypatch.setattr(taking.kube, "patch_if_unchanged", server.patch_if_unchanged)
    monkeypatch.setattr(taking.kube, "get", server.get)
    body = claims.claim(RUN, "py", utcnow())
    return taking._take(RUN, _pool(), seen, body)


def test_a_free_member_changed_since_the_watch_showed_it_is_taken_at_its_new_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _member("py-a")
    server = Server(member)
    server.touch("py-a")  # a write the watch has not shown yet: still free, at version 8
    taken = _take(server, monkeypatch, [member])
    assert taken is not None
    assert taken["metadata"]["name"] == "py-a"
    assert server.patches == [("py-a", "7"), ("py-a", "8")]
    assert taken["metadata"]["labels"][taking.RUN_LABEL] == "run-uid"
    assert CACHE.peek("Sandbox", "team", "py-a") == taken  # the next look sees it taken


def test_a_member_another_run_took_is_passed_over_for_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = _member("py-a", at="1"), _member("py-b", at="2")
    server = Server(first, second)
    server.patch_if_unchanged("Sandbox", "team", "py-a", claims.claim(OTHER, "py", utcnow()), "7")
    server.patches.clear()
    seen = [first, second]
    order = [m["metadata"]["name"] for m in claims.candidates(_pool(), seen, CURRENT, "run-uid")]
    taken = _take(server, monkeypatch, seen)
    assert taken is not None
    assert taken["metadata"]["name"] == "py-b"
    if order[0] == "py-a":  # tried first: refused, read, not tried again at its new version
        assert server.patches == [("py-a", "7"), ("py-b", "7")]
    else:
        assert server.patches == [("py-b", "7")]


def test_with_every_member_taken_by_others_the_take_finds_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _member("py-a")
    server = Server(member)
    server.patch_if_unchanged("Sandbox", "team", "py-a", claims.claim(OTHER, "py", utcnow()), "7")
    assert _take(server, monkeypatch, [member]) is None  # and the run makes its own


def test_a_member_this_run_took_already_is_the_runs_not_a_second_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    member = _member("py-a")
    server = Server(member, _member("py-b", at="2"))
    meta = server.stored["py-a"]["metadata"]  # taken by this run before, its answer lost
    meta["ownerReferences"] = [{"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
                                "name": "r1", "uid": "run-uid", "controller": True}]  # fmt: skip
    meta["labels"] = {taking.RUN_LABEL: "run-uid"}
    server.touch("py-a")
    taken = _take(server, monkeypatch, [member])  # the watch still shows it free
    assert taken is not None
    assert taken["metadata"]["name"] == "py-a"
    assert server.patches == [("py-a", "7")]  # read, not patched again; py-b left alone


def test_a_refill_returns_only_once_every_create_has_finished_then_raises_the_first_error() -> None:
    """A reconcile of the pool that followed while creates were in flight would not see them
    and make them again."""
    release = threading.Event()
    finished: list[str] = []

    def make_write(pool: Obj, write: str) -> bool:
        if write == "refused":
            raise RuntimeError("refused")
        release.wait(5)
        finished.append(write)
        return True

    with ThreadPoolExecutor(4) as writers:
        original = pool_service.make_write
        pool_service.make_write = make_write  # type: ignore[assignment]
        try:
            threading.Timer(0.2, release.set).start()
            with pytest.raises(RuntimeError, match="refused"):
                pool_service._write_all({}, ["refused", "a", "b", "c"], writers)  # type: ignore[list-item]
        finally:
            pool_service.make_write = original  # type: ignore[assignment]
    assert sorted(finished) == ["a", "b", "c"]
