"""The control-plane smoke tests, on a kind cluster: the same bodies as the local ones."""

from __future__ import annotations

import pytest

from support import scenarios
from support.kube import Cluster
from support.manifests import BadManifest, bad_manifests

pytestmark = pytest.mark.e2e


def test_every_crd_installs(kind_cluster: Cluster) -> None:
    scenarios.assert_crds_established(kind_cluster)


def test_examples_are_accepted_and_show_their_columns(
    kind_cluster: Cluster, kind_namespace: str
) -> None:
    scenarios.assert_examples_accepted_with_columns(kind_cluster, kind_namespace)


@pytest.mark.parametrize("case", [c for c in bad_manifests() if c.server], ids=str)
def test_api_server_rejects_bad_manifest(
    kind_cluster: Cluster, kind_namespace: str, case: BadManifest
) -> None:
    scenarios.assert_bad_manifest_rejected(kind_cluster, kind_namespace, case)
