"""SandboxPools on the real API server, with the operator running and kwok running the
sandboxes: a pool fills, scales with kubectl scale, refills after runs take members, replaces
stale members, falls back to making a sandbox when empty, keeps what runs took when deleted,
says when its Workspace is missing; and runs arriving together never take a member twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.harnesses import harness_fields
from support.kube import Cluster
from support.model_server import ScriptedModel
from support.runs import (
    OperatorProcess,
    agent_run,
    command_run,
    log_events,
    of_type,
    wait_for_run,
)
from support.sandboxes import (
    condition,
    events_for,
    get,
    merge_patch,
    posted,
    status_of,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

RUNS = 50  # applied at once against a pool of 20: 20 take a member, 30 make theirs
# Across a kill, fewer: the burst's sandboxes load the machine the real-node tests share in CI.
KILLED_RUNS = 20  # against a pool of 8


def _pool(name: str, replicas: int, workspace_name: str = "app", **template: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "SandboxPool",
        "metadata": {"name": name},
        "spec": {"replicas": replicas,
                 "template": {"workspaceRef": {"name": workspace_name}, **template}},
    }  # fmt: skip


def _pool_run(name: str, pool: str, command: str = "echo done") -> dict[str, Any]:
    run = command_run(name, "unused", command, poolRef={"name": pool})
    del run["spec"]["sandboxRef"]
    return run


def _members(cluster: Cluster, namespace: str, pool: str) -> list[dict[str, Any]]:
    listing = cluster.kubectl(
        "get", "sandboxes", "-n", namespace, "-l", f"paddock.dev/pool={pool}", "-o", "json"
    )
    return list(json.loads(listing.stdout)["items"])


def _ready(cluster: Cluster, namespace: str, pool: str, count: int, timeout: float = 120) -> Any:
    """The pool's status once ``count`` members are Ready and it has no other."""
    return wait_for(
        lambda: (
            (s := status_of(cluster, namespace, "sandboxpool", pool)).get("readyReplicas") == count
            and s.get("replicas") == count
            and s
        ),
        timeout,
        what=f"pool {pool} with {count} Ready members",
    )


def _taken(cluster: Cluster, namespace: str, run: str) -> dict[str, Any]:
    return of_type(log_events(cluster, namespace, run), "sandbox.ready")[0]["data"]


def test_a_pool_fills_scales_and_refills_after_a_run_takes_a_member(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("py", 2), namespace)
    status = _ready(cluster, namespace, "py", 2)
    assert condition(status, "Ready")["status"] == "True"
    assert status["selector"] == "paddock.dev/pool=py"
    cluster.kubectl("scale", "sandboxpool", "py", "-n", namespace, "--replicas=3")
    _ready(cluster, namespace, "py", 3)
    before = {m["metadata"]["name"] for m in _members(cluster, namespace, "py")}

    cluster.apply(_pool_run("r1", "py"), namespace)
    status = wait_for_run(cluster, namespace, "r1")
    assert status["phase"] == "Succeeded", status
    taken = _taken(cluster, namespace, "r1")
    assert (taken["pool"], taken["taken"]) == ("py", "claimed")
    assert taken["sandbox"] in before
    _ready(cluster, namespace, "py", 3)  # refilled, without the one taken
    assert taken["sandbox"] not in {
        m["metadata"]["name"] for m in _members(cluster, namespace, "py")
    }
    # The member was the run's own: removed with the run's end, never back in the pool.
    wait_for(lambda: get(cluster, namespace, "sandbox", taken["sandbox"]) is None, 60,
             what="the taken sandbox removed")  # fmt: skip
    wait_for(lambda: status_of(cluster, namespace, "sandboxpool", "py").get("claimed") == 0, 30,
             what="the pool to count no sandbox taken from it")  # fmt: skip
    cluster.kubectl("scale", "sandboxpool", "py", "-n", namespace, "--replicas=1")
    _ready(cluster, namespace, "py", 1)


def test_a_run_whose_template_is_a_pools_takes_a_member_of_it(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("py", 1), namespace)
    _ready(cluster, namespace, "py", 1)
    (member,) = _members(cluster, namespace, "py")
    run = command_run(
        "r1", "unused", "echo done", sandboxTemplate={"workspaceRef": {"name": "app"}}
    )
    del run["spec"]["sandboxRef"]
    cluster.apply(run, namespace)
    assert wait_for_run(cluster, namespace, "r1")["phase"] == "Succeeded"
    taken = _taken(cluster, namespace, "r1")
    assert (taken["pool"], taken["taken"], taken["sandbox"]) == (
        "py", "claimed", member["metadata"]["name"]
    )  # fmt: skip


