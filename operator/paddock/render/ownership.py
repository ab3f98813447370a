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
