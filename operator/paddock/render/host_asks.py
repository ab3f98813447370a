"""A host the egress gateway was asked for, which the policy says to ask a person about: the
gateway refuses it and posts a Kubernetes Event on the run in the sandbox (reason
``HostApprovalNeeded``, the host in an annotation); the operator, which watches the gateway's
Events alone (a server-side field selector on their source), turns it into an approval of kind
network on the run. This module is the one place the Event is written and read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from paddock import GROUP, VERSION
from paddock.times import format_time

Obj = dict[str, Any]
REASON = "HostApprovalNeeded"
TARGET_ANNOTATION = f"{GROUP}/host"  # HOST:PORT
COMPONENT = "paddock-gateway"


def gateway_event(
    meta: Obj, run: str, uid: str, reason: str, message: str, now: datetime, instance: str = ""
) -> Obj:
    """An Event of the egress gateway on a run (``meta``: its name or generateName, namespace
    and annotations): the shape both of its Events share."""
    when = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": meta,
        "involvedObject": {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AgentRun",
            "namespace": meta["namespace"],
            "name": run,
            "uid": uid,
        },
        "reason": reason,
        "type": "Normal",
        "message": message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance or COMPONENT,
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 1,
    }


def host_ask_event(namespace: str, run: str, uid: str, target: str, now: datetime) -> Obj:
    meta = {"generateName": f"{run}.", "namespace": namespace,
            "annotations": {TARGET_ANNOTATION: target}}  # fmt: skip
    said = f"The egress gateway refuses {target} until a person approves it on this run."
    return gateway_event(meta, run, uid, REASON, said, now)


def read_host_ask(event: Obj) -> tuple[str, str] | None:
    """The run (its uid) and the HOST:PORT an Event asks about; None for another Event."""
    involved = event.get("involvedObject") or {}
    target = ((event.get("metadata") or {}).get("annotations") or {}).get(TARGET_ANNOTATION)
    if event.get("reason") != REASON or involved.get("kind") != "AgentRun" or not target:
        return None
    uid = involved.get("uid")
    return (str(uid), str(target)) if uid else None