def test_an_empty_pool_makes_the_run_a_sandbox_from_its_template(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("empty", 0), namespace)
    cluster.apply(_pool_run("r1", "empty"), namespace)
    status = wait_for_run(cluster, namespace, "r1")
    assert status["phase"] == "Succeeded", status
    assert _taken(cluster, namespace, "r1")["taken"] == "created"
    assert _members(cluster, namespace, "empty") == []


def test_an_empty_pool_makes_a_threads_run_the_threads_sandbox(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("empty", 0), namespace)
    run = command_run("t1", "unused", "echo done", threadId="one",
                      sandboxTemplate={"workspaceRef": {"name": "app"}})  # fmt: skip
    del run["spec"]["sandboxRef"]
    cluster.apply(run, namespace)
    status = wait_for_run(cluster, namespace, "t1")
    assert status["phase"] == "Succeeded", status
    taken = _taken(cluster, namespace, "t1")
    assert (taken["pool"], taken["taken"]) == ("empty", "created")
    assert taken["sandbox"].startswith("thread-")
    assert get(cluster, namespace, "sandbox", taken["sandbox"]) is not None  # the thread's


def test_a_deleted_pool_takes_its_members_but_not_what_a_run_took(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("py", 2), namespace)
    _ready(cluster, namespace, "py", 2)
    cluster.apply(_pool_run("long", "py", "sleep 5; echo done"), namespace)
    running = wait_for_run(cluster, namespace, "long", ("Running",), timeout=60)
    cluster.kubectl("delete", "sandboxpool", "py", "-n", namespace, "--wait=false")
    wait_for(lambda: _members(cluster, namespace, "py") == [], 60, what="members collected")
    assert get(cluster, namespace, "sandbox", running["sandboxName"]) is not None
    assert wait_for_run(cluster, namespace, "long")["phase"] == "Succeeded"


def test_stale_members_are_replaced_by_ones_of_the_new_template(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("py", 2), namespace)
    _ready(cluster, namespace, "py", 2)
    old = {m["metadata"]["name"] for m in _members(cluster, namespace, "py")}
    changed = _pool("py", 2, lifecycle={"idleTimeout": "2h"})
    cluster.apply(changed, namespace)
    wait_for(
        lambda: (
            (names := {m["metadata"]["name"] for m in _members(cluster, namespace, "py")})
            and not names & old
            and status_of(cluster, namespace, "sandboxpool", "py").get("readyReplicas") == 2
        ),
        120,
        what="the pool's members all of the new template",
    )


