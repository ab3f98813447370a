"""The Helm chart: rendered with defaults and with every toggle on, accepted by the real API
server; installed into a control plane of its own, where it creates the CRDs (kept on
uninstall) and an operator Deployment whose pod lands on the kwok node; its values schema
rejects a misspelt key; its RBAC is config/rbac's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from paddock.api import KINDS
from paddock.api.admission import REFERENCES, policy_name
from paddock.gateway.prices import PriceTable, read_prices
from paddock.gateway.usage import Usage
from paddock.settings import OperatorSettings
from paddock_dev import cluster as local
from support.helm import CHART, KUBE_VERSION, run_helm
from support.kube import ROOT, Cluster
from support.waiting import wait_for

pytestmark = pytest.mark.integration

ALL_TOGGLES = CHART / "ci" / "all-toggles-values.yaml"
# The prometheus-operator CRD is not part of a bare control plane. A permissive stand-in lets
# the server check the ServiceMonitor's envelope (names, labels, namespace), not its spec.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {
        "group": "monitoring.coreos.com",
        "scope": "Namespaced",
        "names": {"kind": "ServiceMonitor", "plural": "servicemonitors"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def render(
    helm: str, namespace: str, *values: str, release: str = "paddock"
) -> list[dict[str, Any]]:
    text = run_helm(helm, "template", KUBE_VERSION, release, str(CHART), "-n", namespace, *values)
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize("values", [[], ["--values", str(ALL_TOGGLES)]], ids=["defaults", "all"])
def test_rendered_chart_is_accepted_by_the_api_server(
    cluster: Cluster, namespace: str, helm: str, values: list[str]
) -> None:
    docs = render(helm, namespace, *values, "--set", f"watchNamespaces={{{namespace}}}")
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    rest = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
    # Kinds the chart itself defines must exist before objects of them can be checked.
    extra = [SERVICE_MONITOR_CRD] if any(d["kind"] == "ServiceMonitor" for d in rest) else []
    for crd in [*crds, *extra]:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                        stdin=yaml.safe_dump(crd))  # fmt: skip
        cluster.wait_established(f"crd/{crd['metadata']['name']}")
    result = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        stdin=yaml.safe_dump_all(rest),
    )  # fmt: skip
    assert "Deployment" in result.stdout or "deployment" in result.stdout


def test_two_releases_shard_the_cluster_without_sharing_an_object(helm: str) -> None:
    """Sharding as README.md's "Several operators" installs it: the first release with the
    CRDs and admission policies, a second with neither, each watching its own namespaces with
    high availability. No object (cluster-scoped or in the release namespace) is in both, so
    neither release takes another's; each operator is told only its own namespaces."""
    shared = ["--values", str(ALL_TOGGLES), "--set", "highAvailability.enabled=true"]
    first = render(helm, "paddock-system", *shared, "--set", "watchNamespaces={team-a,team-c}")
    second = render(
        helm, "paddock-system", *shared, "--set", "watchNamespaces={team-b}",
        "--set", "crds.enabled=false", "--set", "admissionPolicies.enabled=false",
        release="paddock-shard-b",
    )  # fmt: skip

    def keys(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
        return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
                for d in docs}  # fmt: skip

    assert keys(first) & keys(second) == set()
    assert {d["kind"] for d in second}.isdisjoint(
        {"CustomResourceDefinition", "ValidatingAdmissionPolicy"}
    )

    def watched(docs: list[dict[str, Any]]) -> list[str]:
        component = "app.kubernetes.io/component"
        (deployment,) = [d for d in docs if d["kind"] == "Deployment"
                         and d["metadata"]["labels"][component] == "operator"]  # fmt: skip
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return [arg.partition("=")[2] for arg in args if arg.startswith("--namespace=")]

    assert (watched(first), watched(second)) == (["team-a", "team-c"], ["team-b"])
    peerings = {(d["kind"], d["metadata"].get("namespace")) for d in [*first, *second]
                if d["kind"].endswith("KopfPeering")}  # fmt: skip
    assert peerings == {("KopfPeering", ns) for ns in ("team-a", "team-b", "team-c")}


