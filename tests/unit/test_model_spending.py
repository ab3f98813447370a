"""What a run spent at the gateway's model route, from the route to the operator: the gateway's
meter refuses a request at a ceiling and tells its totals (the usage Event of its process); the
operator adds up the processes' Events, logs what grew, and ends a run past its budget."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from paddock.agentruns import spending
from paddock.agentruns.asking import Asking
from paddock.agentruns.sandbox import ReadySandbox
from paddock.agentruns.start import Context, StartWorld, may_start
from paddock.api.agentrun import AgentRunSpec
from paddock.api.budget import Budget
from paddock.api.policy import SandboxPolicySpec
from paddock.api.reasons import RunReason as R
from paddock.gateway.directory import Directory
from paddock.gateway.meter import Meter
from paddock.gateway.usage import Usage
from paddock.policy.budgets import ADMITTED, Spent
from paddock.policy.choice import PolicyChoice
from paddock.render.model_routes import Route
from paddock.render.model_usage import read_usage, usage_event, usage_patch
from paddock.runs import events as ev
from paddock.runs.events import RunSummary

NOW = datetime(2026, 12, 4, 15, 30, tzinfo=UTC)


def _route(budget: Budget | None = None, uid: str = "uid-1") -> Route:
    return Route("digest", "sk", "https://api.anthropic.com", "anthropic", "team/r1", "team/box",
                 NOW + timedelta(hours=1), "claude-code", uid, budget)  # fmt: skip


class Told:
    """A publish that records what it was told, and lets a test wait for it."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Spent]] = []
        self.changed = threading.Condition()

    def __call__(self, route: Route, spent: Spent, replica: str) -> None:
        with self.changed:
            self.told.append((route.uid, spent))
            self.changed.notify_all()

    def wait_for(self, spent: Spent) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: (self.told or [("", None)])[-1][1] == spent, 10)


def test_the_usage_event_reads_back_as_written_and_its_patch_carries_the_totals() -> None:
    spent = Spent(200, 40, 0.0012, 2, 1, 1)
    event = usage_event("team", "r1", "uid-1", "gw-0/12/ab", spent, NOW)
    assert event["involvedObject"]["uid"] == "uid-1"
    assert event["source"] == {"component": "paddock-gateway"}
    assert read_usage(event) == ("uid-1", event["metadata"]["name"], spent)
    patch = usage_patch(Spent(300, 60), NOW)
    patched = {**event, **patch, "metadata": {**event["metadata"], **patch["metadata"]}}
    assert read_usage(patched) == ("uid-1", event["metadata"]["name"], Spent(300, 60))
    assert "1 refused at the budget" in event["message"]


def test_an_event_that_is_not_a_usage_event_or_does_not_read_counts_nothing() -> None:
    event = usage_event("team", "r1", "uid-1", "gw", Spent(1), NOW)
    assert read_usage({**event, "reason": "HostApprovalNeeded"}) is None
    broken = {**event, "metadata": {**event["metadata"], "annotations": {
        "paddock.dev/model-usage": "{not json"}}}  # fmt: skip
    assert read_usage(broken) is None
    odd = {**event, "metadata": {**event["metadata"], "annotations": {
        "paddock.dev/model-usage": '{"inputTokens": -5, "outputTokens": "9", "costUSD": true}',
    }}}  # fmt: skip
    assert read_usage(odd) == ("uid-1", event["metadata"]["name"], Spent())


def test_the_meter_counts_each_request_and_refuses_one_at_a_ceiling_telling_at_once() -> None:
    told = Told()
    meter = Meter(told, replica="gw", period=3600)  # (only a ceiling, or tell, publishes)
    route = _route(Budget(tokens=200))
    assert meter.admit(route) == ADMITTED
    meter.used(route, Usage(100, 20, "claude-sonnet-4-5"), 0.0006)
    assert meter.admit(route) == ADMITTED
    meter.used(route, Usage(100, 20, "claude-sonnet-4-5"), 0.0006)  # 240: reached
    told.wait_for(Spent(200, 40, 0.0012, 2))
    assert meter.admit(route).refused == "tokens 240 of 200"
    meter.tell(route.uid)
    assert told.told[-1] == ("uid-1", Spent(200, 40, 0.0012, 2, 0, 1))
    meter.forget(route.uid)
    assert meter.spent(route.uid) == Spent()


