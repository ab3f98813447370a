"""The NetworkPolicies that fence sandboxes in (``sandboxes/fence.py``), and the Namespaces
that control the shared ones: kept from their watches. A fence changed or deleted by anyone
else is put back at once, by the sandboxes under it; one no sandbox uses any more is deleted
(``retire_unused``)."""

from __future__ import annotations

from typing import Any

import kopf

from paddock.handlers.references import Reference
from paddock.sandboxes import service, shared
from paddock.vocab.ownership import controller_uid


@kopf.on.event("networkpolicies")
async def fence_seen(type: str | None, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    fence = dict(body)
    before = service.watched(type, fence)
    meta = fence["metadata"]
    if type == "MODIFIED" and before is not None:
        if before["metadata"].get("resourceVersion") == meta.get("resourceVersion"):
            return  # the operator's own patch, kept already
    elif type not in (None, "DELETED"):
        return
    namespace = meta.get("namespace") or ""
    owner = _sandbox_owner(fence)
    if owner is not None:  # a sandbox's own: its policy's fence, or one it had before
        memo.reconciles.ask((namespace, owner))
    elif type is not None:
        for named in memo.references.sandboxes(("NetworkPolicy", namespace, meta["name"])):
            memo.reconciles.ask(named)


def _sandbox_owner(fence: dict[str, Any]) -> str | None:
    uid = controller_uid(fence)
    for ref in fence["metadata"].get("ownerReferences") or []:
        if str(ref.get("uid")) == uid and ref.get("kind") == "Sandbox":
            return str(ref.get("name"))
    return None


@kopf.on.event("namespaces")
async def namespace_seen(type: str | None, body: kopf.Body, **_: Any) -> None:
    """Kept for the uid of the Namespace, which controls its shared fences."""
    service.watched(type, dict(body))


def retire_unused(unused: list[Reference]) -> None:
    """Delete the shared fences of a namespace that no sandbox uses any more."""
    for kind, namespace, name in unused:
        if kind == "NetworkPolicy":
            shared.retire_fence(namespace, name)
