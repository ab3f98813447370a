"""A handle on a test cluster: its kubeconfig, kubectl, and a client, whatever runs it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def _locked(name: str, mode: int) -> Iterator[None]:
    """A lock file beside the local cluster's state, shared by every test process."""
    from paddock_dev import cluster as local

    directory = local.default_state_dir().parent
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / name).open("w") as lock:
        fcntl.flock(lock, mode)
        yield


@contextmanager
def across_workers() -> Iterator[None]:
    """Held by one test process at a time (parallel workers share the cluster): for starting
    it, and for creating cluster-wide objects of fixed names two workers would both create."""
    with _locked("tests.lock", fcntl.LOCK_EX):
        yield


@contextmanager
def object_store_in_use(*, alone: bool = False) -> Iterator[None]:
    """Held while a test uses the local cluster's object store (shared with other workers'
    tests), or ``alone`` while it stops and restarts it: no test sees another's outage."""
    with _locked("object-store.lock", fcntl.LOCK_EX if alone else fcntl.LOCK_SH):
        yield


@dataclass
class Cluster:
    """A running cluster the tests may use: the local control plane or a kind cluster."""

    name: str
    kubeconfig: Path
    kubectl_binary: str
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = [self.kubectl_binary, f"--kubeconfig={self.kubeconfig}"]
        return self._run("kubectl", argv, args, stdin=stdin, check=check)

    def paddock(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the ``paddock`` command line against this cluster."""
        return self._run("paddock", [sys.executable, "-m", "paddock.cli"], args, check=check)

    def _run(
        self,
        name: str,
        command: list[str],
        args: tuple[str, ...],
        *,
        stdin: str | None = None,
        check: bool,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*command, *args],
            input=stdin,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and result.returncode != 0:
            shown = " ".join(args)
            raise AssertionError(f"{name} {shown} exited {result.returncode}: {result.stderr}")
        return result

    def apply(self, manifest: dict[str, Any], namespace: str) -> None:
        self.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest))

    def install_crds(self) -> None:
        """The CRDs and the admission policies shipped beside them, both in force."""
        self.kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
        self.wait_established(*self.paddock_crds())
        self.wait_admission_enforced()

    def wait_admission_enforced(self) -> None:
        """Until the API server refuses what the approvals policy refuses (a policy is in force
        a moment after it is created, once the server has compiled it)."""
        from support.waiting import wait_for

        probe = {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "AgentRun",
            "metadata": {
                "name": "admission-probe",
                "namespace": "default",
                "annotations": {"approval.paddock.dev/command": "approve"},
            },
            "spec": {"sandboxRef": {"name": "none"}, "harness": "command", "command": "true"},
        }

        def refused() -> bool:
            done = self.kubectl(
                "create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(probe), check=False
            )
            return done.returncode != 0 and "approval.paddock.dev" in done.stderr

        wait_for(refused, 60, what="the admission policies to be in force")

    def wait_established(self, *crds: str) -> None:
        from paddock_dev.processes import wait_established

        wait_established([self.kubectl_binary, f"--kubeconfig={self.kubeconfig}"], crds)

    @staticmethod
    def paddock_crds() -> list[str]:
        from paddock import GROUP
        from paddock.api import KINDS

        return [f"crd/{kind.kind_info.plural}.{GROUP}" for kind in KINDS]

    def create_namespace(self) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        client.CoreV1Api(self.api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        )
        return name

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace, and let go of its Paddock objects. The test's operator has
        stopped by then, and their finalizers, which only an operator removes, would keep the
        namespace Terminating for the rest of the session: the namespace controller goes over
        every resource type of it again and again (the most requests the API server served
        in a suite run, for 80 namespaces stuck so at once)."""
        from paddock import GROUP, VERSION
        from paddock.api import KINDS

        client.CoreV1Api(self.api).delete_namespace(name)
        custom = client.CustomObjectsApi(self.api)
        for kind in KINDS:
            plural = kind.kind_info.plural
            listed = custom.list_namespaced_custom_object(GROUP, VERSION, name, plural)
            for item in listed["items"]:
                if item["metadata"].get("finalizers"):
                    patch = '{"metadata":{"finalizers":null}}'
                    self.kubectl("patch", "-n", name, f"{plural}.{GROUP}", item["metadata"]["name"],
                                 "--type=merge", "-p", patch, check=False)  # fmt: skip
