"""Shared fences: the sandboxes of one SandboxPolicy are under one NetworkPolicy, the policy's,
which a change of the policy changes once; a sandbox moved to another policy moves to its
fence by its pod's label, the pod kept; the namespace's baseline isolates every sandbox pod
first; and the last sandbox of a fence takes it with it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from paddock_dev import cluster as local
from support.kube import Cluster
from support.sandboxes import (
    get,
    merge_patch,
    sandbox,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration
NETWORK_LABEL = "paddock.dev/network"


def policy(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "SandboxPolicy",
        "metadata": {"name": name},
        "spec": {"commands": {"default": "allow"}, **spec},
    }


def fences(cluster: Cluster, namespace: str) -> set[str]:
    found = cluster.kubectl("get", "networkpolicy", "-n", namespace, "-o", "json")
    return {item["metadata"]["name"] for item in json.loads(found.stdout)["items"]}


def label(cluster: Cluster, namespace: str, pod: str) -> str | None:
    labels = ((get(cluster, namespace, "pod", pod) or {}).get("metadata") or {}).get("labels")
    return (labels or {}).get(NETWORK_LABEL)


def conditions(cluster: Cluster, namespace: str, name: str) -> set[str]:
    status = status_of(cluster, namespace, "sandbox", name)
    return {c["type"] for c in status.get("conditions") or []}


def writes_to(namespace: str, name: str, since: datetime) -> list[str]:
    """The operator's writes to the NetworkPolicy ``name`` from ``since`` on, by verb, as
    the API server's audit log has them."""
    log = local.audit_log(local.default_state_dir())
    verbs = []
    for line in log.read_text().splitlines():
        entry: dict[str, Any] = json.loads(line)
        ref = entry.get("objectRef") or {}
        if (ref.get("resource"), ref.get("namespace"), ref.get("name")) != (
            "networkpolicies",
            namespace,
            name,
        ):
            continue
        when = datetime.fromisoformat(entry["requestReceivedTimestamp"])
        if when >= since and entry["verb"] in ("create", "patch", "update", "delete"):
            verbs.append(f"{entry['verb']} {entry.get('responseStatus', {}).get('code')}")
    return verbs


def test_the_sandboxes_of_a_policy_share_its_fence_until_the_last_one_goes(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(policy("shared"), namespace)
    cluster.apply(policy("other"), namespace)
    cluster.apply(workspace("app"), namespace)
    boxes = ("a", "b", "c")
    for name in boxes:
        cluster.apply(sandbox(name, "app", policyRef={"name": "shared"}), namespace)
    for name in boxes:
        wait_for_phase(cluster, namespace, name, "Ready")

    # One fence for the three, controlled by the policy, and the namespace's baseline.
    assert fences(cluster, namespace) == {"paddock-baseline", "shared.paddock-policy"}
    fence = get(cluster, namespace, "networkpolicy", "shared.paddock-policy") or {}
    policy_uid = (get(cluster, namespace, "sandboxpolicy", "shared") or {})["metadata"]["uid"]
    owners = [(o["kind"], o["uid"]) for o in fence["metadata"]["ownerReferences"]]
    assert owners == [("SandboxPolicy", policy_uid)]
    assert {label(cluster, namespace, name) for name in boxes} == {"shared.paddock-policy"}

    # A change of the policy changes the fence once, however many sandboxes look at it. (The
    # hosts, with no gateway, give each sandbox a condition: each has looked once it has it.)
    changed = datetime.now(UTC)
    closed = policy("shared", capabilities={"network": "deny"}, network={"hosts": {"allow": []}})
    cluster.apply(closed, namespace)
    for name in boxes:
        wait_for(
            lambda n=name: "EgressGateway" in conditions(cluster, namespace, n),
            60,
            what=f"sandbox {name} to have looked at the changed policy",
        )
    fence = get(cluster, namespace, "networkpolicy", "shared.paddock-policy") or {}
    assert not any(
        "ipBlock" in peer for rule in fence["spec"].get("egress", []) for peer in rule["to"]
    )
    assert writes_to(namespace, "shared.paddock-policy", changed) == ["patch 200"]

    # Moved to another policy, a sandbox's pod moves to that policy's fence: the same pod.
    pod_uid = (get(cluster, namespace, "pod", "c") or {})["metadata"]["uid"]
    merge_patch(cluster, namespace, "sandbox", "c", {"spec": {"policyRef": {"name": "other"}}})
    wait_for(
        lambda: label(cluster, namespace, "c") == "other.paddock-policy",
        60,
        what="the moved sandbox's pod labelled with its new policy's fence",
    )
    assert (get(cluster, namespace, "pod", "c") or {})["metadata"]["uid"] == pod_uid
    assert "other.paddock-policy" in fences(cluster, namespace)

    # The last sandbox of a fence takes it with it; the namespace's last, the baseline too.
    cluster.kubectl("delete", "sandbox", "a", "b", "-n", namespace)
    wait_for(
        lambda: fences(cluster, namespace) == {"paddock-baseline", "other.paddock-policy"},
        60,
        what="the fence no sandbox uses deleted",
    )
    cluster.kubectl("delete", "sandbox", "c", "-n", namespace)
    wait_for(lambda: not fences(cluster, namespace), 60, what="every fence deleted")
