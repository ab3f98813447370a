"""Control-plane test bodies: CRDs established, examples accepted with their columns, bad
manifests rejected by the real API server."""

from __future__ import annotations

from support.kube import Cluster
from support.manifests import MODELS, BadManifest, example_manifests


def assert_crds_established(cluster: Cluster) -> None:
    for crd in cluster.paddock_crds():
        status = cluster.kubectl(
            "get", crd, "-o", 'jsonpath={.status.conditions[?(@.type=="Established")].status}'
        ).stdout
        assert status == "True", f"{crd} is not Established"


def assert_examples_accepted_with_columns(cluster: Cluster, namespace: str) -> None:
    for _, doc in example_manifests():
        cluster.apply(doc, namespace)
        model = MODELS[doc["kind"]]
        table = cluster.kubectl(
            "get", model.kind_info.plural, doc["metadata"]["name"], "-n", namespace, "-o", "wide"
        ).stdout
        header = table.splitlines()[0].split()
        expected = [column.name.upper() for column in model.kind_info.columns]
        assert header == ["NAME", *expected, "AGE"], f"{doc['kind']} columns: {header}"


def assert_bad_manifest_rejected(cluster: Cluster, namespace: str, case: BadManifest) -> None:
    result = cluster.kubectl(
        "apply",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=_dump(case.manifest),
        check=False,
    )
    assert result.returncode != 0, f"{case.name}: the API server accepted it"
    assert case.server
    assert case.server in result.stderr, f"{case.name}: {result.stderr}"
    assert case.field in result.stderr, f"{case.name} does not name {case.field}: {result.stderr}"


def assert_accepted_by_server(
    cluster: Cluster, namespace: str, manifest: dict[str, object]
) -> None:
    result = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-", stdin=_dump(manifest), check=False
    )
    assert result.returncode == 0, result.stderr


def _dump(manifest: dict[str, object]) -> str:
    import yaml

    return yaml.safe_dump(manifest)