def test_the_meter_tells_what_changed_each_period_and_an_unpriced_answer_is_marked() -> None:
    told = Told()
    meter = Meter(told, replica="gw", period=0.05)
    route = _route()  # no budget: counted all the same
    assert meter.admit(route) == ADMITTED
    meter.used(route, Usage(100, 20, "private-model"), None)
    told.wait_for(Spent(100, 20, 0.0, 1, unpriced=1))
    assert meter.admit(route) == ADMITTED
    told.wait_for(Spent(100, 20, 0.0, 2, unpriced=1))


def test_an_answer_is_counted_as_it_streams_and_once_in_all() -> None:
    """What passed of an answer still streaming is told within the period (a gateway that
    stops mid-answer has told it); its end adds only the rest, and marks it as a whole."""
    told = Told()
    meter = Meter(told, replica="gw", period=0.05)
    route = _route()
    assert meter.admit(route) == ADMITTED
    meter.streaming(route, Spent(input_tokens=100, cost_usd=0.0003))  # message_start passed
    told.wait_for(Spent(100, 0, 0.0003, 1))
    meter.used(route, Usage(100, 20, "claude-sonnet-4-5"), 0.0006, streamed=Spent(100, 0, 0.0003))
    told.wait_for(Spent(100, 20, 0.0006, 1))
    meter.used(route, Usage(0, 0, "private-model"), None, uncounted=True)  # cut short, unread
    told.wait_for(Spent(100, 20, 0.0006, 1, uncounted=1))


def test_the_operator_adds_up_each_gateway_process_and_keeps_the_larger_of_an_events_totals() -> (
    None
):
    metered = spending.Metered()
    one = usage_event("team", "r1", "uid-1", "gw-a", Spent(100, 20, 0.1, 1), NOW)
    two = usage_event("team", "r1", "uid-1", "gw-b", Spent(200, 40, 0.2, 2), NOW)
    assert metered.of_run("uid-1") is None
    for event in (one, two):
        metered.seen("ADDED", event)
    assert metered.of_run("uid-1") == Spent(300, 60, 0.30000000000000004, 3)
    late = usage_event("team", "r1", "uid-1", "gw-a", Spent(50, 10, 0.05, 1), NOW)
    metered.seen("MODIFIED", late)  # an older version, delivered late: nothing goes back
    metered.seen("DELETED", two)  # expired: its totals stay counted
    assert metered.of_run("uid-1") == Spent(300, 60, 0.30000000000000004, 3)
    metered.forget("uid-1")
    assert metered.of_run("uid-1") is None


def _summary(budget: dict[str, Any] | None, *events: tuple[str, dict[str, Any]]) -> RunSummary:
    summary = RunSummary()
    started = [(ev.RUN_STARTED, {"harness": "claude-code", "budget": budget}), *events]
    summary.add_all(
        {"seq": i, "time": "t", "type": kind, "summary": "", "data": data}
        for i, (kind, data) in enumerate(started)
    )
    return summary


def test_what_grew_is_logged_and_a_run_past_its_budget_ends_budget_exceeded() -> None:
    box = ReadySandbox("box", "box", "app", policy=PolicyChoice())
    summary = _summary({"tokens": 150})
    spending.METERED.seen(
        "ADDED", usage_event("team", "r1", "uid-9", "gw", Spent(100, 20, 0, 1), NOW)
    )
    drafts, ending = spending.follow("uid-9", "team", box, summary, NOW)
    assert ending is None
    assert [(d.type, d.data["inputTokens"], d.data["modelRequests"]) for d in drafts] == [
        (ev.USAGE, 100, 1)
    ]
    summary = _summary({"tokens": 150}, (ev.USAGE, drafts[0].data))
    assert spending.follow("uid-9", "team", box, summary, NOW) == ([], None)  # nothing grew
    spending.METERED.seen(
        "MODIFIED", usage_event("team", "r1", "uid-9", "gw", Spent(200, 40, 0, 2), NOW)
    )
    drafts, ending = spending.follow("uid-9", "team", box, summary, NOW)
    assert ending is not None
    assert ending.reason == R.BUDGET_EXCEEDED
    assert ending.message.startswith("the run passed its budget (tokens 240 of 150)")
    assert drafts[0].data["inputTokens"] == 200
    spending.METERED.forget("uid-9")


