"""AgentRuns on the real API server, with the operator running and kwok running the harness as
a local process: events, the log, failures, restarts, cancel and timeout, reuse."""

from __future__ import annotations

from typing import Any

import pytest

from support.kube import Cluster
from support.runs import command_run, log_events, of_type, wait_for_run
from support.sandboxes import ready_sandbox

pytestmark = pytest.mark.integration

GIT_BASE = (
    "git init -q . && git -c user.email=t@example.com -c user.name=t commit -q --allow-empty "
    "-m base"
)


def test_command_run_succeeds_with_file_events_and_a_diff(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    command = (
        f"{GIT_BASE} && echo hello > notes.txt && sleep 2 && echo more >> notes.txt && echo done"
    )
    cluster.apply(command_run("write", "box", command), namespace)

    status = wait_for_run(cluster, namespace, "write")
    assert status["phase"] == "Succeeded", status
    events = log_events(cluster, namespace, "write")
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert status["eventCount"] == len(events)
    types = [e["type"] for e in events]
    assert types[:2] == ["sandbox.ready", "run.started"]
    assert types[-1] == "run.completed"
    assert [e["data"]["text"] for e in of_type(events, "output")] == ["done"]
    changes = [(e["data"]["change"], e["data"]["path"]) for e in of_type(events, "sandbox.file")]
    assert ("created", "notes.txt") in changes
    assert ("changed", "notes.txt") in changes
    (diff,) = of_type(events, "file.changed")
    assert {"path": "notes.txt", "status": "untracked"} in diff["data"]["files"]
    assert status["changedFiles"] == ["notes.txt"]
    assert status["result"]["exitCode"] == 0
    assert status["log"]["backend"] == "configmap"
    assert status["startedAt"]
    assert status["completedAt"]


def test_failing_command_reports_the_stderr_tail(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(
        command_run("fail", "box", "echo working; echo 'cannot find config.yaml' >&2; exit 3"),
        namespace,
    )
    status = wait_for_run(cluster, namespace, "fail")
    assert status["phase"] == "Failed"
    assert status["result"]["exitCode"] == 3
    assert "cannot find config.yaml" in status["message"]
    (failed,) = of_type(log_events(cluster, namespace, "fail"), "run.failed")
    assert failed["data"]["exitCode"] == 3
    assert "cannot find config.yaml" in failed["data"]["stderrTail"]
