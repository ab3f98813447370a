"""Owner references: how an object Paddock creates names the Sandbox or AgentRun it belongs to,
so that deleting the owner garbage-collects it."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def controller_reference(owner: Obj) -> Obj:
    """An ownerReference naming ``owner`` (a whole object, with apiVersion, kind and uid) as the
    controller; ``blockOwnerDeletion`` keeps the owner until the object is gone."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_by(obj: Obj, owner: Obj) -> Obj:
    """``obj`` with ``owner`` as its controller."""
    obj["metadata"]["ownerReferences"] = [controller_reference(owner)]
    return obj


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controller, if it has one."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def controlled_by(obj: Obj, owner_uid: str) -> bool:
    """Whether ``obj``'s controller is the object with ``owner_uid``: the only objects Paddock
    patches, deletes or execs into. A name alone proves nothing: anyone may have taken it."""
    return controller_uid(obj) == owner_uid