def test_a_member_is_never_run_in_by_name_and_one_changed_or_used_is_never_handed_out(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """A member is judged by what it is, never by its labels: a run naming an untaken member
    fails (SandboxInPool) before anything runs; a member whose policy is loosened away from
    the template, and one a run held while out of the pool (its owner reference taken off,
    the run, the reference put back: a tenant's edits), are deleted, never handed out."""
    cluster.apply(workspace("app"), namespace)
    strict = {"commands": {"allow": ["echo *", "test *"], "default": "deny"}}
    cluster.apply(_pool("py", 2, policy=strict), namespace)
    _ready(cluster, namespace, "py", 2)
    drifted, used = sorted(m["metadata"]["name"] for m in _members(cluster, namespace, "py"))

    named_run = 'echo ran > "$PADDOCK_WORKSPACE/named"'
    cluster.apply(command_run("named", drifted, named_run), namespace)
    named = wait_for_run(cluster, namespace, "named")
    complete = condition(named, "Complete")
    assert (named["phase"], complete["reason"]) == ("Failed", "SandboxInPool"), named
    assert "poolRef" in complete["message"], complete
    assert not of_type(log_events(cluster, namespace, "named"), "run.started")

    loose = {"spec": {"policy": {"commands": {"default": "allow"}}}}
    merge_patch(cluster, namespace, "sandbox", drifted, loose)
    owners = get(cluster, namespace, "sandbox", used)["metadata"]["ownerReferences"]
    merge_patch(cluster, namespace, "sandbox", used, {"metadata": {"ownerReferences": None}})
    outside = command_run("outside", used, 'echo dirt > "$PADDOCK_WORKSPACE/dirt"')
    cluster.apply(outside, namespace)
    ran = wait_for_run(cluster, namespace, "outside")
    assert ran["phase"] == "Succeeded", ran
    merge_patch(cluster, namespace, "sandbox", used, {"metadata": {"ownerReferences": owners}})
    wait_for(
        lambda: (
            get(cluster, namespace, "sandbox", drifted) is None
            and get(cluster, namespace, "sandbox", used) is None
            and status_of(cluster, namespace, "sandboxpool", "py").get("readyReplicas") == 2
        ),
        120,
        what="the changed and the used member deleted, two fresh ones Ready",
    )
    clean = 'test ! -e "$PADDOCK_WORKSPACE/dirt" && test ! -e "$PADDOCK_WORKSPACE/named"'
    cluster.apply(_pool_run("taker", "py", clean), namespace)
    assert wait_for_run(cluster, namespace, "taker")["phase"] == "Succeeded"
    assert _taken(cluster, namespace, "taker")["sandbox"] not in (drifted, used)


def test_a_run_naming_a_missing_pool_waits_saying_so_and_takes_from_it_once_it_exists(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool_run("early", "later"), namespace)
    waiting = wait_for(
        lambda: condition(status_of(cluster, namespace, "agentrun", "early"), "SandboxReady"),
        60, what="the run's SandboxReady condition",
    )  # fmt: skip
    assert (waiting["status"], waiting["reason"]) == ("False", "PoolNotFound"), waiting
    assert "SandboxPool later not found" in waiting["message"]
    assert posted(cluster, namespace, "early", "PoolNotFound")[0]["type"] == "Warning"
    cluster.apply(_pool("later", 1), namespace)
    assert wait_for_run(cluster, namespace, "early", timeout=120)["phase"] == "Succeeded"


def test_a_pool_whose_workspace_is_missing_says_so_and_makes_nothing(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(_pool("orphan", 2, workspace_name="nope"), namespace)
    ready = wait_for(
        lambda: condition(status_of(cluster, namespace, "sandboxpool", "orphan"), "Ready"),
        30, what="the pool's Ready condition",
    )  # fmt: skip
    assert (ready["status"], ready["reason"]) == ("False", "WorkspaceNotFound")
    posted(cluster, namespace, "orphan", "WorkspaceNotFound")
    warned = [e for e in events_for(cluster, namespace, "orphan") if e["type"] == "Warning"]
    assert [e["reason"] for e in warned] == ["WorkspaceNotFound"]
    assert _members(cluster, namespace, "orphan") == []


def test_runs_arriving_together_never_take_a_member_twice(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("py", 20), namespace)
    _ready(cluster, namespace, "py", 20, timeout=180)
    runs = [_pool_run(f"r{i}", "py") for i in range(RUNS)]
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=listing)
    used: dict[str, str] = {}
    outcomes = []
    for i in range(RUNS):
        status = wait_for_run(cluster, namespace, f"r{i}", timeout=240)
        assert status["phase"] == "Succeeded", (status["message"], status["conditions"])
        taken = _taken(cluster, namespace, f"r{i}")
        assert len(of_type(log_events(cluster, namespace, f"r{i}"), "run.started")) == 1
        assert taken["sandbox"] not in used, (taken, used)
        used[taken["sandbox"]] = f"r{i}"
        outcomes.append(taken["taken"])
    assert outcomes.count("claimed") >= 20, outcomes
    assert outcomes.count("claimed") + outcomes.count("created") == RUNS


def _with_sandbox(cluster: Cluster, namespace: str) -> int:
    listing = json.loads(cluster.kubectl("get", "agentruns", "-n", namespace, "-o", "json").stdout)
    return sum(bool((run.get("status") or {}).get("sandboxName")) for run in listing["items"])


def _each_started_once_in_a_sandbox_of_its_own(
    cluster: Cluster, namespace: str, runs: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Each run Succeeded, started once, in a sandbox no other run had: their logs."""
    used: dict[str, str] = {}
    logs = {}
    for name in runs:
        status = wait_for_run(cluster, namespace, name, timeout=240)
        events = logs[name] = log_events(cluster, namespace, name)
        assert status["phase"] == "Succeeded", (status["message"], events[-3:])
        assert len(of_type(events, "run.started")) == 1, name
        sandbox = of_type(events, "sandbox.ready")[0]["data"]["sandbox"]
        assert sandbox not in used, (sandbox, used)
        used[sandbox] = name
    return logs


def test_runs_taking_from_a_pool_across_an_operator_kill_take_no_member_twice(
    cluster: Cluster, namespace: str, as_operator: str
) -> None:
    """The operator (its own process, its ServiceAccount) is SIGKILLed while runs are taking
    members, and started again: each run starts once, in a sandbox no other run had."""
    with OperatorProcess(namespace, as_operator) as operator:
        cluster.apply(workspace("app"), namespace)
        cluster.apply(_pool("py", 8), namespace)
        _ready(cluster, namespace, "py", 8, timeout=180)
        runs = [_pool_run(f"r{i}", "py", "sleep 1; echo done") for i in range(KILLED_RUNS)]
        listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=listing)
        wait_for(lambda: _with_sandbox(cluster, namespace) >= 5, 60,
                 what="five runs with their sandbox")  # fmt: skip
        operator.restart()  # SIGKILL: mid-take, mid-launch, mid-write
        _each_started_once_in_a_sandbox_of_its_own(
            cluster, namespace, [f"r{i}" for i in range(KILLED_RUNS)]
        )


def test_agent_runs_taking_from_a_pool_across_an_operator_kill_each_start_once(
    cluster: Cluster, namespace: str, as_operator: str, agent_clis: Path
) -> None:
    """Real Claude Code runs (scripted model) take from a pool while the operator (its own
    process) is SIGKILLed and started again: each starts once, in a member no other run had,
    and runs its agent loop to the end."""
    with (
        OperatorProcess(namespace, as_operator) as operator,
        ScriptedModel(["echo taken"]) as model,
    ):
        cluster.apply(workspace("app"), namespace)
        cluster.apply(_pool("py", 3), namespace)
        _ready(cluster, namespace, "py", 3, timeout=180)
        fields = harness_fields(cluster, namespace, "unused", "claude-code", model.url)
        runs = []
        for i in range(3):
            run = agent_run(f"a{i}", "unused", "claude-code", "Work.", poolRef={"name": "py"},
                            **fields)  # fmt: skip
            del run["spec"]["sandboxRef"]
            runs.append(run)
        listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=listing)
        wait_for(lambda: _with_sandbox(cluster, namespace) >= 1, 60,
                 what="a run with its sandbox")  # fmt: skip
        operator.restart()  # SIGKILL: mid-take, mid-launch, mid-write
        logs = _each_started_once_in_a_sandbox_of_its_own(
            cluster, namespace, [f"a{i}" for i in range(3)]
        )
    for events in logs.values():  # each ran its agent loop to the end
        assert "taken" in json.dumps(of_type(events, "tool.result")), events


def test_a_threads_runs_take_one_member_which_outlives_them_and_the_pool(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """Runs of one thread arriving together take one member between them (the first takes it,
    the others find it by the thread's key), another thread takes another; the member becomes
    the thread's (no owner), so it stays after the runs end and the pool is deleted."""
    cluster.apply(workspace("app"), namespace)
    cluster.apply(_pool("py", 3), namespace)
    _ready(cluster, namespace, "py", 3)
    template = {"workspaceRef": {"name": "app"}}
    runs = []
    for name, thread in (("a1", "one"), ("a2", "one"), ("a3", "one"), ("b1", "two")):
        run = command_run(name, "unused", "echo done", sandboxTemplate=template, threadId=thread)
        del run["spec"]["sandboxRef"]
        runs.append(run)
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=listing)
    ready = {}
    for name in ("a1", "a2", "a3", "b1"):
        status = wait_for_run(cluster, namespace, name, timeout=120)
        assert status["phase"] == "Succeeded", (status["message"], status["conditions"])
        ready[name] = _taken(cluster, namespace, name)
    thread_one = {ready[name]["sandbox"] for name in ("a1", "a2", "a3")}
    assert len(thread_one) == 1, ready
    assert ready["b1"]["sandbox"] not in thread_one
    takers = [name for name in ("a1", "a2", "a3") if ready[name].get("taken") == "claimed"]
    assert len(takers) == 1, ready  # the thread's first run tells of the take; the rest reuse
    (sandbox,) = thread_one
    taken = get(cluster, namespace, "sandbox", sandbox)
    assert taken is not None
    assert not taken["metadata"].get("ownerReferences"), taken
    assert taken["metadata"]["labels"]["paddock.dev/claimed-from"] == "py"
    _ready(cluster, namespace, "py", 3)  # refilled after both takes
    cluster.kubectl("delete", "sandboxpool", "py", "-n", namespace)
    wait_for(lambda: _members(cluster, namespace, "py") == [], 60, what="members collected")
    assert get(cluster, namespace, "sandbox", sandbox) is not None
    assert get(cluster, namespace, "sandbox", ready["b1"]["sandbox"]) is not None
