"""A run's budget, acted on while it runs (whether it may start is ``start.may_start``'s): what
the gateway counted (its ``ModelUsage`` Events, as the operator's watch of
the gateway's Events delivers them), logged as ``usage`` events, added to the policy's day,
and the run's end once it is past a ceiling.

A policy's day (``status.dailyUsage``) is added to as the run's counts grow: the write is made
before the usage event is logged, so an operator that stops between the two counts that part
twice, never not at all."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from paddock.agentruns.decide import Ending
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import RunPhase
from paddock.api.budget import Budget
from paddock.api.common import stored_status
from paddock.api.policy import SandboxPolicySpec, SandboxPolicyStatus
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.kube.errors import ConflictError
from paddock.policy import budgets
from paddock.policy.budgets import Spent
from paddock.render.model_usage import read_usage
from paddock.runs import events as ev
from paddock.runs.events import Draft

Obj = dict[str, Any]


class Metered:
    """What the gateway's processes counted for each run: the totals of each one's Event
    (which only grow: the larger is kept), added up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_run: dict[str, dict[str, Spent]] = {}  # run uid -> Event name -> totals

    def seen(self, event_type: str | None, event: Obj) -> None:
        found = read_usage(event)
        if found is None or event_type == "DELETED":  # (an expired Event forgets nothing)
            return
        uid, name, spent = found
        with self._lock:
            events = self._by_run.setdefault(uid, {})
            events[name] = spent.at_least(events.get(name, Spent()))

    def of_run(self, uid: str) -> Spent | None:
        with self._lock:
            events = self._by_run.get(uid)
            return sum(events.values(), Spent()) if events else None

    def forget(self, uid: str) -> None:
        with self._lock:
            self._by_run.pop(uid, None)


METERED = Metered()


def usage_draft(spent: Spent) -> Draft:
    data: dict[str, object] = {
        "inputTokens": spent.input_tokens,
        "outputTokens": spent.output_tokens,
        "modelRequests": spent.model_requests,
        "unpricedResponses": spent.unpriced,
        "refusedRequests": spent.refused,
        "uncountedResponses": spent.uncounted,
        "source": "gateway",
    }
    if spent.cost_usd or not spent.unpriced:  # (no cost at all of models without a price)
        data["costUsd"] = round(spent.cost_usd, 6)
    return Draft(ev.USAGE, spent.describe(), data)


def logged(metered: Obj | None) -> Spent:
    """What the run's last usage event said."""
    data = metered or {}
    return Spent(
        input_tokens=int(data.get("inputTokens") or 0),
        output_tokens=int(data.get("outputTokens") or 0),
        cost_usd=float(data.get("costUsd") or 0.0),
        model_requests=int(data.get("modelRequests") or 0),
        unpriced=int(data.get("unpricedResponses") or 0),
        refused=int(data.get("refusedRequests") or 0),
        uncounted=int(data.get("uncountedResponses") or 0),
    )


def follow(
    run_uid: str, namespace: str, sandbox: ReadySandbox, summary: ev.RunSummary, now: datetime
) -> tuple[list[Draft], Ending | None]:
    """What the gateway counted since the last usage event (logged, and added to the policy's
    day), and the run's end if it is past its budget."""
    counted = METERED.of_run(run_uid)
    if counted is None:
        return [], None
    before = logged(summary.metered)
    spent = counted.at_least(before)
    drafts = []
    if spent != before:
        _add_to_day(namespace, sandbox, spent - before, now)
        drafts.append(usage_draft(spent))
    budget = Budget.model_validate(summary.budget) if summary.budget else None
    if budget is None or not budgets.passed(budget, spent):
        return drafts, None
    said = budgets.exceeded_message(budget, spent)
    return drafts, Ending(RunPhase.FAILED, R.BUDGET_EXCEEDED, said)


_LOCK = threading.Lock()


def _add_to_day(namespace: str, sandbox: ReadySandbox, delta: Spent, now: datetime) -> None:
    """Add to the day's figures of the run's policy, if it keeps one: a write made only if
    the policy is still the version read (the policy's runs add to it concurrently)."""
    choice = sandbox.policy
    if choice.inline is not None or choice.name is None:
        return  # (an inline policy keeps no day)
    found = CACHE.get("SandboxPolicy", choice.namespace or namespace, choice.name)
    if found is None:
        return
    policy = SandboxPolicySpec.model_validate(found.get("spec") or {})
    if policy.budget is None:
        return
    if policy.budget.per_namespace_daily is None:
        return
    meta = found["metadata"]
    with _LOCK:
        for _ in range(3):
            found = CACHE.freshest(found)
            status = stored_status(SandboxPolicyStatus, found)
            entries = budgets.counted(status.daily_usage or [], namespace, delta, now)
            body = {"dailyUsage": [e.to_api() for e in entries]}
            version = str(found["metadata"].get("resourceVersion") or "")
            try:
                stored = kube.patch_status(
                    "SandboxPolicy", meta["namespace"], meta["name"], body, version or None
                )
            except ConflictError:
                found = kube.get("SandboxPolicy", meta["namespace"], meta["name"]) or found
                CACHE.seen("MODIFIED", found)
                continue
            if stored is not None:
                CACHE.seen("MODIFIED", stored)
            return
    said = (
        f"SandboxPolicy {meta['namespace']}/{meta['name']} kept changing while its day was added to"
    )
    raise ConflictError(409, "Conflict", said)
