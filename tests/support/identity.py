"""The operator's own identity in tests: a ServiceAccount bound to the ClusterRole from
config/rbac, and a kubeconfig carrying a token for it from the TokenRequest API. The operator
runs with it instead of cluster-admin, so a missing (or needless) permission shows up in tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from support.kube import ROOT, Cluster, across_workers

# Not paddock-system: a test of config/default creates and deletes that namespace.
NAMESPACE = "paddock-test-identity"
# One account per parallel worker: the audit of the operator's requests reads one worker's.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
ACCOUNT = f"paddock-operator-{_WORKER}" if _WORKER else "paddock-operator"
ROLE = "paddock-operator-test"
BINDING = f"{ROLE}-{_WORKER}" if _WORKER else ROLE


def operator_kubeconfig(cluster: Cluster, directory: Path, account: str = ACCOUNT) -> Path:
    """Create (or update) the account (by default this worker's operator's) and its binding to
    the operator's ClusterRole; return a kubeconfig for it."""
    role = yaml.safe_load((ROOT / "config" / "rbac" / "role.yaml").read_text())
    role["metadata"]["name"] = ROLE
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": BINDING if account == ACCOUNT else f"{ROLE}-{account}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}],
    }
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    service_account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": NAMESPACE},
    }
    with across_workers():
        cluster.kubectl(
            "apply", "-f", "-",
            stdin=yaml.safe_dump_all([namespace, service_account, role, binding]),
        )  # fmt: skip
    return account_kubeconfig(cluster, NAMESPACE, account, directory / f"{account}-kubeconfig")


def _token(cluster: Cluster, namespace: str, account: str) -> str:
    """A TokenRequest token (an hour) for the ServiceAccount."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    api = client.CoreV1Api(cluster.api)
    return str(
        api.create_namespaced_service_account_token(account, namespace, request).status.token
    )


def account_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig carrying a TokenRequest token for the ServiceAccount."""
    token = _token(cluster, namespace, account)
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": server}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "local", "user": account}}],
        "current-context": account,
    }
    path.write_text(yaml.safe_dump(config))
    return path


EDITOR_ROLES = ("workspace", "sandboxpolicy", "sandbox", "agentrun")


def editor_kubeconfig(cluster: Cluster, namespace: str, directory: Path) -> Path:
    """A user who holds only Paddock's editor roles in ``namespace`` (config/rbac): no pods,
    exec, ConfigMaps or NetworkPolicies of their own."""
    roles = [
        yaml.safe_load((ROOT / "config" / "rbac" / f"{kind}_editor_role.yaml").read_text())
        for kind in EDITOR_ROLES
    ]
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "editor"}}
    bindings = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"editor-{role['metadata']['name']}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": namespace}],
        }
        for role in roles
    ]
    with across_workers():
        cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(roles))
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all([account, *bindings])
    )
    return account_kubeconfig(cluster, namespace, "editor", directory / "editor-kubeconfig")


def role_kubeconfig(
    cluster: Cluster, namespace: str, account: str, rules: list[dict[str, Any]], path: Path
) -> Path:
    """A ServiceAccount in ``namespace`` that holds exactly ``rules`` there (one Role), and a
    kubeconfig for it: a client whose requests the local cluster's audit log names."""
    _role_account(cluster, namespace, account, rules)
    return account_kubeconfig(cluster, namespace, account, path)


def role_token(cluster: Cluster, namespace: str, account: str, rules: list[dict[str, Any]]) -> str:
    """A token of a new ServiceAccount of ``namespace`` that holds exactly ``rules`` there."""
    _role_account(cluster, namespace, account, rules)
    return _token(cluster, namespace, account)


def _role_account(
    cluster: Cluster, namespace: str, account: str, rules: list[dict[str, Any]]
) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": account},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": account},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
    cluster.kubectl(
        "apply", "-n", namespace, "-f", "-",
        stdin=yaml.safe_dump_all([service_account, role, binding]),
    )  # fmt: skip


def chart_identity(
    cluster: Cluster, helm: str, namespace: str, component: str, directory: Path
) -> Path:
    """A kubeconfig of a ServiceAccount of ``namespace`` holding the ClusterRole the chart gives
    ``component`` (mcp, console; bound as ``NAMESPACE-COMPONENT``, which the caller deletes):
    that server's own identity, as deployed."""
    from support.helm import CHART, KUBE_VERSION, run_helm

    text = run_helm(
        helm, "template", KUBE_VERSION, "paddock", str(CHART), "-n", namespace,
        "--set", f"{component}.enabled=true",
    )  # fmt: skip
    (role,) = [
        d for d in yaml.safe_load_all(text)
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(f"-{component}")
    ]  # fmt: skip
    account, name = f"{component}-server", f"{namespace}-{component}"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
    for doc in (sa, {**role, "metadata": {"name": name}}, binding):
        cluster.apply(doc, namespace)
    return account_kubeconfig(cluster, namespace, account, directory / f"{component}-kubeconfig")
