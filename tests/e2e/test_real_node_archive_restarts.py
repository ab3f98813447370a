"""Archives and an operator that dies mid-transfer, on the local cluster's real node against the
local S3 server: the operator is killed (SIGKILL, no shutdown) while it streams an archive out
of a sandbox and while it streams one into the next; its ``tar`` in the container does not
outlive the transfer timeout, the sandbox it was archiving still becomes Ready, and the next
operator finishes the interrupted restore."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from paddock.vocab import names
from paddock_dev import node
from support.kube import Cluster, object_store_in_use
from support.objects import ObjectStore
from support.real_node import exec_in, node_sandbox, processes_of
from support.sandboxes import condition, get, status_of, wait_for_phase, workspace
from support.waiting import wait_for

pytestmark = [pytest.mark.real_node, pytest.mark.usefixtures("real_node")]
MIB = 200  # incompressible: streaming it takes seconds, long enough to be caught in the act
SETUP = [f"mkdir -p build && head -c {MIB}M /dev/urandom > build/blob", "echo ran >> runs.txt"]
# Seconds: PADDOCK_ARCHIVE_TIMEOUT_SECONDS of the operator killed mid-archive (its tar is waited
# out), and of the operators after it, whose transfers must finish on a loaded machine.
TRANSFER_TIMEOUT = 30
UNHURRIED = 600
TAKING = "tar --null -T - -czf -"  # the archive's command line in the container
UNPACKING = "tar -xzf - -C /workspace"


@pytest.fixture(autouse=True)
def _store_in_use() -> Iterator[None]:
    with object_store_in_use():
        yield


class Operators:
    """``paddock operator`` processes for the test's namespace, one at a time, killable."""

    def __init__(self, cluster: Cluster, namespace: str, kubeconfig: str, logs: Path) -> None:
        store = ObjectStore.of(cluster)
        self.env = {
            **os.environ,
            **store.operator_env(f"tests/{namespace}"),
            "PADDOCK_LOG_BACKEND": "configmap",
            "KUBECONFIG": kubeconfig,
        }
        self.namespace, self.logs = namespace, logs
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0

    def start(self, transfer_timeout: int = UNHURRIED) -> None:
        self.started += 1
        log = (self.logs / f"operator-{self.started}.log").open("wb")
        env = {**self.env, "PADDOCK_ARCHIVE_TIMEOUT_SECONDS": str(transfer_timeout)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "paddock.cli", "operator", "-n", self.namespace,
             "--liveness", ""],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def kill(self) -> None:
        assert self.process is not None
        assert self.process.poll() is None, "the operator had stopped by itself"
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)


@pytest.fixture
def operators(
    cluster: Cluster, namespace: str, as_operator: str, tmp_path: Path
) -> Iterator[Operators]:
    running = Operators(cluster, namespace, as_operator, tmp_path)
    yield running
    running.stop()


def _caught(cluster: Cluster, namespace: str, sandbox: str, words: str) -> list[int]:
    """The sandbox pod's processes running ``words``, once there are some."""
    pod: dict[str, Any] = wait_for(
        lambda: get(cluster, namespace, "pod", sandbox), 120, what=f"pod {sandbox}"
    )
    pod_uid = pod["metadata"]["uid"]
    return wait_for(
        lambda: processes_of(pod_uid, words), 180, what=f"{words!r} running in {sandbox}"
    )


def test_an_operator_killed_mid_transfer_leaves_no_tar_behind_and_the_next_one_resumes(
    cluster: Cluster, namespace: str, operators: Operators
) -> None:
    cluster.apply(workspace("app", setup=SETUP), namespace)
    operators.start(TRANSFER_TIMEOUT)

    # Killed while it archives the first sandbox: the container's tar ends by its timeout.
    cluster.apply(node_sandbox("first", node.STORAGE_CLASS), namespace)
    taking = _caught(cluster, namespace, "first", TAKING)
    operators.kill()
    wait_for(
        lambda: not any(Path(f"/proc/{pid}").exists() for pid in taking),
        TRANSFER_TIMEOUT + 30,
        what="the abandoned archive's tar gone from the container",
    )
    operators.start()
    first = wait_for_phase(cluster, namespace, "first", "Ready", timeout=120)
    assert condition(first, "SnapshotReady")["status"] == "False"

    # The next sandbox is set up and archived; the one after it is restored from that archive,
    # and its restore is killed midway.
    cluster.apply(node_sandbox("second", node.STORAGE_CLASS), namespace)
    wait_for(lambda: _archived(cluster, namespace, "second"), 300, what="second archived")
    cluster.apply(node_sandbox("third", node.STORAGE_CLASS), namespace)
    _caught(cluster, namespace, "third", UNPACKING)
    operators.kill()
    pvc = get(cluster, namespace, "pvc", "third-workspace") or {}
    assert names.UNPACKED_ANNOTATION not in pvc["metadata"].get("annotations", {})  # midway
    operators.start()
    third = wait_for_phase(cluster, namespace, "third", "Ready", timeout=60)
    restored = condition(third, "Restored")
    assert (restored["status"], restored["reason"]) == ("True", "Restored"), restored
    volume = exec_in(cluster, namespace, "third", "stat -c %s build/blob; cat runs.txt")
    assert volume == f"{MIB * 1024 * 1024}\nran\n"  # all of it, and the setup not run again


def _archived(cluster: Cluster, namespace: str, name: str) -> bool:
    status = status_of(cluster, namespace, "sandbox", name)
    snapshot = condition(status, "SnapshotReady")
    assert snapshot.get("reason") != "SnapshotFailed", snapshot  # says why, not a timeout
    return status.get("phase") == "Ready" and snapshot["status"] == "True"
