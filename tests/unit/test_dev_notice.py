"""``paddock dev``'s last line: where the examples' pods run, and what that means for
isolation, from the cluster's nodes."""

from __future__ import annotations

from typing import Any

from paddock_dev.dev import isolation_notice


def node(name: str, *, fake: bool = False, taint: str | None = None) -> dict[str, Any]:
    annotations = {"kwok.x-k8s.io/node": "fake"} if fake else {}
    taints = [{"key": "paddock.dev/node", "value": "real", "effect": taint}] if taint else []
    return {"metadata": {"name": name, "annotations": annotations}, "spec": {"taints": taints}}


def test_the_local_cluster_says_its_pods_are_processes_on_this_machine() -> None:
    said = isolation_notice(
        [node("paddock-kwok", fake=True), node("paddock-node", taint="NoSchedule")]
    )
    assert said.startswith("!!! ISOLATION: NONE")
    assert "paddock-kwok" in said
    assert "plain processes on THIS machine" in said
    assert "paddock.dev/node=real" in said


def test_a_real_cluster_says_its_pods_are_containers() -> None:
    said = isolation_notice([node("worker-1"), node("worker-2")])
    assert said.startswith(">>> ISOLATION: sandbox pods run as real containers")


def test_a_cluster_with_both_says_it_is_mixed() -> None:
    said = isolation_notice([node("paddock-kwok", fake=True), node("worker-1")])
    assert said.startswith("!!! ISOLATION: MIXED")
    assert "worker-1" in said
