"""``Execution`` applying a start decided from a world built in the test (``observe.gather``
replaced by it; the API's writes and the pod's calls recorded by fakes, which is all a unit
test of the applying needs): what each decision writes, in which order, and what it never
does. The same paths against the real API server and pods are tests/integration's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from paddock import metrics
from paddock.agentruns import execution, in_pod, model_access, observe
from paddock.agentruns.execution import WAIT_SECONDS, Execution
from paddock.agentruns.sandbox import ReadySandbox, Verdict
from paddock.agentruns.start import StartWorld
from paddock.api.agentrun import AgentRunStatus, LogBackend, LogLocation
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.kube import client as kube
from paddock.kube.exec import ExecResult
from paddock.policy.choice import PolicyChoice
from paddock.runs import events as ev
from paddock.runs.events import RunSummary

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
BOX = ReadySandbox("box", "box-pod", "app", "s-1", PolicyChoice(name="team"))
RUN = {
    "apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
    "metadata": {"name": "fix", "namespace": "team", "uid": "u-1", "generation": 1,
                 "creationTimestamp": "2026-12-07T11:59:00Z"},
    "spec": {"sandboxRef": {"name": "box"}, "harness": "command", "command": "make test"},
}  # fmt: skip


class MemoryLog:
    """A run's log kept in a list (the writer's side of the RunLog protocol)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.writes = 0

    def where(self) -> LogLocation:
        return LogLocation(backend=LogBackend.CONFIGMAP, location="fix-log")

    def load(self) -> tuple[list[dict[str, Any]], dict[str, int]]:
        return self.events, {}

    def append(self, events: list[dict[str, Any]], cursor: dict[str, int]) -> None:
        self.events += events
        self.writes += 1


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every status write and call into the pod, in order."""
    done: list[tuple[str, Any]] = []

    def patch_status(kind: str, namespace: str, name: str, status: Any, *_: Any) -> None:
        done.append(("status", status))

    def launch(namespace: str, pod: str, run_id: str, payload: str) -> ExecResult:
        done.append(("launch", payload))
        return ExecResult("", "", 0)

    monkeypatch.setattr(kube, "patch_status", patch_status)
    monkeypatch.setattr(in_pod, "launch", launch)
    monkeypatch.setattr(
        in_pod.Observer,
        "prepare",
        lambda _, sandbox, *a: done.append(("prepare", sandbox.pod)) or "",
    )
    monkeypatch.setattr(in_pod, "started_secret_values", lambda *a: done.append(("exec", a)))
    monkeypatch.setattr(execution, "hold", lambda run, sandbox: done.append(("hold", sandbox.name)))
    monkeypatch.setattr(model_access, "grant", lambda *a, **k: model_access.NONE)
    return done


def _step(monkeypatch: pytest.MonkeyPatch, world: StartWorld) -> tuple[Execution, Any]:
    monkeypatch.setattr(observe, "gather", lambda run, spec, launched: world)
    run = Execution(RUN, MemoryLog(), RunSummary(), {}, AgentRunStatus())
    return run, run.step(RUN, NOW)


def _world(policy: str) -> StartWorld:
    spec = SandboxPolicySpec.model_validate({"commands": {"default": policy}})
    return StartWorld("team", verdict=Verdict(BOX), policy=spec)


def test_a_command_waiting_for_a_person_records_the_approval_and_launches_nothing(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, Any]]
) -> None:
    run, delay = _step(monkeypatch, _world("ask"))
    assert delay == WAIT_SECONDS
    assert run.status.phase == "AwaitingApproval"
    assert [a.target for a in run.status.approvals] == ["make test"]
    types = [e["type"] for e in run.log.events]  # type: ignore[attr-defined]
    assert types[0] == ev.SANDBOX_READY
    assert ev.RUN_STARTED not in types
    assert [name for name, _ in calls] == ["status"]  # nothing held, prepared or launched


def test_a_launch_stores_the_digest_of_its_nonce_before_the_harness_can_start(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, Any]]
) -> None:
    run, delay = _step(monkeypatch, _world("allow"))
    assert delay == 0
    names = [name for name, _ in calls]
    assert names[:3] == ["hold", "prepare", "status"]
    assert names.index("launch") > names.index("status")
    digest = calls[2][1]["completionDigest"]
    assert digest == run.status.completion_digest
    assert calls[2][1]["phase"] == "Running"
    types = [e["type"] for e in run.log.events]  # type: ignore[attr-defined]
    assert types == [ev.SANDBOX_READY, ev.RUN_STARTED]  # written together, after the launch


def test_a_denied_command_ends_the_run_without_touching_the_sandbox_and_is_counted(
    monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, Any]]
) -> None:
    counted: list[Any] = []
    monkeypatch.setattr(metrics, "policy_decided", lambda d, source: counted.append((d, source)))
    run, delay = _step(monkeypatch, _world("deny"))
    assert delay is None
    assert run.status.phase == "Failed"
    assert [name for name, _ in calls] == ["status"]  # nothing held, prepared or launched
    types = [e["type"] for e in run.log.events]  # type: ignore[attr-defined]
    assert types == [ev.SANDBOX_READY, ev.RUN_FAILED]  # the log names the sandbox that refused
    assert counted == [([Decision.DENY], "command")]
