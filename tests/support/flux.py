"""Flux on the local cluster, as the GitOps tests use it: its controllers started (built the
first time), a GitRepository of the local forge and a Kustomization of it, and what the
Kustomization says."""

from __future__ import annotations

import datetime
import json
from typing import Any

from paddock_dev import cluster as local
from paddock_dev import flux
from support import forge
from support.kube import Cluster
from support.sandboxes import get

KUSTOMIZATION = "kustomizations.kustomize.toolkit.fluxcd.io"
GIT_REPOSITORY = "gitrepositories.source.toolkit.fluxcd.io"
MANAGER = "kustomize-controller"  # the field manager it applies with


def started() -> None:
    flux.ensure(local.ensure_binaries(flux=True), forge.forge_state())


def source(name: str, url: str, secret: str) -> dict[str, Any]:
    """A GitRepository of ``url``'s main branch, read with the basic auth in ``secret``; it is
    fetched when asked (``request``), not on a clock."""
    return {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": name},
        "spec": {"url": url, "ref": {"branch": "main"}, "interval": "1h",
                 "secretRef": {"name": secret}},
    }  # fmt: skip


def kustomization(name: str, path: str, namespace: str) -> dict[str, Any]:
    """A Kustomization of the GitRepository ``name``'s ``path``, into ``namespace``, pruning
    what leaves the repository and waiting for the health of what it applies."""
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name},
        "spec": {
            "sourceRef": {"kind": "GitRepository", "name": name},
            "path": path,
            "targetNamespace": namespace,
            "prune": True,
            "wait": True,
            "timeout": "3m",
            "interval": "1h",
        },
    }


def request(cluster: Cluster, namespace: str, resource: str, name: str) -> str:
    """Ask Flux to reconcile now, as ``flux reconcile`` does; the token it answers with."""
    token = datetime.datetime.now(datetime.UTC).isoformat()
    cluster.kubectl("annotate", "--overwrite", "-n", namespace, resource, name,
                    f"reconcile.fluxcd.io/requestedAt={token}")  # fmt: skip
    return token


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's Ready condition (empty if it has none yet)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def reconciled(
    cluster: Cluster, namespace: str, name: str, revision: str, *, healthy: bool, since: str = ""
) -> dict[str, Any] | None:
    """The Kustomization once it has reconciled ``revision`` (a commit hash) and is Ready (or
    not, by ``healthy``), after the request ``since``; None before."""
    found = get(cluster, namespace, KUSTOMIZATION, name) or {}
    status = found.get("status") or {}
    if since and status.get("lastHandledReconcileAt") != since:
        return None
    condition = ready(found)
    if healthy:
        done = condition.get("status") == "True"
        seen = status.get("lastAppliedRevision", "")
    else:
        done = condition.get("status") == "False" and condition.get("reason") != "Progressing"
        seen = status.get("lastAttemptedRevision", "")
    return found if done and seen.endswith(revision) else None


def owned_by(obj: dict[str, Any], manager: str) -> set[str]:
    """The fields ``manager`` owns of ``obj`` (its main resource, not its status), each as a
    path of fieldsV1 keys."""
    paths: set[str] = set()
    for entry in obj["metadata"].get("managedFields") or []:
        if entry["manager"] == manager and not entry.get("subresource"):
            paths |= _leaves(entry.get("fieldsV1") or {}, "")
    return paths


def _leaves(tree: dict[str, Any], prefix: str) -> set[str]:
    found: set[str] = set()
    for key, below in tree.items():
        if key == ".":  # the map or list item itself
            found.add(prefix)
        else:
            found |= _leaves(below, f"{prefix}/{key}") if below else {f"{prefix}/{key}"}
    return found


def managers(obj: dict[str, Any]) -> str:
    return json.dumps(obj["metadata"].get("managedFields"), indent=1)