def test_the_gateways_count_is_the_runs_usage_over_the_harness_own_report() -> None:
    usage = {"inputTokens": 200, "outputTokens": 40, "modelRequests": 2, "costUsd": 0.0012}
    summary = _summary(None, (ev.USAGE, usage), (ev.RESULT, {"inputTokens": 5, "costUsd": 9.0}))
    assert summary.usage == usage
    reported = _summary(None, (ev.RESULT, {"inputTokens": 5, "outputTokens": 1, "costUsd": 9.0}))
    assert reported.usage == {"inputTokens": 5, "outputTokens": 1, "costUsd": 9.0}


def _spec(**fields: Any) -> AgentRunSpec:
    return AgentRunSpec.model_validate(
        {"sandboxRef": {"name": "box"}, "harness": "claude-code", "prompt": "p", **fields}
    )


def _may_start(
    spec: AgentRunSpec, box: ReadySandbox, routed: bool, now: datetime, policy: Any = None
) -> tuple[Budget | None, Any]:
    found = None if policy is None else SandboxPolicySpec.model_validate(policy["spec"])
    world = StartWorld("team-daily", policy=found, policy_object=policy)
    context = Context(Asking([], {}, now, timedelta(minutes=5)), now, routed)
    return may_start(world, spec, box, found, context)


def test_a_budget_nothing_would_count_ends_the_run_before_it_starts() -> None:
    box = ReadySandbox("box", "box", "app", policy=PolicyChoice())
    budget, held = _may_start(_spec(budget={"tokens": 10}), box, False, NOW)
    assert budget == Budget(tokens=10)
    assert held is not None
    assert held.reason == R.BUDGET_UNENFORCEABLE
    assert "it names no modelKey" in held.message
    assert _may_start(_spec(), box, False, NOW) == (None, None)


def test_a_namespace_whose_day_is_spent_under_its_policy_keeps_new_runs_pending() -> None:
    policy = {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPolicy",
        "metadata": {"name": "metered", "namespace": "team-daily", "resourceVersion": "5"},
        "spec": {"budget": {"tokens": 1000, "perNamespaceDaily": {"tokens": 300}}},
        "status": {"dailyUsage": [{"namespace": "team-daily", "day": "2026-12-04",
                                   "inputTokens": 250, "outputTokens": 50}]},
    }  # fmt: skip
    box = ReadySandbox("box", "box", "app", policy=PolicyChoice(name="metered"))
    key = {"secretKeyRef": {"name": "llm", "key": "key"}}
    budget, held = _may_start(_spec(modelKey=key), box, True, NOW, policy)
    assert budget == Budget(tokens=1000)
    assert held is not None
    assert held.reason == R.BUDGET_EXHAUSTED
    assert "tokens 300 of 300" in held.message
    tomorrow = NOW + timedelta(days=1)
    assert _may_start(_spec(modelKey=key), box, True, tomorrow, policy)[1] is None


def test_a_replica_refuses_once_the_runs_status_says_every_replica_reached_a_ceiling() -> None:
    directory = Directory()
    run = {
        "metadata": {"namespace": "team", "name": "r1", "uid": "uid-1"},
        "status": {"phase": "Running", "sandboxName": "box",
                   "usage": {"inputTokens": 150, "outputTokens": 60, "modelRequests": 2,
                             "source": "gateway"}},
    }  # fmt: skip
    meter = Meter(Told(), replica="gw-b", period=3600, known=directory.usage_of)
    route = _route(Budget(tokens=200))
    assert meter.admit(route) == ADMITTED  # nothing known yet: this replica counted nothing
    directory.run("ADDED", run)
    assert directory.usage_of("uid-1") == Spent(150, 60, 0.0, 2)
    assert meter.admit(route).refused == "tokens 210 of 200"  # the others' answers, in the status
    directory.run("MODIFIED", {**run, "status": {**run["status"], "phase": "Succeeded"}})
    assert directory.usage_of("uid-1") == Spent()
    harness_said = {**run["status"], "usage": {"inputTokens": 10**6, "source": "harness"}}
    directory.run("MODIFIED", {**run, "status": harness_said})
    assert directory.usage_of("uid-1") == Spent()  # only the gateway's own count is believed
