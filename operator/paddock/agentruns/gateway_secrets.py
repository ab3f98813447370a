"""The Secrets a run's operator writes in the egress gateway's namespace (its model route, its
credential routes): each named by the run's uid and labelled with it, written at the run's
launch and deleted at its end. The operator acts only on such a Secret labelled as the run's
own: a Secret of the name that is not is left, and the run is told."""

from __future__ import annotations

from typing import Any

from paddock.kube import client as kube

Obj = dict[str, Any]


def write_own(secret: Obj, label: str, uid: str, what: str) -> str:
    """Create the Secret, or replace the run's own one (a launch an operator restart cut short
    left it, with a token no harness holds any more); what stops it, or ''."""
    if kube.create(secret) is not None:
        return ""
    namespace, name = secret["metadata"]["namespace"], secret["metadata"]["name"]
    found = kube.get("Secret", namespace, name)
    labels = ((found or {}).get("metadata") or {}).get("labels") or {}
    if found is None or labels.get(label) != uid:
        return f"the Secret {namespace}/{name} the run's {what} needs is not the run's"
    kube.patch("Secret", namespace, name, {"data": secret["data"]})
    return ""


def delete_own(namespace: str, name: str, label: str, uid: str) -> None:
    """Delete the Secret, if it is there and labelled as the run's."""
    found = kube.get("Secret", namespace, name)
    labels = ((found or {}).get("metadata") or {}).get("labels") or {}
    if found is not None and labels.get(label) == uid:
        kube.delete("Secret", namespace, name, found["metadata"]["uid"])
