"""More than one operator: shards by namespace. Two ``paddock operator`` processes share one
cluster, each serving its own namespaces (``-n``; the chart's ``watchNamespaces``, one release a
shard) under its own identity. The API server's audit log shows each sandbox reconciled by
exactly one of them and nothing of one shard touched by the other; killing one shard's
operator leaves only its shard's new sandboxes waiting, and its next start takes them up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from paddock_dev import audit
from paddock_dev import cluster as local
from support import identity
from support.kube import Cluster
from support.sandboxes import sandbox, status_of, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = pytest.mark.integration
UNTOUCHED = {"observedGeneration": 0}  # the status every kind's CRD defaults

WRITES = {"create", "update", "patch", "delete"}


@pytest.fixture
def other_namespace(cluster: Cluster) -> Iterator[str]:
    name = cluster.create_namespace()
    yield name
    cluster.delete_namespace(name)


def _start(kubeconfig: Path, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", ""],
        env={**os.environ, "KUBECONFIG": str(kubeconfig), "PADDOCK_METRICS_PORT": "0"},
        stdout=log.open("a"), stderr=subprocess.STDOUT,
    )  # fmt: skip


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def _writes(account: str, since: float) -> list[audit.Request]:
    username = f"system:serviceaccount:{identity.NAMESPACE}:{account}"
    log = local.audit_log(local.default_state_dir())
    return [r for r in audit.each_request(log, username, since, time.time() + 60)
            if r.verb in WRITES]  # fmt: skip


def test_two_shards_each_reconcile_only_their_own_and_a_killed_one_stalls_only_its_own(
    cluster: Cluster, namespace: str, other_namespace: str, tmp_path: Path
) -> None:
    shards = {"a": namespace, "b": other_namespace}
    accounts = {shard: f"{identity.ACCOUNT}-shard-{shard}" for shard in shards}
    configs = {
        shard: identity.operator_kubeconfig(cluster, tmp_path, account)
        for shard, account in accounts.items()
    }
    logs = {shard: tmp_path / f"operator-{shard}.log" for shard in shards}
    since = time.time()
    running = {shard: _start(configs[shard], shards[shard], logs[shard]) for shard in shards}
    try:
        for ns in shards.values():
            cluster.apply(workspace("app"), ns)
            for name in ("one", "two"):
                cluster.apply(sandbox(name, "app"), ns)
        for ns in shards.values():
            for name in ("one", "two"):
                wait_for_phase(cluster, ns, name, "Ready")

        # Shard a's operator dies without a word; shard b goes on alone.
        running["a"].send_signal(signal.SIGKILL)
        running["a"].wait(timeout=30)
        for ns in shards.values():
            cluster.apply(sandbox("late", "app"), ns)
        wait_for_phase(cluster, shards["b"], "late", "Ready")
        assert status_of(cluster, shards["a"], "sandbox", "late") == UNTOUCHED  # waiting, untouched
        assert status_of(cluster, shards["a"], "sandbox", "one")["phase"] == "Ready"

        # Its next start takes its shard up again.
        running["a"] = _start(configs["a"], shards["a"], logs["a"])
        wait_for_phase(cluster, shards["a"], "late", "Ready")
    finally:
        for process in running.values():
            _stop(process)

    # Each shard's writes (creates, patches, status, Events) are in its namespace only, and
    # every sandbox's status was written by its own shard's operator, never the other's.
    for shard, ns in shards.items():
        writes = wait_for(
            lambda s=shard, n=ns: (w := _writes(accounts[s], since))
            and {r.name for r in w if r.resource == "sandboxes/status" and r.namespace == n}
            == {"one", "two", "late"} and w,
            timeout=30, what=f"shard {shard}'s status writes in the audit log",
        )  # fmt: skip
        assert {r.namespace for r in writes} == {ns}, (shard, sorted({r.namespace for r in writes}))
        assert {r.resource for r in writes} >= {"pods", "persistentvolumeclaims", "events"}
