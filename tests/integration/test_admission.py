"""The admission policies shipped with the CRDs, on the real API server, for a user who holds
only Paddock's editor roles (no Secrets, ConfigMaps or VolumeSnapshots): an object may refer
only to what its author may read, and an approval comes from someone who may patch the run,
never with its creation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from support import identity
from support.kube import Cluster
from support.runs import command_run
from support.sandboxes import sandbox, secret, workspace

APPROVAL = "approval.paddock.dev/command"


@pytest.fixture
def editor(cluster: Cluster, namespace: str, tmp_path: Path) -> Cluster:
    kubeconfig = identity.editor_kubeconfig(cluster, namespace, tmp_path)
    return Cluster("editor", kubeconfig, cluster.kubectl_binary)


def _create(as_: Cluster, namespace: str, manifest: dict[str, Any]) -> str:
    """What the API server said to a create (empty when it was made)."""
    done = as_.kubectl(
        "create", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest), check=False
    )
    return "" if done.returncode == 0 else done.stderr


# name: (the object the editor creates, the reference its refusal names)
UNREADABLE = {
    "a run's secret env": (
        command_run(
            "rev",
            "box",
            "rev <<< $PW",
            secrets=[{"name": "PW", "secretKeyRef": {"name": "team-db", "key": "password"}}],
        ),
        "Secret team-db",
    ),
    "a run's prompt from a ConfigMap": (
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "AgentRun",
            "metadata": {"name": "prompted"},
            "spec": {
                "sandboxRef": {"name": "box"},
                "harness": "claude-code",
                "promptFrom": {"configMapKeyRef": {"name": "team-config", "key": "text"}},
            },
        },
        "ConfigMap team-config",
    ),
    "a fork of a VolumeSnapshot": (
        sandbox("fork", "ws", restoreFrom={"volumeSnapshotName": "team-snapshot"}),
        "VolumeSnapshot team-snapshot",
    ),
    "a template run's fork": (
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "AgentRun",
            "metadata": {"name": "forked"},
            "spec": {
                "sandboxTemplate": {
                    "workspaceRef": {"name": "ws"},
                    "restoreFrom": {"volumeSnapshotName": "team-snapshot"},
                },
                "harness": "command",
                "command": "ls",
            },
        },
        "VolumeSnapshot team-snapshot",
    ),
    "a delivery's forge token": (
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "AgentRun",
            "metadata": {"name": "delivered"},
            "spec": {
                "sandboxRef": {"name": "box"},
                "harness": "command",
                "command": "ls",
                "deliver": {"credentialsSecret": {"name": "team-forge", "key": "token"}},
            },
        },
        "Secret team-forge",
    ),
    "a workspace's clone token": (
        workspace(
            "cloned",
            source={
                "git": {
                    "url": "https://example.com/x.git",
                    "secretRef": {"name": "team-git", "key": "token"},
                }
            },
        ),
        "Secret team-git",
    ),
    "a git skill's token": (
        workspace(
            "skilled",
            skills=[
                {
                    "name": "tools",
                    "git": {
                        "repo": "https://example.com/tools.git",
                        "secretRef": {"name": "team-skills", "key": "token"},
                    },
                }
            ],
        ),
        "Secret team-skills",
    ),
    "an MCP server's header": (
        workspace(
            "mcp",
            skills=[
                {
                    "name": "docs",
                    "mcp": {
                        "url": "https://mcp.example.com/",
                        "headers": [
                            {
                                "name": "Authorization",
                                "bearer": True,
                                "secretKeyRef": {"name": "team-mcp", "key": "token"},
                            }
                        ],
                    },
                }
            ],
        ),
        "an MCP header",
    ),
    "a credential route's header": (
        workspace(
            "routed",
            routes=[
                {
                    "name": "api",
                    "url": "https://api.example.com",
                    "headers": [
                        {"name": "X-Api-Key", "secretKeyRef": {"name": "team-api", "key": "key"}}
                    ],
                    "allow": [{"methods": ["GET"], "paths": ["/**"]}],
                }
            ],
        ),
        "a header of a route",
    ),
}


@pytest.mark.parametrize("case", UNREADABLE)
def test_an_editor_cannot_refer_to_what_they_may_not_read(
    cluster: Cluster, namespace: str, editor: Cluster, case: str
) -> None:
    manifest, named = UNREADABLE[case]
    said = _create(editor, namespace, manifest)
    assert "may not get" in said, said
    assert "its author may read" in said, said
    assert named in said, said
    assert (
        cluster.kubectl("get", manifest["kind"].lower(), "-n", namespace, "-o", "name").stdout == ""
    )
    # The same object from someone who may read what it names is taken.
    assert _create(cluster, namespace, manifest) == ""


def test_an_editor_may_refer_to_a_secret_they_were_given(
    cluster: Cluster, namespace: str, editor: Cluster
) -> None:
    cluster.apply(secret("team-db", password="hunter22"), namespace)
    grant = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "read-team-db"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                   "resourceNames": ["team-db"]}],
    }  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "read-team-db"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "read-team-db",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "editor", "namespace": namespace}],
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all([grant, binding]))
    manifest, _ = UNREADABLE["a run's secret env"]
    assert _create(editor, namespace, manifest) == ""


def test_no_run_is_created_already_approved_not_even_by_an_admin(
    cluster: Cluster, namespace: str, editor: Cluster
) -> None:
    run = command_run("self-approved", "box", "touch pwned")
    run["metadata"]["annotations"] = {APPROVAL: "approve"}
    for who in (editor, cluster):
        said = _create(who, namespace, run)
        assert "created without approval.paddock.dev/ annotations" in said, said


def test_only_someone_who_may_patch_the_run_decides_its_approvals(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    cluster.apply(command_run("asks", "box", "touch x"), namespace)
    updater = Cluster(
        "updater",
        identity.role_kubeconfig(
            cluster,
            namespace,
            "updater",
            [
                {
                    "apiGroups": ["paddock.dev"],
                    "resources": ["agentruns"],
                    "verbs": ["get", "list", "update"],
                }
            ],
            tmp_path / "updater",
        ),
        cluster.kubectl_binary,
    )
    got = cluster.kubectl("get", "agentrun", "asks", "-n", namespace, "-o", "yaml")
    run = yaml.safe_load(got.stdout)

    def replace(annotations: dict[str, str]) -> str:
        run["metadata"]["annotations"] = annotations
        done = updater.kubectl(
            "replace", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(run), check=False
        )
        return "" if done.returncode == 0 else done.stderr

    assert "needs patch on the AgentRun" in replace({APPROVAL: "approve"})
    # The same user's update that leaves the approvals alone is taken (and kept current).
    assert replace({"note": "unrelated"}) == ""
    run["metadata"]["resourceVersion"] = yaml.safe_load(
        cluster.kubectl("get", "agentrun", "asks", "-n", namespace, "-o", "yaml").stdout
    )["metadata"]["resourceVersion"]
    # Someone who may patch it decides.
    cluster.kubectl("annotate", "agentrun", "asks", "-n", namespace, f"{APPROVAL}=approve")
    annotations = cluster.kubectl(
        "get", "agentrun", "asks", "-n", namespace, "-o", "jsonpath={.metadata.annotations}"
    ).stdout
    assert APPROVAL in annotations
