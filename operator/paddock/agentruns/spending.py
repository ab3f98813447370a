"""A run's budget, acted on: the ceilings it starts with (its own and its policy's, the
stricter), whether it may start at all (its model must be reached through the gateway's model
route, where the counting is; its namespace's day under the policy must not be spent), and,
while it runs, what the gateway counted (its ``ModelUsage`` Events, as the operator's watch of
the gateway's Events delivers them), logged as ``usage`` events, added to the policy's day,
and the run's end once it is past a ceiling.

A policy's day (``status.dailyUsage``) is added to as the run's counts grow: the write is made
before the usage event is logged, so an operator that stops between the two counts that part
twice, never not at all."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from paddock.agentruns.decide import Ending, Wait
from paddock.agentruns.inputs import workspace_of
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.agentrun import AgentRunSpec, RunPhase
from paddock.api.budget import Budget
from paddock.api.common import SecretRef, stored_status
from paddock.api.policy import KeyInSandbox, SandboxPolicySpec, SandboxPolicyStatus
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import RunReason as R
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.kube.errors import ConflictError
from paddock.policy import budgets, model_keys
from paddock.policy.budgets import Spent
from paddock.render.model_usage import read_usage
from paddock.runs import events as ev
from paddock.runs.events import Draft

Obj = dict[str, Any]
UNENFORCEABLE = (
    "the run has a budget ({whose}), which is counted at the egress gateway's model route, "
    "but its model is not reached there: {why}"
)


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


def policy_of(namespace: str, sandbox: ReadySandbox) -> tuple[SandboxPolicySpec | None, Obj | None]:
    """The policy the run is held to, and its object (None for an inline policy)."""
    choice = sandbox.policy
    if choice.inline is not None:
        return choice.inline, None
    if choice.name is None:
        return None, None
    found = CACHE.get("SandboxPolicy", choice.namespace or namespace, choice.name)
    if found is None:
        return None, None
    return SandboxPolicySpec.model_validate(found.get("spec") or {}), found


def may_start(
    namespace: str,
    spec: AgentRunSpec,
    sandbox: ReadySandbox,
    routed: bool,
    now: datetime,
    refuse_keys: bool = False,
) -> tuple[Budget | None, Wait | Ending | None]:
    """The run's ceilings (None: it has none), and why it cannot start yet (its namespace's
    day is spent under its policy) or at all (its model key would be in the sandbox where that
    is refused, ``refuse_keys`` by the operator; a budget nothing would count), if so."""
    policy, found = policy_of(namespace, sandbox)
    refusing = policy is not None and policy.model_key.in_sandbox == KeyInSandbox.REFUSE
    if refusing or refuse_keys:
        places = _key_places(namespace, spec, sandbox, routed)
        label = str(sandbox.policy.label) if refusing else None
        if (refused := model_keys.refusal(places, label, refuse_keys)) is not None:
            return None, Ending(RunPhase.FAILED, R.KEY_IN_SANDBOX_REFUSED, refused)
    limits = policy.budget if policy is not None else None
    budget = budgets.effective(spec.budget, limits)
    daily = limits.per_namespace_daily if limits is not None else None
    if (budget is not None or daily is not None) and not routed:
        whose = "its own" if spec.budget is not None else f"policy {sandbox.policy.label}'s"
        why = (
            "it names no modelKey"
            if spec.model_key is None
            else "the operator knows of no egress gateway's model route"
        )
        said = UNENFORCEABLE.format(whose=whose, why=why)
        return budget, Ending(RunPhase.FAILED, R.BUDGET_UNENFORCEABLE, said)
    if daily is not None and found is not None:
        status = stored_status(SandboxPolicyStatus, found)
        today = budgets.spent_on(status.daily_usage or [], namespace, budgets.day_of(now))
        waiting = budgets.exhausted(daily, today, namespace, str(sandbox.policy.label))
        if waiting:
            return budget, Wait(RunPhase.PENDING, C.WITHIN_BUDGET, R.BUDGET_EXHAUSTED, waiting)
    return budget, None


def _key_places(
    namespace: str, spec: AgentRunSpec, sandbox: ReadySandbox, routed: bool
) -> list[str]:
    """Where the run's model key would be in its sandbox (gathered: the Workspace, the pod as
    it started, and, with a modelKey, the values of every secret the sandbox gets)."""
    pod = CACHE.get("Pod", namespace, sandbox.pod)
    workspace = workspace_of(namespace, sandbox)
    exposed = model_keys.exposures(spec, workspace, sandbox.workspace, pod)
    values: dict[SecretRef, str] = {}
    if spec.model_key is not None:
        refs = [spec.model_key.secret_key_ref.pair, *(e.ref for e in exposed)]
        values = kube.secret_values(namespace, list(dict.fromkeys(refs)))
    return model_keys.placements(spec, exposed, routed, values)


def day_ceilings(namespace: str, sandbox: ReadySandbox) -> Budget | None:
    """The ceilings of the run's namespace's day under its policy, if it has any."""
    policy, _ = policy_of(namespace, sandbox)
    return policy.budget.per_namespace_daily if policy and policy.budget else None


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
    policy, found = policy_of(namespace, sandbox)
    if found is None or policy is None or policy.budget is None:
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
