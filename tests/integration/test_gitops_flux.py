"""A team's sandboxes declared in a repository of the local forge and reconciled by Flux's own
source-controller and kustomize-controller (built from their modules, started by the local
cluster tool), with the operator running: the Kustomization, which waits for the health of
what it applies, is Ready only once the Workspace, SandboxPolicy, SandboxPool and Sandbox are;
a push that breaks the policy turns it not Ready, naming the policy, whose own condition says
why; a push that mends it and changes the Workspace rolls the pool's members (the Sandbox
keeps its volume and says it is not up to date), as docs/sandboxes.md says; and nothing
drifts: a reconcile of the same revision applies nothing, and no field the repository sets
is written by anyone else."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from support import flux
from support.forge import ForgeClient, started
from support.kube import Cluster
from support.sandboxes import condition, get, sandbox, workspace
from support.waiting import wait_for

pytestmark = pytest.mark.integration
NAME = "team"
KINDS = (("workspace", "app"), ("sandboxpolicy", "team"), ("sandboxpool", "warm"),
         ("sandbox", "box"))  # fmt: skip


def _policy(**commands: Any) -> dict[str, Any]:
    spec = {"commands": {"default": "allow", **commands}}
    return {"apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPolicy",
            "metadata": {"name": "team"}, "spec": spec}  # fmt: skip


def _pool() -> dict[str, Any]:
    template = {"workspaceRef": {"name": "app"}, "policyRef": {"name": "team"}}
    spec = {"replicas": 1, "template": template}
    return {"apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPool",
            "metadata": {"name": "warm"}, "spec": spec}  # fmt: skip


def _files(app: dict[str, Any], policy: dict[str, Any]) -> dict[str, str]:
    """The repository: one directory of a team's objects, as docs/gitops.md lays it out."""
    box = sandbox("box", "app", policyRef={"name": "team"})
    return {f"{NAME}/workspace.yaml": yaml.safe_dump(app),
            f"{NAME}/sandboxpolicy.yaml": yaml.safe_dump(policy),
            f"{NAME}/sandboxpool.yaml": yaml.safe_dump(_pool()),
            f"{NAME}/sandbox.yaml": yaml.safe_dump(box)}  # fmt: skip


@pytest.fixture
def repository(cluster: Cluster, namespace: str, operator: Any) -> Iterator[ForgeClient]:
    """The team's repository in the forge, and Flux reconciling it into the namespace (the
    GitRepository and Kustomization live there too). At the end the Kustomization is deleted
    while the operator still runs, so that Flux prunes what it applied."""
    client = ForgeClient(started())
    flux.started()
    repo = f"flux-{namespace}"
    url = client.repository(repo, _files(workspace("app"), _policy()))
    token = client.token(repo, "read:repository")
    encoded = {"username": client.forge.admin, "password": token}
    cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "git"},
                   "data": {k: base64.b64encode(v.encode()).decode() for k, v in encoded.items()}},
                  namespace)  # fmt: skip
    cluster.apply(flux.source(NAME, url, "git"), namespace)
    cluster.apply(flux.kustomization(NAME, f"./{NAME}", namespace), namespace)
    yield client
    cluster.kubectl("delete", "-n", namespace, flux.KUSTOMIZATION, NAME, "--timeout=120s")
    for kind, name in KINDS:
        wait_for(lambda k=kind, n=name: get(cluster, namespace, k, n) is None, 120,
                 what=f"{kind} {name} pruned")  # fmt: skip


def _fetch(cluster: Cluster, namespace: str) -> None:
    """Have the source-controller fetch the branch now rather than at its interval."""
    flux.request(cluster, namespace, flux.GIT_REPOSITORY, NAME)


def _objects(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    """The repository's objects by kind, with the fields each manager owns."""
    found = {}
    for kind, name in KINDS:
        read = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json",
                               "--show-managed-fields")  # fmt: skip
        found[kind] = json.loads(read.stdout)
    return found