def test_values_schema_rejects_a_misspelt_key(helm: str) -> None:
    done = subprocess.run(
        [helm, "template", KUBE_VERSION, "paddock", str(CHART), "--set", "operator.sandboxImag=x"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "sandboxImag" in done.stderr
    assert "not allowed" in done.stderr


@pytest.mark.parametrize(
    ("values", "misspelt"),
    [
        (["--set", "resources.limts.memory=1Gi"], "limts"),
        (["--set", "affinity.podAntiAfinity.x=y"], "podAntiAfinity"),
        (["--set", "image.digest=latest"], "digest"),
        (["--set", "snapshots.store=tape"], "store"),
        (
            ["--set", "snapshots.store=object"],
            "objectStore.bucket is required with snapshots.store",
        ),
    ],
)
def test_values_schema_checks_nested_values(helm: str, values: list[str], misspelt: str) -> None:
    done = subprocess.run(
        [helm, "template", KUBE_VERSION, "paddock", str(CHART), *values],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode != 0
    assert misspelt in done.stderr


def test_chart_metadata_labels_and_disruption_settings(helm: str, tmp_path: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.31.0-0"
    for field in ("icon", "home", "sources", "maintainers"):
        assert chart.get(field), f"Chart.yaml has no {field}"
    docs = render(helm, "paddock-system", "--values", str(ALL_TOGGLES))
    for doc in docs:
        labels = doc["metadata"].get("labels") or {}
        where = f"{doc['kind']} {doc['metadata']['name']}"
        assert labels.get("app.kubernetes.io/component"), f"{where} has no component label"
        assert labels.get("helm.sh/chart", "").startswith("paddock-"), where
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert [p["metadata"]["labels"]["app.kubernetes.io/component"] for p in pdbs] == [
        "gateway", "operator",
    ]  # fmt: skip
    for pdb in pdbs:
        assert pdb["spec"] == {"maxUnavailable": 1, "selector": pdb["spec"]["selector"]}
    deployments = {
        d["metadata"]["labels"]["app.kubernetes.io/component"]: d
        for d in docs
        if d["kind"] == "Deployment"
    }
    assert set(deployments) == {"operator", "mcp", "gateway", "console"}
    deployment, mcp = deployments["operator"], deployments["mcp"]
    # The MCP server's and the gateway's pods are not the operator's: no selector of the one
    # matches the other.
    operator_selector = deployment["spec"]["selector"]["matchLabels"]
    for other in (mcp, deployments["gateway"], deployments["console"]):
        labels = other["spec"]["template"]["metadata"]["labels"]
        assert not operator_selector.items() <= labels.items()
    (gateway,) = deployments["gateway"]["spec"]["template"]["spec"]["containers"]
    assert gateway["command"] == ["paddock", "gateway"]
    assert "--internal=203.0.113.0/24" in gateway["args"]
    # The model route reads the price table the chart ships, as the gateway parses it.
    assert "--prices=/etc/paddock/prices/prices.yaml" in gateway["args"]
    prices = next(d for d in docs if d["metadata"]["name"].endswith("-gateway-prices"))
    (tmp_path / "prices.yaml").write_text(prices["data"]["prices.yaml"])
    table = read_prices(tmp_path / "prices.yaml")
    assert isinstance(table, PriceTable)
    assert table.cost(Usage(1_000_000, 1_000_000, "claude-sonnet-4-5-20250929")) == 18.0
    (server,) = mcp["spec"]["template"]["spec"]["containers"]
    assert server["command"] == ["paddock", "mcp"]
    assert server["args"] == [
        "--http=0.0.0.0:8090", "--namespace=paddock-a",
        "--tls-cert=/etc/paddock/mcp-tls/tls.crt", "--tls-key=/etc/paddock/mcp-tls/tls.key",
    ]  # fmt: skip
    tls = next(v for v in mcp["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls["secret"] == {"secretName": "paddock-mcp-tls"}
    (console,) = deployments["console"]["spec"]["template"]["spec"]["containers"]
    assert console["command"] == ["paddock", "console"]
    assert console["args"] == [
        "--http=0.0.0.0:8080", "--namespace=paddock-system",
        # (its Service's address: no console.externalURL set)
        "--external-url=https://paddock-console.paddock-system:8080",
        "--tls-cert=/etc/paddock/console-tls/tls.crt",
        "--tls-key=/etc/paddock/console-tls/tls.key",
    ]  # fmt: skip
    assert console["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    (fence,) = [d for d in docs if d["kind"] == "NetworkPolicy"
                and d["metadata"]["name"].endswith("-console")]  # fmt: skip
    ingress = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}
    assert fence["spec"]["ingress"] == [{"ports": [{"port": "console"}], "from": [ingress]}]
    pod = deployment["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["volumes"] == [
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "object-store-ca", "configMap": {"name": "paddock-object-store-ca"}},
    ]
    (container,) = pod["containers"]
    ca_mount = next(m for m in container["volumeMounts"] if m["name"] == "object-store-ca")
    assert ca_mount["readOnly"] is True
    keys = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert keys == {
        "PADDOCK_S3_ACCESS_KEY_ID": {"name": "paddock-object-store", "key": "AWS_ACCESS_KEY_ID"},
        "PADDOCK_S3_SECRET_ACCESS_KEY": {
            "name": "paddock-object-store",
            "key": "AWS_SECRET_ACCESS_KEY",
        },
    }
    digest = "sha256:" + "ab" * 32
    pinned = render(helm, "paddock-system", "--set", f"image.digest={digest}")
    (deployment,) = [d for d in pinned if d["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/paddock-dev/paddock@{digest}"


def _settings(docs: list[dict[str, Any]]) -> dict[str, str]:
    (settings,) = [
        d for d in docs if d["kind"] == "ConfigMap" and "settings" in d["metadata"]["name"]
    ]
    data: dict[str, str] = settings["data"]
    return data


def test_the_default_sandbox_image_is_the_published_one_of_the_charts_version(
    helm: str,
) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    defaults = _settings(render(helm, "paddock-system"))
    expected = f"ghcr.io/paddock-dev/paddock-sandbox:{chart['appVersion']}"
    assert defaults["PADDOCK_SANDBOX_IMAGE"] == expected
    assert defaults["PADDOCK_RUN_TTL_SECONDS_AFTER_FINISHED"] == "604800"
    assert defaults["PADDOCK_THREAD_SANDBOX_IDLE_SECONDS"] == "604800"
    mirrored = render(
        helm, "paddock-system",
        "--set", "image.repository=registry.example/paddock", "--set", "image.tag=1.2.3",
        "--set", "operator.runTTLSecondsAfterFinished=never",
    )  # fmt: skip
    assert _settings(mirrored)["PADDOCK_SANDBOX_IMAGE"] == "registry.example/paddock-sandbox:1.2.3"
    assert _settings(mirrored)["PADDOCK_RUN_TTL_SECONDS_AFTER_FINISHED"] == "never"
    named = render(helm, "paddock-system", "--set", "operator.sandboxImage=mine/box:7")
    assert _settings(named)["PADDOCK_SANDBOX_IMAGE"] == "mine/box:7"


def test_the_operator_reads_the_placement_and_key_settings_the_chart_renders(
    helm: str, tmp_path: Path
) -> None:
    """Sandboxes' placement and the refusal of model keys in sandboxes, as the chart renders
    them, read back by the operator's settings: keys are refused by default only with the
    gateway (which holds them), and a platform's word wins either way."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"operator": {
        "sandboxNodeSelector": {"pool": "agents", "zone": "a"},
        "sandboxTolerations": [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}],
        "sandboxStorageClass": "fast",
    }}))  # fmt: skip
    placed = OperatorSettings.from_env(_settings(render(helm, "p", "-f", str(values))))
    assert placed.sandbox_node_selector == {"pool": "agents", "zone": "a"}
    assert [t.to_api() for t in placed.sandbox_tolerations] == [
        {"key": "agents", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert placed.sandbox_storage_class == "fast"
    unplaced = OperatorSettings.from_env(_settings(render(helm, "p")))
    assert unplaced.sandbox_node_selector == {}
    assert unplaced.sandbox_tolerations == []
    assert unplaced.sandbox_storage_class is None
    assert unplaced.model_key_in_sandbox == "allow"
    gateway = ["--set", "gateway.enabled=true"]
    assert _settings(render(helm, "p", *gateway))["PADDOCK_MODEL_KEY_IN_SANDBOX"] == "refuse"
    allowed = render(helm, "p", *gateway, "--set", "policy.modelKeyInSandbox=allow")
    assert _settings(allowed)["PADDOCK_MODEL_KEY_IN_SANDBOX"] == "allow"
    refused = render(helm, "p", "--set", "policy.modelKeyInSandbox=refuse")
    assert _settings(refused)["PADDOCK_MODEL_KEY_IN_SANDBOX"] == "refuse"
    assert unplaced.secrets_in_sandbox == "allow"
    secrets_out = render(helm, "p", "--set", "policy.secretsInSandbox=refuse")
    assert OperatorSettings.from_env(_settings(secrets_out)).refusals == (False, True)


def test_the_gateways_metrics_have_a_service_and_a_service_monitor(helm: str) -> None:
    docs = render(helm, "p", "--set", "gateway.enabled=true",
                  "--set", "metrics.serviceMonitor.enabled=true")  # fmt: skip
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    metrics = services["paddock-gateway-metrics"]
    assert [p["targetPort"] for p in metrics["spec"]["ports"]] == ["metrics"]
    # Not on the Service sandboxes use as their proxy.
    assert [p["name"] for p in services["paddock-gateway"]["spec"]["ports"]] == ["proxy", "model"]
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    selected = {m["metadata"]["name"]: m["spec"]["selector"]["matchLabels"] for m in monitors}
    labels = metrics["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in selected["paddock-gateway"].items())
    operator_labels = services["paddock-metrics"]["metadata"]["labels"]
    assert all(operator_labels.get(k) == v for k, v in selected["paddock"].items())
    assert not all(labels.get(k) == v for k, v in selected["paddock"].items())


def _rules(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [rule for d in docs if d["kind"] == kind for rule in d["rules"]]


def test_chart_rbac_is_config_rbac(helm: str) -> None:
    config_rules = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())["rules"]
    cluster_wide = _rules(render(helm, "paddock-system"), "ClusterRole")
    assert sorted(map(json.dumps, cluster_wide)) == sorted(map(json.dumps, config_rules))
    namespaced = render(helm, "paddock-system", "--set", "watchNamespaces={a}")
    together = _rules(namespaced, "ClusterRole") + _rules(namespaced, "Role")
    assert sorted(map(json.dumps, together)) == sorted(map(json.dumps, config_rules))


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[Path]:
    """A control plane of its own, so that the chart installs its CRDs from scratch."""
    directory = tmp_path / "cluster"
    kubeconfig = local.up(directory, real_node=False)  # the chart needs no real pods
    try:
        yield kubeconfig
    finally:
        local.down(directory)


def test_helm_install_runs_the_operator_and_keeps_the_crds(helm: str, own_cluster: Path) -> None:
    kubectl = str(local.ensure_binaries().kubectl)

    def get(*args: str) -> dict[str, Any]:
        done = subprocess.run(
            [kubectl, f"--kubeconfig={own_cluster}", "get", *args, "-o", "json"],
            capture_output=True, text=True,
        )  # fmt: skip
        return json.loads(done.stdout) if done.returncode == 0 else {}

    def kubectl_run(*args: str) -> None:
        subprocess.run([kubectl, f"--kubeconfig={own_cluster}", *args], check=True,
                       capture_output=True)  # fmt: skip

    # CRDs and admission policies there before the release (as `make dev` or kustomize puts
    # them) are handed to it the way the README says.
    kubectl_run("apply", "--server-side", "-k", str(ROOT / "crds"))
    policies = [policy_name(resource) for resource in REFERENCES]
    objects = [f"crd/{kind.kind_info.plural}.paddock.dev" for kind in KINDS] + [
        f"{kind}/{name}"
        for kind in ("validatingadmissionpolicy", "validatingadmissionpolicybinding")
        for name in policies
    ]
    for name in objects:
        kubectl_run("label", name, "app.kubernetes.io/managed-by=Helm")
        kubectl_run("annotate", name, "meta.helm.sh/release-name=paddock",
                    "meta.helm.sh/release-namespace=paddock-system")  # fmt: skip
    installed = run_helm(
        helm, "install", "paddock", str(CHART), "-n", "paddock-system", "--create-namespace",
        "--set", "crds.enabled=true", "--wait", "--timeout=120s", kubeconfig=own_cluster,
    )  # fmt: skip
    assert "kubectl -n paddock-system rollout status deploy/paddock" in installed  # NOTES.txt
    assert "kubectl get paddock -A" in installed
    upgraded = run_helm(
        helm, "upgrade", "paddock", str(CHART), "-n", "paddock-system", "--reuse-values",
        "--wait", "--timeout=120s", kubeconfig=own_cluster,
    )  # fmt: skip
    assert "REVISION: 2" in upgraded
    crd = get("crd", "sandboxes.paddock.dev")
    assert crd["metadata"]["labels"]["helm.sh/chart"].startswith("paddock-")
    deployment = get("deployment", "paddock", "-n", "paddock-system")
    assert deployment["status"]["readyReplicas"] == 1
    pods = get("pods", "-n", "paddock-system", "-l", "app.kubernetes.io/name=paddock")["items"]
    assert [p["spec"]["nodeName"] for p in pods] == ["paddock-kwok"]
    assert pods[0]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
    crd = get("crd", "sandboxes.paddock.dev")
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    policy = get("validatingadmissionpolicy", policy_name("agentruns"))
    assert policy["metadata"]["labels"]["helm.sh/chart"].startswith("paddock-")

    run_helm(helm, "uninstall", "paddock", "-n", "paddock-system", kubeconfig=own_cluster)
    wait_for(lambda: not get("deployment", "paddock", "-n", "paddock-system"), 60,
             what="the Deployment gone")  # fmt: skip
    assert get("crd", "sandboxes.paddock.dev"), "uninstalling must keep the CRDs"


def test_make_lint_validates_every_manifest_strictly(tmp_path: Path) -> None:
    """hack/kubeconform.sh (in `make lint`) passes on what the project ships, and fails,
    naming the field, on a misspelt key in a built-in kind and in a Paddock kind."""
    script = [str(ROOT / "hack" / "kubeconform.sh")]
    env = {**os.environ, "PY": sys.executable}
    clean = subprocess.run(script, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "Invalid: 0, Errors: 0" in clean.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {containers: [{name: c, image: i, resources: {limts: {memory: 1Gi}}}]}\n"
        "---\napiVersion: paddock.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: s}\n"
        "spec: {workspaceRef: {name: w}, storag: {size: 1Gi}}\n"
    )
    caught = subprocess.run(
        script, capture_output=True, text=True, cwd=ROOT, timeout=900,
        env={**env, "PADDOCK_KUBECONFORM_EXTRA": str(bad)},
    )  # fmt: skip
    assert caught.returncode != 0
    assert "additional properties 'limts' not allowed" in caught.stdout
    assert "additional properties 'storag' not allowed" in caught.stdout
