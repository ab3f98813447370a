"""The real API server accepts Paddock's CRDs and examples and rejects the bad corpus; kwok
pods run exec in their own directories; the operator starts and stops cleanly."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from paddock_dev import cluster as local
from support import scenarios
from support.kube import Cluster
from support.manifests import BadManifest, bad_manifests
from support.waiting import wait_for

pytestmark = pytest.mark.integration


def test_every_crd_installs(cluster: Cluster) -> None:
    scenarios.assert_crds_established(cluster)


def test_volume_snapshot_crds_are_installed(cluster: Cluster) -> None:
    resources = cluster.kubectl("api-resources", "--api-group=snapshot.storage.k8s.io").stdout
    assert "volumesnapshots" in resources
    assert "volumesnapshotclasses" in resources


def test_examples_are_accepted_and_show_their_columns(cluster: Cluster, namespace: str) -> None:
    scenarios.assert_examples_accepted_with_columns(cluster, namespace)


@pytest.mark.parametrize("case", [c for c in bad_manifests() if c.server], ids=str)
def test_api_server_rejects_bad_manifest(
    cluster: Cluster, namespace: str, case: BadManifest
) -> None:
    scenarios.assert_bad_manifest_rejected(cluster, namespace, case)


@pytest.mark.parametrize("case", [c for c in bad_manifests() if not c.server], ids=str)
def test_what_the_schema_cannot_check_is_left_to_the_operator(
    cluster: Cluster, namespace: str, case: BadManifest
) -> None:
    # Pins the limit of the schema: should the API server learn to reject this, the corpus
    # entry gets its server message and moves to the test above.
    scenarios.assert_accepted_by_server(cluster, namespace, case.manifest)


def _pod(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "initContainers": [{"name": "setup", "image": "busybox"}],
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }


def _phase(cluster: Cluster, namespace: str, name: str) -> str:
    return cluster.kubectl(
        "get", "pod", name, "-n", namespace, "-o", "jsonpath={.status.phase}"
    ).stdout


def test_kwok_pod_runs_init_containers_then_runs(cluster: Cluster, namespace: str) -> None:
    cluster.apply(_pod("lifecycle"), namespace)
    wait_for(lambda: _phase(cluster, namespace, "lifecycle") == "Running", 30, what="Running")
    pod = json.loads(
        cluster.kubectl("get", "pod", "lifecycle", "-n", namespace, "-o", "json").stdout
    )
    init = pod["status"]["initContainerStatuses"][0]["state"]["terminated"]
    assert init["reason"] == "Completed"
    assert init["exitCode"] == 0
    assert pod["spec"]["nodeName"] == local.NODE_NAME


def test_exec_runs_in_the_pods_own_directory(cluster: Cluster, namespace: str) -> None:
    for name in ("one", "two"):
        cluster.apply(_pod(name), namespace)
    for name in ("one", "two"):
        wait_for(lambda n=name: _phase(cluster, namespace, n) == "Running", 30, what=f"{name}")

    def exec_in(name: str, script: str) -> tuple[int, str]:
        # The Exec object that names the pod's directory may lag the pod by a moment.
        result = cluster.kubectl(
            "exec", "-n", namespace, name, "--", "sh", "-c", script, check=False
        )
        return result.returncode, result.stdout

    wait_for(lambda: exec_in("one", "true")[0] == 0, 30, what="exec into pod one")
    wait_for(lambda: exec_in("two", "true")[0] == 0, 30, what="exec into pod two")

    code, out = exec_in("one", "pwd; echo hello > note.txt; cat note.txt; exit 3")
    assert code == 3
    cwd, text = out.splitlines()
    assert Path(cwd).parts[-2:] == (namespace, "one")
    assert text == "hello"
    code, out = exec_in("two", "pwd; test -e note.txt && echo shared || echo separate")
    assert code == 0
    assert out.splitlines() == [str(Path(cwd).parent / "two"), "separate"]


def test_operator_starts_and_exits_cleanly(operator: object) -> None:
    # The fixture waits for the liveness endpoint and, at teardown, asserts a clean exit.
    url = operator.liveness_url  # type: ignore[attr-defined]
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310
        assert response.status == 200


def test_operator_identity_is_its_service_account_not_admin(
    cluster: Cluster, operator_kubeconfig: str
) -> None:
    def can(*args: str) -> str:
        result = cluster.kubectl(
            f"--kubeconfig={operator_kubeconfig}", "auth", "can-i", *args, check=False
        )
        return result.stdout.strip()

    # kubectl takes the last --kubeconfig: the operator's, not the admin's.
    assert can("patch", "sandboxes.paddock.dev/status", "-A") == "yes"
    assert can("create", "pods", "-A") == "yes"
    assert can("get", "secrets", "-A") == "yes"
    assert can("create", "secrets", "-A") == "no"
    assert can("delete", "namespaces") == "no"
    assert can("create", "clusterrolebindings") == "no"