def test_a_repository_of_sandboxes_is_healthy_only_when_they_are_and_never_drifts(
    cluster: Cluster, namespace: str, repository: ForgeClient
) -> None:
    head = repository.head(f"flux-{namespace}")
    done = wait_for(lambda: flux.reconciled(cluster, namespace, NAME, head, healthy=True), 240,
                    what="the Kustomization Ready at the first commit")  # fmt: skip
    assert done["status"]["lastAppliedRevision"].endswith(head)
    # Ready means the operator brought each object about: Flux waited for their health.
    objects = _objects(cluster, namespace)
    assert objects["sandbox"]["status"]["phase"] == "Ready"
    assert objects["sandboxpool"]["status"]["readyReplicas"] == 1
    assert condition(objects["sandboxpolicy"]["status"], "Valid")["status"] == "True"

    # Nothing drifts. No field the repository sets is written by anyone else ...
    for kind, obj in objects.items():
        applied = flux.owned_by(obj, flux.MANAGER)
        assert applied, f"{kind}: {flux.managers(obj)}"
        others = {e["manager"] for e in obj["metadata"]["managedFields"]} - {flux.MANAGER}
        for manager in others:
            shared = applied & flux.owned_by(obj, manager)
            assert not shared, f"{kind}: {manager} writes {shared} too"
    # ... and a reconcile of the same revision applies nothing.
    since = flux.request(cluster, namespace, flux.KUSTOMIZATION, NAME)
    wait_for(lambda: flux.reconciled(cluster, namespace, NAME, head, healthy=True, since=since),
             120, what="the Kustomization reconciled again")  # fmt: skip
    again = _objects(cluster, namespace)
    for kind, obj in objects.items():
        assert again[kind]["metadata"]["generation"] == obj["metadata"]["generation"], kind
        assert _entry(again[kind]) == _entry(obj), kind

    # A push that breaks the policy: the Kustomization is not Ready, and names the policy,
    # whose own condition says why.
    ineffective = _policy(allow=["npm test && npm run lint"])
    changes = {f"{NAME}/sandboxpolicy.yaml": yaml.safe_dump(ineffective)}
    broken = repository.push(f"flux-{namespace}", changes)
    _fetch(cluster, namespace)
    failed = wait_for(lambda: flux.reconciled(cluster, namespace, NAME, broken, healthy=False),
                      240, what="the Kustomization not Ready with the broken policy")  # fmt: skip
    said = flux.ready(failed)
    assert said["reason"] == "HealthCheckFailed", said
    assert f"SandboxPolicy/{namespace}/team status: 'Failed'" in said["message"], said
    stalled = condition(_objects(cluster, namespace)["sandboxpolicy"]["status"], "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "RulesIneffective"), stalled

    # A push that mends the policy and changes the Workspace: Ready again; the pool replaces
    # its member with one of the new Workspace (Flux may have read the pool as Current before
    # it saw the change: its health is the pool's own), and the Sandbox keeps its volume.
    before = _objects(cluster, namespace)["workspace"]["status"]["hash"]
    changed = workspace("app", setup=["echo ready", "echo again"])
    mended = repository.push(f"flux-{namespace}", _files(changed, _policy()))
    _fetch(cluster, namespace)
    wait_for(lambda: flux.reconciled(cluster, namespace, NAME, mended, healthy=True), 240,
             what="the Kustomization Ready at the mended commit")  # fmt: skip
    after = _objects(cluster, namespace)["workspace"]["status"]["hash"]
    assert after != before

    def rolled() -> bool:
        pool = _objects(cluster, namespace)["sandboxpool"]["status"]
        hashes = [m["status"].get("workspaceHash") for m in _members(cluster, namespace)]
        return hashes == [after] and pool.get("staleReplicas") == 0 and pool["readyReplicas"] == 1

    wait_for(rolled, 180, what="the pool's member replaced by one of the new Workspace")
    box = _objects(cluster, namespace)["sandbox"]["status"]
    assert (box["phase"], box["workspaceHash"]) == ("Ready", before)
    assert condition(box, "UpToDate")["reason"] == "WorkspaceChanged"
    since = flux.request(cluster, namespace, flux.KUSTOMIZATION, NAME)
    wait_for(lambda: flux.reconciled(cluster, namespace, NAME, mended, healthy=True, since=since),
             120, what="the Kustomization Ready after the roll")  # fmt: skip


def _entry(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The kustomize-controller's managedFields entries, with the time it last changed them."""
    return [e for e in obj["metadata"]["managedFields"] if e["manager"] == flux.MANAGER]


def _members(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    listed = cluster.kubectl("get", "sandbox", "-n", namespace, "-l", "paddock.dev/pool=warm",
                             "-o", "json")  # fmt: skip
    return list(yaml.safe_load(listed.stdout)["items"])
