"""A host the egress gateway asks about becomes an approval of kind network on the run: the
Event the gateway posts and the operator reads, the operator's store of asks by run, and the
approval each ask becomes (one per host and port, decided like a command's). The whole path
(gateway, Event, approval, the next connection) runs on the real node in
tests/e2e/test_egress_gateway.py."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from paddock.agentruns import gating
from paddock.agentruns.asking import Answered, Asking
from paddock.agentruns.host_asks import HostAsks
from paddock.api.approvals import ApprovalChoice, ApprovalState
from paddock.api.policy import SandboxPolicySpec
from paddock.gateway.asks import MAX_PER_RUN, Asker
from paddock.gateway.directory import Ask
from paddock.render.host_asks import REASON, host_ask_event, read_host_ask

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
POLICY = SandboxPolicySpec.model_validate(
    {"network": {"hosts": {"allow": ["github.com"], "ask": ["*.npmjs.org"]}}}
)


def _asking(approvals: list | None = None, choices: dict | None = None) -> Asking:  # type: ignore[type-arg]
    return Asking(approvals or [], choices or {}, NOW, timedelta(minutes=15),
                         token=lambda: "ab12")  # fmt: skip


def _answer(hosts: list[str], asking: Asking) -> Answered:
    return gating.answer({}, POLICY, {}, lambda _: None, asking, hosts)


def test_the_gateways_event_names_the_run_and_the_host() -> None:
    event = host_ask_event("team", "r1", "uid-r1", "registry.npmjs.org:443", NOW)
    assert event["reason"] == REASON
    assert event["involvedObject"]["kind"] == "AgentRun"
    assert read_host_ask(event) == ("uid-r1", "registry.npmjs.org:443")
    assert read_host_ask({**event, "reason": "Other"}) is None
    assert read_host_ask({**event, "metadata": {}}) is None


def test_the_operator_keeps_each_runs_asks_until_the_run_is_forgotten() -> None:
    asks = HostAsks()
    event = host_ask_event("team", "r1", "uid-r1", "registry.npmjs.org:443", NOW)
    asks.seen(None, event)
    asks.seen("ADDED", host_ask_event("team", "r1", "uid-r1", "cdn.npmjs.org:443", NOW))
    asks.seen("DELETED", event)  # an expired Event: the ask is an approval by then
    assert asks.of_run("uid-r1") == {"registry.npmjs.org:443", "cdn.npmjs.org:443"}
    asks.forget("uid-r1")
    assert asks.of_run("uid-r1") == set()


def test_an_asked_host_becomes_one_pending_network_approval() -> None:
    answered = _answer(["registry.npmjs.org:443"], _asking())
    (approval,) = answered.pending
    assert approval.id.startswith("host-")
    assert (approval.kind, approval.target) == ("network", "registry.npmjs.org:443")
    assert approval.rules == ["network.hosts.ask *.npmjs.org"]
    assert answered.answers == {}  # no gate waits for it
    assert [d.type for d in answered.drafts] == ["approval.requested"]
    again = _answer(["registry.npmjs.org:443"], _asking(answered.approvals))
    assert again.approvals == answered.approvals  # asked twice: still one approval
    assert again.drafts == []


def test_a_person_decides_it_and_an_approve_always_covers_the_rule() -> None:
    first = _answer(["registry.npmjs.org:443"], _asking())
    (approval,) = first.pending
    decided = _answer(
        [], _asking(first.approvals, {approval.id: (ApprovalChoice.ALWAYS, str(approval.digest))})
    )
    assert decided.approvals[0].state == ApprovalState.APPROVED
    assert decided.approvals[0].always
    later = _answer(["cdn.npmjs.org:443"], _asking(decided.approvals))
    assert [a.state for a in later.approvals] == [ApprovalState.APPROVED] * 2


def test_a_host_the_policy_no_longer_asks_about_is_no_approval() -> None:
    assert _answer(["github.com:443", "evil.example:443", "nonsense"], _asking()).approvals == []


def test_an_agent_trying_host_after_host_cannot_flood_the_run_with_approvals() -> None:
    hosts = [f"h{i:03}.npmjs.org:443" for i in range(100)]
    first = _answer(hosts, _asking())
    assert len(first.approvals) == gating.MAX_HOSTS_ASKED
    again = _answer([f"more{i}.npmjs.org:443" for i in range(10)], _asking(first.approvals))
    assert len(again.approvals) == gating.MAX_HOSTS_ASKED  # still waiting ones only


def test_the_gateway_posts_one_event_per_host_and_no_more_than_its_limit_a_run() -> None:
    posted: list[Ask] = []
    done = threading.Event()

    def post(ask: Ask) -> None:
        posted.append(ask)
        if len(posted) == MAX_PER_RUN + 1:
            done.set()

    asker = Asker(post)
    for i in range(3 * MAX_PER_RUN):
        asker(Ask("team", "r1", "uid-r1", f"h{i}.example:443"))
        asker(Ask("team", "r1", "uid-r1", f"h{i}.example:443"))  # the same host again
    asker(Ask("team", "r2", "uid-r2", "h0.example:443"))  # another run has its own
    assert done.wait(10)
    assert [a.target for a in posted[:MAX_PER_RUN]] == [
        f"h{i}.example:443" for i in range(MAX_PER_RUN)
    ]
    assert posted[MAX_PER_RUN].run == "r2"
