"""Deciding a SandboxPool (its members made, replaced and deleted; its status) and what a run
may take from one. Pure."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from paddock.agentruns import claims
from paddock.agentruns import sandbox as sandboxes
from paddock.api.agentrun import AgentRunSpec
from paddock.api.pool import SandboxPoolSpec
from paddock.api.sandbox import SandboxSpec
from paddock.sandboxes.plan import Create, Delete
from paddock.sandboxes.pools import decide_pool

NOW = datetime(2026, 12, 4, 15, 30, tzinfo=UTC)
SPEC = {"replicas": 3, "template": {"workspaceRef": {"name": "app"}}}
WORKSPACE = {"metadata": {"name": "app"}, "status": {"hash": "w1"}}
CURRENT = SandboxPoolSpec.model_validate(SPEC).template_hash("w1")


def _pool(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPool",
        "metadata": {"name": "py", "namespace": "team", "uid": "pool-uid", "generation": 1},
        "spec": {**SPEC, **spec},
    }  # fmt: skip


UP_TO_DATE = [{"type": "UpToDate", "status": "True", "reason": "UpToDate"}]


def _member(
    name: str, ready: bool = True, template: str = CURRENT, at: str = "1", **more: Any
) -> dict[str, Any]:
    member = {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "Sandbox",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                     "resourceVersion": "7", "creationTimestamp": f"2026-12-04T00:00:0{at}Z",
                     "labels": {"paddock.dev/pool": "py", "paddock.dev/pool-template": template},
                     "ownerReferences": [{"uid": "pool-uid", "controller": True}]},
        "spec": {**SPEC["template"], **more.get("spec", {})},
        "status": {"phase": "Ready" if ready else "Pending",
                   "conditions": UP_TO_DATE if ready else [], **more.get("status", {})},
    }  # fmt: skip
    if "annotations" in more:
        member["metadata"]["annotations"] = more["annotations"]
    return member


def _made(plan: Any) -> int:
    return sum(isinstance(w, Create) for w in plan.writes)


def _deleted(plan: Any) -> list[str]:
    return [w.name for w in plan.writes if isinstance(w, Delete)]


def test_an_empty_pool_makes_its_members_controlled_by_it_and_named_after_it() -> None:
    plan = decide_pool(_pool(), [], 0, WORKSPACE, NOW)
    assert _made(plan) == 3
    made = plan.writes[0].obj  # type: ignore[union-attr]
    assert made["metadata"]["generateName"] == "py-"
    assert made["metadata"]["labels"]["paddock.dev/pool"] == "py"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "pool-uid"
    assert made["spec"]["workspaceRef"] == {"name": "app"}
    assert plan.status.selector == "paddock.dev/pool=py"  # type: ignore[attr-defined]
    ready = plan.status.conditions[0]  # type: ignore[attr-defined]
    assert (ready.status, ready.reason) == ("False", "Filling")


def test_a_full_pool_is_ready_and_writes_nothing_but_its_status() -> None:
    members = [_member("py-a"), _member("py-b"), _member("py-c")]
    plan = decide_pool(_pool(), members, 4, WORKSPACE, NOW)
    assert plan.writes == []
    status = plan.status
    assert (status.replicas, status.ready_replicas, status.claimed) == (3, 3, 4)  # type: ignore[attr-defined]
    assert status.conditions[0].reason == "Ready"  # type: ignore[attr-defined]


def test_scaled_down_the_pool_deletes_members_not_ready_first_then_the_newest() -> None:
    members = [_member("py-a", at="1"), _member("py-b", at="2"), _member("py-c", False, at="3")]
    assert _deleted(decide_pool(_pool(replicas=2), members, 0, WORKSPACE, NOW)) == ["py-c"]
    (gone,) = decide_pool(_pool(replicas=2), members, 0, WORKSPACE, NOW).writes
    assert gone.resource_version == "7"  # type: ignore[union-attr]  (not one a run took since)
    assert _deleted(decide_pool(_pool(replicas=1), members, 0, WORKSPACE, NOW)) == ["py-c", "py-b"]


def test_stale_members_are_replaced_without_dropping_below_the_ready_count() -> None:
    stale = [_member(f"py-{n}", template="old", at=str(i)) for i, n in enumerate("abc")]
    first = decide_pool(_pool(), stale, 0, WORKSPACE, NOW)
    assert (_made(first), _deleted(first)) == (3, [])  # fresh ones first; all 3 stay
    fresh_one = [*stale, _member("py-d", at="4"), _member("py-e", False), _member("py-f", False)]
    second = decide_pool(_pool(), fresh_one, 0, WORKSPACE, NOW)
    assert (_made(second), _deleted(second)) == (0, ["py-a"])  # 4 Ready: one may go
    assert second.status.stale_replicas == 3  # type: ignore[attr-defined]
    not_ready_stale = [_member("py-a", False, template="old"), *[_member(f"py-{n}") for n in "xyz"]]
    assert _deleted(decide_pool(_pool(), not_ready_stale, 0, WORKSPACE, NOW)) == ["py-a"]


def test_a_pool_whose_workspace_is_missing_or_unvalidated_makes_nothing_and_says_so() -> None:
    missing = decide_pool(_pool(), [], 0, None, NOW)
    assert missing.writes == []
    assert missing.status.conditions[0].reason == "WorkspaceNotFound"  # type: ignore[attr-defined]
    assert [n.reason for n in missing.notices] == ["WorkspaceNotFound"]
    pending = decide_pool(_pool(), [], 0, {"metadata": {"name": "app"}}, NOW)
    assert pending.status.conditions[0].reason == "WorkspaceNotReady"  # type: ignore[attr-defined]


def test_a_run_takes_only_a_ready_current_member_its_pool_controls() -> None:
    others = {**_member("py-x"), "metadata": {**_member("py-x")["metadata"], "ownerReferences": []}}
    sandboxes = [_member("py-b", at="2"), _member("py-a", at="1"), _member("py-c", False),
                 _member("py-d", template="old"), others]  # fmt: skip
    found = claims.candidates(_pool(), sandboxes, CURRENT, "run-uid")
    assert sorted(s["metadata"]["name"] for s in found) == ["py-a", "py-b"]


OUT_OF_DATE = [{"type": "UpToDate", "status": "False", "reason": "WorkspaceChanged"}]
LOOSE = {"policy": {"commands": {"default": "allow"}}}


def test_a_member_is_judged_by_what_it_is_not_by_its_labels() -> None:
    spec = SandboxPoolSpec.model_validate(SPEC)
    assert spec.unfit(_member("py-a")) is None
    assert spec.unfit(_member("py-a", spec=LOOSE)) == "its spec is no longer the pool's template"
    assert spec.unfit(_member("py-a", spec={"image": "other:1"})) is not None
    assert spec.unfit(_member("py-a", spec={"workspaceRef": {"name": "b"}})) is not None
    assert spec.unfit(_member("py-a", status={"everHeld": True})) == "a run has held it"
    changed_back = _member("py-a")
    changed_back["metadata"]["generation"] = 3  # a spec edited, and edited back
    assert spec.unfit(changed_back) == "its spec was changed since it was made"
    assert spec.unfit({**_member("py-a"), "spec": {"bogus": 1}}) == "its spec is invalid"


def test_a_run_takes_no_member_that_changed_was_held_is_held_or_is_out_of_date() -> None:
    held = _member("py-c", annotations={"paddock.dev/held-by": "other-run"})
    sandboxes = [_member("py-a"), _member("py-b", spec=LOOSE), held,
                 _member("py-d", status={"everHeld": True}),
                 _member("py-e", status={"conditions": OUT_OF_DATE})]  # fmt: skip
    found = claims.candidates(_pool(), sandboxes, CURRENT, "run-uid")
    assert [s["metadata"]["name"] for s in found] == ["py-a"]


def test_a_member_no_longer_what_the_pool_promises_is_deleted_at_once_unless_held() -> None:
    held = _member("py-c", annotations={"paddock.dev/held-by": "r"}, status={"everHeld": True})
    members = [_member("py-a", spec=LOOSE), _member("py-b", status={"everHeld": True}), held]
    plan = decide_pool(_pool(), members, 0, WORKSPACE, NOW)
    assert sorted(_deleted(plan)) == ["py-a", "py-b"]  # py-c goes once its run lets it go
    assert _made(plan) == 3  # none of them counts as one the pool keeps
    assert plan.status.stale_replicas == 3  # type: ignore[attr-defined]
    # Prepared from an older Workspace, whatever its label says: replaced, as stale ones are.
    behind = [_member(f"py-{n}", status={"conditions": OUT_OF_DATE}) for n in "abc"]
    plan = decide_pool(_pool(), behind, 0, WORKSPACE, NOW)
    assert (_made(plan), _deleted(plan)) == (3, [])


def test_runs_arriving_together_try_the_members_in_orders_of_their_own() -> None:
    sandboxes = [_member(f"py-{i:02d}") for i in reversed(range(20))]
    oldest_first = [f"py-{i:02d}" for i in range(20)]  # (of one age: by name)
    orders = [
        [s["metadata"]["name"] for s in claims.candidates(_pool(), sandboxes, CURRENT, f"u{n}")]
        for n in range(20)
    ]
    for order in orders:  # every member, oldest first from the run's own place, then round
        start = oldest_first.index(order[0])
        assert order == oldest_first[start:] + oldest_first[:start]
    firsts = {order[0] for order in orders}
    assert len(firsts) >= 8  # spread, not all on one member (20 uids over 20 members)
    again = claims.candidates(_pool(), sandboxes, CURRENT, "u3")
    assert [s["metadata"]["name"] for s in again] == orders[3]  # the same run: the same order


def test_the_take_makes_the_run_the_controller_holds_marks_and_takes_the_pool_label_off() -> None:
    run = {"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
           "metadata": {"name": "r1", "namespace": "team", "uid": "run-uid"}}  # fmt: skip
    body = claims.claim(run, "py", datetime(2026, 12, 4, 9, 30, tzinfo=UTC))
    labels = body["metadata"]["labels"]
    assert labels == {"paddock.dev/pool": None, "paddock.dev/pool-template": None,
                      "paddock.dev/claimed-from": "py", "paddock.dev/run": "run-uid"}  # fmt: skip
    assert body["metadata"]["ownerReferences"][0]["uid"] == "run-uid"
    assert body["metadata"]["annotations"] == {
        "paddock.dev/held-by": "run-uid",
        "paddock.dev/held-by-run": "r1",
        "paddock.dev/last-activity": "2026-12-04T09:30:00Z",
    }
    taken = _member("py-a")
    taken["metadata"]["labels"] = {"paddock.dev/run": "run-uid"}
    taken["metadata"]["ownerReferences"] = body["metadata"]["ownerReferences"]
    assert claims.taken("run-uid", [_member("py-b"), taken]) is taken
    assert claims.taken("other-uid", [taken]) is None
    name, made = claims.own_sandbox(run, _pool())
    assert name == "r1-run-uid"
    assert made["metadata"]["ownerReferences"][0]["uid"] == "run-uid"
    assert made["spec"]["workspaceRef"] == {"name": "app"}


def test_a_template_run_takes_from_the_pool_of_its_very_template_only() -> None:
    template = SandboxSpec.model_validate({"workspaceRef": {"name": "app"}})
    other = _pool(template={"workspaceRef": {"name": "other"}})
    other["metadata"] = {**other["metadata"], "name": "a-other"}
    assert claims.matching_pool(template, [other, _pool()]) == "py"
    assert claims.matching_pool(template, [other]) is None
    idle = SandboxSpec.model_validate({"workspaceRef": {"name": "app"},
                                       "lifecycle": {"idleTimeout": "1h"}})  # fmt: skip
    assert claims.matching_pool(idle, [_pool()]) is None


def _thread_run(name: str, at: str, phase: str | None = None, thread: str = "t1") -> dict[str, Any]:
    run: dict[str, Any] = {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}",
                     "creationTimestamp": f"2026-12-04T00:00:0{at}Z"},
        "spec": {"harness": "command", "command": "true",
                 "sandboxTemplate": {"workspaceRef": {"name": "app"}}, "threadId": thread},
    }  # fmt: skip
    if phase:
        run["status"] = {"phase": phase}
    return run


def test_a_threads_take_gives_the_member_the_threads_key_and_no_owner() -> None:
    run = _thread_run("r1", "1")
    body = claims.thread_claim(run, "py", "k1", "t1", datetime(2026, 12, 4, 9, 30, tzinfo=UTC))
    labels = body["metadata"]["labels"]
    assert labels["paddock.dev/thread-key"] == "k1"
    assert labels["paddock.dev/pool"] is None
    assert labels["paddock.dev/claimed-from"] == "py"
    assert body["metadata"]["ownerReferences"] is None  # merge patch: the pool's reference goes
    assert body["metadata"]["annotations"]["paddock.dev/held-by"] == "uid-r1"


def test_a_threads_taken_sandbox_is_found_by_its_key_the_oldest_first() -> None:
    older, newer, other = _member("py-a", at="1"), _member("py-b", at="2"), _member("py-c")
    for sandbox, key in ((older, "k1"), (newer, "k1"), (other, "k2")):
        sandbox["metadata"]["labels"] = {"paddock.dev/thread-key": key,
                                         "paddock.dev/claimed-from": "py"}  # fmt: skip
    assert claims.thread_sandbox("k1", [newer, other, older]) is older
    assert claims.thread_sandbox("k2", [newer, other, older]) is other
    assert claims.thread_sandbox("k3", [newer, other, older]) is None
    older["metadata"]["deletionTimestamp"] = "2026-12-04T01:00:00Z"
    assert claims.thread_sandbox("k1", [newer, older]) is newer
    made = _member("thread-k1")  # a sandbox not from a pool is found by its name, not here
    made["metadata"]["labels"] = {"paddock.dev/thread-key": "k1"}
    assert claims.thread_sandbox("k1", [made]) is None


def test_only_the_threads_first_run_takes_and_one_waiting_for_its_inputs_is_passed_over() -> None:
    me = _thread_run("b", "5")
    spec = AgentRunSpec.model_validate(me["spec"])
    cases = [
        ([_thread_run("a", "1")], "a"),  # created first, not judged yet
        ([_thread_run("a", "1", "WaitingForSandbox")], "a"),
        ([_thread_run("a", "1", "Pending")], None),  # waits for its Secrets or prompt
        ([_thread_run("a", "1", "Succeeded")], None),
        ([_thread_run("c", "7")], None),  # created after
        ([_thread_run("a", "1", thread="t2")], None),  # another thread
        ([_thread_run("a", "5"), me], "a"),  # the same second: by name
        ([_thread_run("c", "5"), me], None),
        ([_thread_run("c", "3"), _thread_run("a", "2")], "a"),  # the first of several
    ]
    for others, expected in cases:
        assert claims.thread_run_before(me, spec, others) == expected, others


def test_a_run_made_the_sandbox_labelled_with_it_and_taken_from_no_pool() -> None:
    run = _thread_run("r1", "1")
    made = _member("thread-k1")
    made["metadata"]["labels"] = {"paddock.dev/run": "uid-r1", "paddock.dev/thread-key": "k1"}
    assert claims.made_by(run, made)
    assert not claims.made_by(_thread_run("r2", "1"), made)
    made["metadata"]["labels"]["paddock.dev/claimed-from"] = "py"
    assert not claims.made_by(run, made)
    assert not claims.made_by(run, None)


def test_a_run_naming_an_untaken_member_is_refused_and_one_a_run_took_is_not_a_pools() -> None:
    run = {"metadata": {"name": "r", "namespace": "team", "uid": "run-uid"}}
    spec = AgentRunSpec.model_validate(
        {"harness": "command", "command": "true", "sandboxRef": {"name": "py-a"}}
    )
    member = _member("py-a")
    member["metadata"]["ownerReferences"][0] |= {
        "apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPool", "name": "py"}  # fmt: skip
    refused = sandboxes.judge(run, spec, "py-a", member, "")
    assert isinstance(refused.state, sandboxes.Unusable)
    assert refused.state.reason == "SandboxInPool"
    assert "poolRef: {name: py}" in refused.state.message
    taken = {**member, "metadata": {**member["metadata"], "ownerReferences": [
        {"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun", "uid": "x", "controller": True}
    ]}}  # fmt: skip
    assert isinstance(sandboxes.judge(run, spec, "py-a", taken, "").state, sandboxes.ReadySandbox)
