"""What a run used at the egress gateway's model route, as the gateway tells the operator: one
Kubernetes Event per run and gateway process, on the run (reason ``ModelUsage``), holding that
process's running totals for the run in an annotation, and patched as they grow. The operator
watches the gateway's Events alone (a server-side field selector on their source) and adds up
a run's Events into its status.usage. This module is the one place the Event is written and
read.

An Event's totals only ever grow, so one delivered late, or twice, or again after an operator
restart, counts nothing twice; an Event the API server let expire (an hour after its last
change) is written whole again by its process's next change."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from paddock import GROUP
from paddock.policy.budgets import Spent
from paddock.render.host_asks import COMPONENT, gateway_event
from paddock.times import format_time

Obj = dict[str, Any]
REASON = "ModelUsage"
FIELD_SELECTOR = f"source={COMPONENT}"  # the gateway's Events: asks about hosts, and usage
USAGE_ANNOTATION = f"{GROUP}/model-usage"
_KEYS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "costUSD": "cost_usd",
    "modelRequests": "model_requests",
    "unpriced": "unpriced",
    "refused": "refused",
    "uncounted": "uncounted",
}


def event_name(run_uid: str, replica: str) -> str:
    return f"{run_uid}.usage.{hashlib.sha256(replica.encode()).hexdigest()[:12]}"


def message(spent: Spent) -> str:
    refused = f"; {spent.refused} refused at the budget" if spent.refused else ""
    return f"Used through the egress gateway's model route: {spent.describe()}{refused}."


def usage_event(
    namespace: str, run: str, uid: str, replica: str, spent: Spent, now: datetime
) -> Obj:
    meta = {"name": event_name(uid, replica), "namespace": namespace,
            "annotations": {USAGE_ANNOTATION: encode(spent)}}  # fmt: skip
    return gateway_event(meta, run, uid, REASON, message(spent), now, replica[:128])


def usage_patch(spent: Spent, now: datetime) -> Obj:
    """The change to a process's Event when its totals grew."""
    return {
        "metadata": {"annotations": {USAGE_ANNOTATION: encode(spent)}},
        "message": message(spent),
        "lastTimestamp": format_time(now),
    }


def encode(spent: Spent) -> str:
    values = {api: getattr(spent, name) for api, name in _KEYS.items()}
    values["costUSD"] = round(spent.cost_usd, 6)
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def read_usage(event: Obj) -> tuple[str, str, Spent] | None:
    """The run (its uid), the Event's name (one per gateway process) and its totals; None for
    another Event, or one whose totals do not read."""
    involved = event.get("involvedObject") or {}
    meta = event.get("metadata") or {}
    raw = (meta.get("annotations") or {}).get(USAGE_ANNOTATION)
    if event.get("reason") != REASON or involved.get("kind") != "AgentRun" or not raw:
        return None
    try:
        values = json.loads(raw)
        spent = Spent(
            input_tokens=_count(values.get("inputTokens")),
            output_tokens=_count(values.get("outputTokens")),
            cost_usd=_dollars(values.get("costUSD")),
            model_requests=_count(values.get("modelRequests")),
            unpriced=_count(values.get("unpriced")),
            refused=_count(values.get("refused")),
            uncounted=_count(values.get("uncounted")),
        )
    except (ValueError, TypeError, AttributeError):
        return None
    uid = involved.get("uid")
    return (str(uid), str(meta.get("name") or ""), spent) if uid else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _dollars(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return 0.0
