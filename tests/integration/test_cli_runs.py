"""The run and sandbox commands against the local cluster, as a person runs them (a separate
process, with the cluster admin's kubeconfig): ``exec``'s output and exit code, a command the
policy denies never run, one it asks about run once approved, ``run`` followed to its end or
detached and then cancelled, ``pause`` and ``resume``, and the shell completion of names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.kube import Cluster
from support.runs import wait_for_run
from support.sandboxes import ready_sandbox, wait_for_phase
from support.waiting import wait_for

pytestmark = pytest.mark.integration
DENY_RM = {"commands": {"default": "allow", "deny": ["rm *"]}}
ASK_TOUCH = {"commands": {"default": "allow", "ask": ["touch *"]}}


def paddock(cluster: Cluster, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``paddock ARGS`` as its own process, as the cluster's admin."""
    environ = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), **env}
    return subprocess.run(
        [sys.executable, "-m", "paddock.cli", *args],
        capture_output=True, text=True, env=environ, timeout=180,
    )  # fmt: skip


def agentruns(cluster: Cluster, namespace: str) -> list[str]:
    listed = json.loads(cluster.kubectl("get", "agentruns", "-n", namespace, "-o", "json").stdout)
    return [item["metadata"]["name"] for item in listed["items"]]


def test_exec_prints_the_commands_output_and_exits_with_its_code(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box", policy=DENY_RM)
    done = paddock(
        cluster, "exec", "box", "-n", namespace, "--",
        "sh", "-c", "echo one; echo two; echo oops >&2; exit 3",
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stdout == "one\ntwo\n"
    assert "oops" in done.stderr
    assert agentruns(cluster, namespace) == []  # its AgentRun is deleted afterwards
    kept = paddock(cluster, "exec", "box", "-n", namespace, "--keep", "--", "true")
    assert kept.returncode == 0, kept.stderr
    (name,) = agentruns(cluster, namespace)
    assert name.startswith("exec-")


def test_exec_of_a_denied_command_runs_nothing_and_says_which_rule(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box", policy=DENY_RM)
    done = paddock(cluster, "exec", "box", "-n", namespace, "--", "rm", "-rf", "src")
    assert done.returncode == 126
    assert "denied" in done.stderr
    assert "rm" in done.stderr
    assert done.stdout == ""


def test_exec_of_a_command_to_ask_about_waits_for_approval_then_runs(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box", policy=ASK_TOUCH)
    environ = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    argv = ["exec", "box", "-n", namespace, "--", "touch x && echo made"]
    with subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
    ) as process:  # fmt: skip
        (name,) = wait_for(lambda: agentruns(cluster, namespace), 30, what="exec's AgentRun")
        wait_for_run(cluster, namespace, name, ("AwaitingApproval",))
        assert process.poll() is None  # still waiting
        approved = paddock(cluster, "approve", name, "-n", namespace)
        assert approved.returncode == 0, approved.stderr
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert stdout == "made\n"
    assert re.search(rf"paddock approve {name} command\.[0-9a-f]+ -n {namespace}", stderr), stderr


def test_run_follows_the_events_to_the_end_and_a_detached_run_can_be_cancelled(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    followed = paddock(
        cluster, "run", "--sandbox", "box", "--harness", "command", "--command", "echo hi",
        "-n", namespace,
    )  # fmt: skip
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert any("output" in line and line.endswith(" hi") for line in lines)
    assert "run.completed" in lines[-1]

    detached = paddock(
        cluster, "run", "--sandbox", "box", "--harness", "command", "--command", "sleep 300",
        "-n", namespace, "--detach",
    )  # fmt: skip
    assert detached.returncode == 0, detached.stderr
    name = detached.stdout.split()[0].removeprefix("agentrun/")
    wait_for_run(cluster, namespace, name, phases=("Running",))
    cancelled = paddock(cluster, "cancel", name, "-n", namespace)
    assert cancelled.returncode == 0, cancelled.stderr
    assert wait_for_run(cluster, namespace, name)["phase"] == "Cancelled"
    missing = paddock(cluster, "cancel", "no-such-run", "-n", namespace)
    assert missing.returncode == 1
    assert "not found" in missing.stderr


def test_pause_and_resume_a_sandbox(cluster: Cluster, namespace: str, operator: Any) -> None:
    ready_sandbox(cluster, namespace, "box")
    assert paddock(cluster, "pause", "box", "-n", namespace).returncode == 0
    wait_for_phase(cluster, namespace, "box", "Paused")
    assert paddock(cluster, "resume", "box", "-n", namespace).returncode == 0
    wait_for_phase(cluster, namespace, "box", "Ready")


def test_names_complete_from_the_cluster(
    cluster: Cluster, namespace: str, operator: Any, tmp_path: Path
) -> None:
    ready_sandbox(cluster, namespace, "box")
    ready_sandbox(cluster, namespace, "bench")
    out = tmp_path / "completions"
    line = f"paddock exec -n {namespace} b"
    done = paddock(
        cluster, _ARGCOMPLETE="1", COMP_LINE=line, COMP_POINT=str(len(line)),
        _ARGCOMPLETE_STDOUT_FILENAME=str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(out.read_text().split()) == ["bench", "box"]
