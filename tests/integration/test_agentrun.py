"""AgentRuns on the real API server, with the operator running and kwok running the harness as
a local process: events, the log, failures, restarts, cancel and timeout, reuse."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kopf.testing import KopfRunner

from paddock.agentruns.holds import hold
from paddock.agentruns.sandbox import ReadySandbox
from paddock.api.reasons import RunReason
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.vocab.names import HELD_BY_ANNOTATION
from paddock_dev.audit import requests
from paddock_dev.cluster import audit_log, default_state_dir
from support import identity
from support.kube import ROOT, Cluster
from support.runs import (
    OperatorProcess,
    agent_run,
    command_run,
    log_events,
    of_type,
    run_through_kills,
    wait_for_run,
)
from support.sandboxes import (
    assert_never_shown,
    condition,
    events_for,
    get,
    install_in_image,
    merge_patch,
    posted,
    ready_sandbox,
    sandbox,
    secret,
    status_of,
    wait_for_phase,
    workspace,
)
from support.waiting import wait_for

pytestmark = pytest.mark.integration

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"
SECRET_VALUE = "sk-test-7d1e0c-never-to-be-seen"

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


def _fake_cli(namespace: str, pod: str, name: str, stream: str, extra: str = "") -> None:
    """A fake ``name`` executable in the pod's image that records its argv and stdin in the
    workspace and replays a recorded stream."""
    install_in_image(
        namespace,
        pod,
        name,
        "#!/bin/bash\n"
        f'printf "%s\\n" "$@" > "$PADDOCK_WORKSPACE/{name}-argv.txt"\n'
        f'cat > "$PADDOCK_WORKSPACE/{name}-stdin.txt"\n'
        f"{extra}\n"
        f"cat {STREAMS / stream}\n",
    )


def _workspace_file(cluster: Cluster, namespace: str, pod: str, path: str) -> str:
    return cluster.kubectl(
        "exec", "-n", namespace, pod, "-c", "sandbox", "--", "bash", "-c",
        f'cat "$PADDOCK_WORKSPACE/{path}"',
    ).stdout  # fmt: skip


@pytest.mark.parametrize(
    ("harness", "cli", "session", "resume_flag"),
    [
        ("claude-code", "claude", "5f1c2a9e-claude-session", "--resume"),
        ("codex", "codex", "0199a213-codex-thread", "resume"),
    ],
)
def test_fake_cli_replaying_a_recorded_stream_gives_the_right_events(
    cluster: Cluster,
    namespace: str,
    operator: Any,
    harness: str,
    cli: str,
    session: str,
    resume_flag: str,
) -> None:
    ready_sandbox(cluster, namespace, "box")
    _fake_cli(namespace, "box", cli, f"{harness}.jsonl")
    run = agent_run(
        "agent", "box", harness, "List the files.", model="m-1", sessionId="earlier-session"
    )
    cluster.apply(run, namespace)
    status = wait_for_run(cluster, namespace, "agent")

    assert status["phase"] == "Succeeded", status
    assert status["sessionId"] == session
    events = log_events(cluster, namespace, "agent")
    types = [e["type"] for e in events]
    assert types.count("session-id") == 1
    (call,) = of_type(events, "tool.call")
    assert "ls" in json.dumps(call["data"]["input"])
    assert of_type(events, "tool.result")
    assert of_type(events, "message")
    assert any(e["data"].get("reason") == "MalformedLine" for e in of_type(events, "error"))
    argv = _workspace_file(cluster, namespace, "box", f"{cli}-argv.txt").split("\n")
    assert "m-1" in argv
    assert argv[argv.index(resume_flag) + 1] == "earlier-session"
    assert _workspace_file(cluster, namespace, "box", f"{cli}-stdin.txt") == "List the files."
    if harness == "claude-code":
        reported = {"costUsd": 0.0123, "inputTokens": 1200, "outputTokens": 85}
        assert status["usage"] == reported | {"tokens": 1285, "source": "harness"}


def test_api_keys_reach_the_harness_by_env_and_are_scrubbed_everywhere(
    cluster: Cluster,
    namespace: str,
    as_operator: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster.apply(secret("llm", key=SECRET_VALUE), namespace)
    say_key = (
        'printf \'{"type":"assistant","message":{"content":[{"type":"text",'
        '"text":"my key is %s"}]}}\\n\' "$ANTHROPIC_API_KEY"'
    )
    key_ref = {"name": "ANTHROPIC_API_KEY", "secretKeyRef": {"name": "llm", "key": "key"}}
    args = ["run", "--standalone", "--verbose", "--namespace", namespace, "-m", "paddock.handlers"]
    with caplog.at_level("DEBUG"), KopfRunner(args, timeout=60) as runner:
        ready_sandbox(cluster, namespace, "box")
        _fake_cli(namespace, "box", "claude", "claude-code.jsonl", extra=say_key)
        cluster.apply(agent_run("keyed", "box", "claude-code", "hi", secrets=[key_ref]), namespace)
        wait_for_run(cluster, namespace, "keyed")
    assert runner.exception is None

    events = log_events(cluster, namespace, "keyed")
    assert "my key is [redacted]" in [e["data"].get("text") for e in of_type(events, "message")]
    argv = _workspace_file(cluster, namespace, "box", "claude-argv.txt")
    assert "hi" not in argv.split("\n")  # the prompt went by stdin, like the key by env
    seen = {
        "log": json.dumps(events),
        "run": cluster.kubectl("get", "agentrun", "keyed", "-n", namespace, "-o", "json").stdout,
        "objects": cluster.kubectl(
            "get", "configmaps,events", "-n", namespace, "-o", "json"
        ).stdout,
        "argv": argv,
        "operator output": runner.output,
        "operator log": caplog.text,
    }
    assert len(caplog.text) > 1000, "the operator's debug log was not captured"
    assert_never_shown(SECRET_VALUE, seen)


def test_a_policy_that_keeps_model_keys_out_refuses_a_run_with_one_in_the_sandbox(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(secret("llm", key=SECRET_VALUE), namespace)
    keys_out = {"commands": {"default": "allow"}, "modelKey": {"inSandbox": "refuse"}}
    ready_sandbox(cluster, namespace, "box", policy=keys_out)
    key_ref = {"name": "ANTHROPIC_API_KEY", "secretKeyRef": {"name": "llm", "key": "key"}}
    cluster.apply(agent_run("keyed", "box", "claude-code", "hi", secrets=[key_ref]), namespace)
    status = wait_for_run(cluster, namespace, "keyed")
    assert status["phase"] == "Failed", status
    assert "the run's secret ANTHROPIC_API_KEY" in status["message"]
    assert "spec.modelKey" in status["message"]  # what to change
    assert condition(status, "Complete")["reason"] == "KeyInSandboxRefused"
    assert posted(cluster, namespace, "keyed", "KeyInSandboxRefused")[0]["type"] == "Warning"
    assert not of_type(log_events(cluster, namespace, "keyed"), "run.started")
    # Given as its modelKey, with no gateway to hold it, the key would still be in the sandbox.
    key = {"secretKeyRef": {"name": "llm", "key": "key"}}
    cluster.apply(agent_run("routed", "box", "claude-code", "hi", modelKey=key), namespace)
    status = wait_for_run(cluster, namespace, "routed")
    assert condition(status, "Complete")["reason"] == "KeyInSandboxRefused", status
    assert "the run's modelKey, which no egress gateway holds" in status["message"]


def test_a_policy_that_keeps_secrets_out_refuses_a_sandbox_or_run_that_would_hold_one(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """secrets.inSandbox: refuse. A Workspace with a secret variable starts no sandbox; one
    whose only secret is a route's header does, and a run in it that names a secret of its
    own fails before it starts; each says what is refused and what to route instead."""
    cluster.apply(secret("api", key=SECRET_VALUE), namespace)
    secrets_out = {"commands": {"default": "allow"}, "secrets": {"inSandbox": "refuse"}}
    token = {"name": "API_TOKEN", "secretKeyRef": {"name": "api", "key": "key"}}
    cluster.apply(workspace("leaky", secrets=[token]), namespace)
    cluster.apply(sandbox("leaky", "leaky", policy=secrets_out), namespace)
    refused = wait_for(
        lambda: (
            (s := status_of(cluster, namespace, "sandbox", "leaky")).get("phase") == "Failed" and s
        ),
        60,
        what="the sandbox refused",
    )
    assert condition(refused, "Ready")["reason"] == "SecretsInSandboxRefused"
    assert "the Workspace's secret API_TOKEN" in refused["message"]
    assert "spec.routes" in refused["message"]
    assert get(cluster, namespace, "pod", "leaky") is None

    route = {"name": "api", "url": "https://api.example.com",
             "headers": [{"name": "X-Key", "secretKeyRef": {"name": "api", "key": "key"}}],
             "allow": [{"methods": ["GET"], "paths": ["/**"]}]}  # fmt: skip
    cluster.apply(workspace("routed", routes=[route]), namespace)
    cluster.apply(sandbox("routed", "routed", policy=secrets_out), namespace)
    wait_for_phase(cluster, namespace, "routed", "Ready")
    cluster.apply(command_run("own", "routed", "true", secrets=[token]), namespace)
    status = wait_for_run(cluster, namespace, "own")
    assert status["phase"] == "Failed", status
    assert condition(status, "Complete")["reason"] == "SecretsInSandboxRefused"
    assert "the run's secret API_TOKEN" in status["message"]
    assert not of_type(log_events(cluster, namespace, "own"), "run.started")
    # Without secrets of its own, it runs: the route's header is the gateway's (none here, so
    # the run says its routes are not there).
    cluster.apply(command_run("plain", "routed", "echo ran"), namespace)
    status = wait_for_run(cluster, namespace, "plain")
    assert status["phase"] == "Succeeded", status
    assert condition(status, "CredentialRoutes")["reason"] == "NoGateway"
    pod = get(cluster, namespace, "pod", "routed") or {}
    assert "secretKeyRef" not in json.dumps(pod["spec"]["containers"])


def test_an_agent_cannot_forge_completion(cluster: Cluster, namespace: str, operator: Any) -> None:
    ready_sandbox(cluster, namespace, "box")
    # Its wrapper's beat faked too (its file list can no longer be written, and is dated in
    # the future): the forged record is read again in the sandbox, where the real one comes.
    forge = (
        'echo "0 forged" > "$PADDOCK_RUN/exit"; rm -f "$PADDOCK_RUN/snapshot.new"; '
        'mkdir "$PADDOCK_RUN/snapshot.new"; touch -d 2100-01-01 "$PADDOCK_RUN/snapshot"; '
        "echo forged; sleep 3; exit 1"
    )
    cluster.apply(command_run("forger", "box", forge), namespace)
    status = wait_for_run(cluster, namespace, "forger")
    assert status["phase"] == "Failed"
    assert status["result"]["exitCode"] == 1
    errors = of_type(log_events(cluster, namespace, "forger"), "error")
    assert [e["data"]["reason"] for e in errors] == ["ForgedCompletion"]


def test_cancel_kills_the_process_group(cluster: Cluster, namespace: str, operator: Any) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("long", "box", "sleep 300 & echo $!; wait"), namespace)
    output = wait_for(
        lambda: of_type(log_events(cluster, namespace, "long"), "output"), 60, what="the pid"
    )
    child = int(output[0]["data"]["text"])
    merge_patch(cluster, namespace, "agentrun", "long", {"spec": {"cancel": True}})

    status = wait_for_run(cluster, namespace, "long")
    assert status["phase"] == "Cancelled"
    (aborted,) = of_type(log_events(cluster, namespace, "long"), "run.aborted")
    assert aborted["data"]["phase"] == "Cancelled"
    # kwok runs the harness on this host: the sleeping child itself must be gone.
    wait_for(lambda: not Path(f"/proc/{child}").exists(), 30, what="the child process gone")


def test_timeout_ends_the_run_as_timed_out(cluster: Cluster, namespace: str, operator: Any) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("slow", "box", "sleep 300", timeout="4s"), namespace)
    status = wait_for_run(cluster, namespace, "slow")
    assert status["phase"] == "TimedOut"
    assert "timeout of 4s" in status["message"]
    events = log_events(cluster, namespace, "slow")
    assert events[-1]["type"] == "run.aborted"
    assert events[-1]["data"]["phase"] == "TimedOut"


def test_a_run_waits_for_its_sandbox_and_says_so(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(command_run("early", "later", "echo hi"), namespace)
    status = wait_for_run(cluster, namespace, "early", ("WaitingForSandbox",))
    ready = condition(status, "SandboxReady")
    assert ready["status"] == "False"
    assert ready["reason"] == "SandboxNotFound"
    assert "later" in ready["message"]
    ready_sandbox(cluster, namespace, "later")
    assert wait_for_run(cluster, namespace, "early")["phase"] == "Succeeded"


def test_a_run_waits_for_a_paused_sandbox_without_touching_it(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "held")
    merge_patch(cluster, namespace, "sandbox", "held", {"spec": {"lifecycle": {"paused": True}}})
    wait_for(
        lambda: status_of(cluster, namespace, "sandbox", "held").get("phase") == "Paused",
        60,
        what="sandbox held paused",
    )
    cluster.apply(command_run("patient", "held", "echo hi"), namespace)
    status = wait_for(
        lambda: (
            condition(
                s := status_of(cluster, namespace, "agentrun", "patient"), "SandboxReady"
            ).get("reason")
            == "SandboxPaused"
            and s
        ),
        60,
        what="run patient waiting with reason SandboxPaused",
    )
    assert status["phase"] == "WaitingForSandbox"
    assert "spec.lifecycle.paused" in condition(status, "SandboxReady")["message"]
    held = get(cluster, namespace, "sandbox", "held") or {}
    assert "paddock.dev/last-activity" not in (held["metadata"].get("annotations") or {})
    assert held["status"]["phase"] == "Paused"

    merge_patch(cluster, namespace, "sandbox", "held", {"spec": {"lifecycle": {"paused": False}}})
    assert wait_for_run(cluster, namespace, "patient")["phase"] == "Succeeded"


def test_reuse_thread_runs_in_the_same_sandbox(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    template = {"workspaceRef": {"name": "app"}}

    def threaded(name: str, command: str) -> dict[str, Any]:
        run = command_run(name, "unused", command, sandboxTemplate=template, threadId="t-1")
        del run["spec"]["sandboxRef"]
        return run

    cluster.apply(threaded("first", "echo remembered > mark.txt"), namespace)
    first = wait_for_run(cluster, namespace, "first")
    cluster.apply(threaded("second", "cat mark.txt"), namespace)
    second = wait_for_run(cluster, namespace, "second")

    assert first["phase"] == second["phase"] == "Succeeded"
    assert first["sandboxName"] == second["sandboxName"]
    assert first["sandboxName"].startswith("thread-")
    outputs = of_type(log_events(cluster, namespace, "second"), "output")
    assert [e["data"]["text"] for e in outputs] == ["remembered"]

    # The template's resources change: the thread moves to a new sandbox, and says so.
    template["resources"] = {"requests": {"cpu": "50m"}}
    cluster.apply(threaded("third", "cat mark.txt 2>/dev/null || echo fresh"), namespace)
    third = wait_for_run(cluster, namespace, "third")
    assert third["phase"] == "Succeeded"
    assert third["sandboxName"] not in (first["sandboxName"], "")
    moved = wait_for(
        lambda: [
            e for e in events_for(cluster, namespace, "third") if e["reason"] == "ThreadMoved"
        ],
        30,
        what="the run's ThreadMoved Event",
    )
    assert len(moved) == 1
    assert "(resources)" in moved[0]["message"]
    assert f"from Sandbox {first['sandboxName']}" in moved[0]["message"]
    outputs = of_type(log_events(cluster, namespace, "third"), "output")
    assert [e["data"]["text"] for e in outputs] == ["fresh"]
    assert get(cluster, namespace, "sandbox", first["sandboxName"]) is not None  # left


def _busy_with(cluster: Cluster, namespace: str, name: str, holder: str) -> dict[str, Any]:
    """The run's status once it waits, reason SandboxBusy, for the run ``holder``."""

    def waiting() -> dict[str, Any] | None:
        status = status_of(cluster, namespace, "agentrun", name)
        ready = condition(status, "SandboxReady")
        busy = ready.get("reason") == "SandboxBusy" and f"AgentRun {holder} " in ready["message"]
        return status if busy else None

    return wait_for(waiting, 60, what=f"run {name} waiting (SandboxBusy) for {holder}")


def test_runs_of_a_sandbox_run_one_at_a_time_in_order_of_creation(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("first", "box", "while :; do sleep 0.2; done"), namespace)
    wait_for_run(cluster, namespace, "first", ("Running",))
    cluster.apply(command_run("second", "box", "echo two"), namespace)
    assert _busy_with(cluster, namespace, "second", "first")["phase"] == "WaitingForSandbox"
    cluster.apply(command_run("third", "box", "echo three"), namespace)
    third = _busy_with(cluster, namespace, "third", "first")
    assert "1 run(s) created earlier wait for it too" in condition(third, "SandboxReady")["message"]
    assert "run.started" not in [e["type"] for e in log_events(cluster, namespace, "second")]

    merge_patch(cluster, namespace, "agentrun", "first", {"spec": {"cancel": True}})
    first = wait_for_run(cluster, namespace, "first")
    second, third = (wait_for_run(cluster, namespace, n) for n in ("second", "third"))
    assert (first["phase"], second["phase"], third["phase"]) == (
        "Cancelled", "Succeeded", "Succeeded",
    )  # fmt: skip
    assert first["completedAt"] <= second["startedAt"] <= second["completedAt"]
    assert second["completedAt"] <= third["startedAt"]


def test_runs_applied_together_never_run_together_in_one_sandbox(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    """Runs that no one has stepped yet start together (no status tells one that another is
    ahead of it): the lock on the sandbox, a write the API server lets only one of them make,
    keeps them one at a time."""
    ready_sandbox(cluster, namespace, "box")
    runs = [command_run(f"r{i}", "box", "sleep 1; echo done") for i in range(4)]
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": runs})
    cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=listing)
    spans = []
    for i in range(4):
        status = wait_for_run(cluster, namespace, f"r{i}", timeout=120)
        assert status["phase"] == "Succeeded", status
        spans.append((status["startedAt"], status["completedAt"]))
    spans.sort()
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert ended <= started, spans
    annotations = (get(cluster, namespace, "sandbox", "box") or {})["metadata"].get("annotations")
    assert not {"paddock.dev/held-by", "paddock.dev/held-by-run"} & set(annotations or {})


def test_a_second_run_of_a_thread_waits_for_the_first(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    template = {"workspaceRef": {"name": "app"}}
    runs = {"first": "while :; do sleep 0.2; done", "second": "echo two"}
    for name, command in runs.items():
        run = command_run(name, "unused", command, sandboxTemplate=template, threadId="t-2")
        del run["spec"]["sandboxRef"]
        cluster.apply(run, namespace)
        if name == "first":
            wait_for_run(cluster, namespace, "first", ("Running",))
    _busy_with(cluster, namespace, "second", "first")

    merge_patch(cluster, namespace, "agentrun", "first", {"spec": {"cancel": True}})
    second = wait_for_run(cluster, namespace, "second")
    first = status_of(cluster, namespace, "agentrun", "first")
    assert (first["phase"], second["phase"]) == ("Cancelled", "Succeeded")
    assert first["sandboxName"] == second["sandboxName"]
    assert first["completedAt"] <= second["startedAt"]


def _log_chunks(cluster: Cluster, namespace: str, uid: str) -> list[str]:
    listed = cluster.kubectl(
        "get", "configmaps", "-n", namespace, "-l", f"paddock.dev/run-uid={uid}", "-o", "name"
    )
    return listed.stdout.split()


def test_a_finished_run_and_its_log_are_deleted_after_its_ttl(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("brief", "box", "echo bye", ttlSecondsAfterFinished=3), namespace)
    status = wait_for_run(cluster, namespace, "brief")
    uid = (get(cluster, namespace, "agentrun", "brief") or {})["metadata"]["uid"]
    assert status["phase"] == "Succeeded"
    assert _log_chunks(cluster, namespace, uid)  # kept for its time to live
    wait_for(
        lambda: get(cluster, namespace, "agentrun", "brief") is None,
        60,
        what="the run deleted once its TTL passed",
    )
    wait_for(
        lambda: _log_chunks(cluster, namespace, uid) == [],
        60,
        what="the run's log ConfigMaps deleted with it",
    )
    cluster.apply(command_run("kept", "box", "echo stay"), namespace)
    assert wait_for_run(cluster, namespace, "kept")["phase"] == "Succeeded"
    assert get(cluster, namespace, "agentrun", "kept") is not None  # the default: 7 days


@pytest.fixture
def short_thread_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Operators started in this test delete a thread's sandbox after 8 s without activity."""
    monkeypatch.setenv("PADDOCK_THREAD_SANDBOX_IDLE_SECONDS", "8")


def test_a_threads_sandbox_idle_longer_than_the_setting_is_deleted_with_its_volume(
    cluster: Cluster, namespace: str, short_thread_idle: None, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    run = command_run(
        "once", "unused", "echo hi", sandboxTemplate={"workspaceRef": {"name": "app"}},
        threadId="t-3",
    )  # fmt: skip
    del run["spec"]["sandboxRef"]
    cluster.apply(run, namespace)
    name = wait_for_run(cluster, namespace, "once")["sandboxName"]
    ready_sandbox(cluster, namespace, "mine")  # a person's own sandbox, idle as long
    wait_for(
        lambda: get(cluster, namespace, "sandbox", name) is None,
        60,
        what="the thread's idle sandbox deleted",
    )
    wait_for(
        lambda: get(cluster, namespace, "persistentvolumeclaim", f"{name}-workspace") is None,
        60,
        what="its volume deleted with it",
    )
    assert posted(cluster, namespace, name, "IdleExpired")
    assert (get(cluster, namespace, "sandbox", "mine") or {})["status"]["phase"] == "Ready"


def test_reuse_none_removes_its_sandbox_when_the_run_ends(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.apply(workspace("app"), namespace)
    run = command_run(
        "once", "unused", "echo once", sandboxTemplate={"workspaceRef": {"name": "app"}}
    )
    del run["spec"]["sandboxRef"]
    cluster.apply(run, namespace)
    status = wait_for_run(cluster, namespace, "once")
    assert status["phase"] == "Succeeded"
    wait_for(
        lambda: get(cluster, namespace, "sandbox", status["sandboxName"]) is None,
        60,
        what="the run's own sandbox removed",
    )


def test_logs_follow_prints_every_event_once_in_order(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    chatty = "for i in $(seq 1 60); do echo line $i; sleep 0.05; done"
    cluster.apply(command_run("chatty", "box", chatty), namespace)
    wait_for_run(cluster, namespace, "chatty", ("Running",))
    follower = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "logs", "chatty", "-n", namespace, "--follow",
         "-o", "json"],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    followed, _ = follower.communicate(timeout=120)
    assert follower.returncode == 0
    assert wait_for_run(cluster, namespace, "chatty")["phase"] == "Succeeded"
    assert [json.loads(line) for line in followed.splitlines()] == log_events(
        cluster, namespace, "chatty"
    )
    text = cluster.paddock("logs", "chatty", "-n", namespace, "--from-seq", "5").stdout
    assert text.splitlines()[0].split()[0] == "5"


def test_a_follower_reads_each_event_once_from_a_watch_not_by_reading_again(
    cluster: Cluster, namespace: str, operator: Any, tmp_path: Path
) -> None:
    ready_sandbox(cluster, namespace, "box")
    rules = [
        {"apiGroups": ["paddock.dev"], "resources": ["agentruns"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
    ]
    follower_config = identity.role_kubeconfig(
        cluster, namespace, "follower", rules, tmp_path / "follower"
    )
    # The run writes a line, then the rest only once the follower is following (however long
    # the follower takes to start): the rest reaches it by its watch.
    go = '"$PADDOCK_WORKSPACE/go"'
    slow = (f"echo line 1; until [ -e {go} ]; do sleep 0.1; done; "
            "for i in $(seq 2 8); do echo line $i; sleep 0.2; done")  # fmt: skip
    cluster.apply(command_run("slow", "box", slow), namespace)
    wait_for_run(cluster, namespace, "slow", ("Running",))
    started = time.time()
    follower = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "logs", "slow", "-n", namespace, "-f", "-o", "json"],
        env={**os.environ, "KUBECONFIG": str(follower_config)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    user = f"system:serviceaccount:{namespace}:follower"
    log = audit_log(default_state_dir())
    wait_for(
        lambda: requests(log, user, started, time.time() + 1)[("watch", "configmaps")],
        60,
        what="the follower's watch in the audit log",
    )
    cluster.kubectl(
        "exec", "-n", namespace, "box", "-c", "sandbox", "--", "bash", "-c", f"touch {go}"
    )
    stdout, stderr = follower.communicate(timeout=120)
    assert follower.returncode == 0, stderr
    followed = [json.loads(line) for line in stdout.splitlines()]
    assert followed == log_events(cluster, namespace, "slow")
    assert len(of_type(followed, "output")) == 8
    asked = requests(log, user, started, time.time() + 1)
    # One listing, then the watch brings each write: not a listing per poll while it waited.
    assert asked[("list", "configmaps")] == 1, asked
    assert asked[("get", "agentruns")] == 1, asked


def test_operator_killed_mid_run_leaves_a_gap_free_log_without_duplicates(
    cluster: Cluster, namespace: str, as_operator: str
) -> None:
    lines = 300
    command = f"for i in $(seq 0 {lines - 1}); do echo line $i; sleep 0.02; done"
    run = command_run("steady", "box", command)
    status = run_through_kills(cluster, namespace, as_operator, run, (20, 150))
    events = log_events(cluster, namespace, "steady")
    assert status["phase"] == "Succeeded"
    assert [e["seq"] for e in events] == list(range(len(events)))
    texts = [e["data"]["text"] for e in of_type(events, "output")]
    assert texts == [f"line {i}" for i in range(lines)]
    assert [e["type"] for e in events].count("run.started") == 1
    assert status["eventCount"] == len(events)


def test_a_hold_outlives_an_operator_kill_while_the_new_operators_watch_is_still_filling(
    cluster: Cluster, namespace: str, as_operator: str
) -> None:
    """A run holds its sandbox; the operator is SIGKILLed. A second run tries the sandbox
    from an operator whose watch has not shown the first run yet (the cache of a process that
    started a moment ago, held back here by starting from nothing): the hold stands, the
    second run waits, and starts only once the first ended."""

    def holder() -> str:
        found = get(cluster, namespace, "sandbox", "box") or {}
        return str((found["metadata"].get("annotations") or {}).get(HELD_BY_ANNOTATION, ""))

    gated = "until test -e release; do sleep 0.1; done; echo first"
    with OperatorProcess(namespace, as_operator) as operator:
        ready_sandbox(cluster, namespace, "box")
        cluster.apply(command_run("first", "box", gated), namespace)
        wait_for_run(cluster, namespace, "first", ("Running",))
        first = get(cluster, namespace, "agentrun", "first")
        assert first is not None
        assert holder() == first["metadata"]["uid"]
        operator.kill()

        cluster.apply(command_run("second", "box", "echo second"), namespace)
        second = get(cluster, namespace, "agentrun", "second")
        assert second is not None
        kube.load_config()  # as the operator: KUBECONFIG is its identity here
        CACHE.clear()  # a new operator's cache: no run listed yet
        waits = hold(second, ReadySandbox(name="box", pod="box", workspace="app"))
        assert waits is not None
        assert waits.reason == RunReason.SANDBOX_BUSY, waits
        assert "AgentRun first holds it" in waits.message
        assert holder() == first["metadata"]["uid"]

        operator.restart()
        cluster.kubectl(
            "exec", "-n", namespace, "box", "-c", "sandbox", "--",
            "bash", "-c", 'touch "$PADDOCK_WORKSPACE/release"',
        )  # fmt: skip
        done_first = wait_for_run(cluster, namespace, "first")
        done_second = wait_for_run(cluster, namespace, "second")
        # A hold whose run is gone (deleted while an operator was down, say) holds nothing,
        # with or without the watch having shown it.
        merge_patch(cluster, namespace, "sandbox", "box", {"metadata": {"annotations": {
            HELD_BY_ANNOTATION: "gone-uid", "paddock.dev/held-by-run": "first"}}})  # fmt: skip
        CACHE.clear()
        third = get(cluster, namespace, "agentrun", "second")
        assert third is not None
        assert hold(third, ReadySandbox(name="box", pod="box", workspace="app")) is None
        assert holder() == third["metadata"]["uid"]
    assert done_first["phase"] == done_second["phase"] == "Succeeded"
    ended = of_type(log_events(cluster, namespace, "first"), "run.completed")[0]["time"]
    started = of_type(log_events(cluster, namespace, "second"), "run.started")[0]["time"]
    assert started >= ended, (started, ended)


def test_examples_run_and_kubectl_shows_the_event_count(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    cluster.kubectl("apply", "-n", namespace, "-k", str(ROOT / "examples"))
    status = wait_for_run(cluster, namespace, "hello-run", timeout=120)
    assert status["phase"] == "Succeeded", status
    table = cluster.kubectl("get", "run", "hello-run", "-n", namespace).stdout.splitlines()
    header, row = table[0].split(), table[1].split()
    assert row[header.index("PHASE")] == "Succeeded"
    assert int(row[header.index("EVENTS")]) == status["eventCount"] > 3
    # The agent example waits, saying for what, until its API key Secret exists.
    agent = wait_for_run(cluster, namespace, "hello-agent", ("Pending",))
    assert condition(agent, "SecretsFound")["reason"] == "SecretNotFound"
    assert "anthropic/api-key" in agent["message"]
    # The Event says it as a Warning: the user must act. `kubectl get run -o wide` says why.
    warned = wait_for(
        lambda: [e for e in events_for(cluster, namespace, "hello-agent")
                 if e["reason"] == "SecretNotFound"],
        30,
        what="a SecretNotFound Event",
    )  # fmt: skip
    assert warned[0]["type"] == "Warning"
    wide = cluster.kubectl("get", "run", "hello-agent", "-n", namespace, "-o", "wide").stdout
    assert "anthropic/api-key" in wide.splitlines()[1]
    # The fork starts from hello's snapshot after setup, without setup of its own: once the
    # snapshot is ready (the snapshot controller's own retries, slow under load: 120 s, as
    # every snapshot test waits), the fork is.
    try:
        wait_for(
            lambda: condition(status_of(cluster, namespace, "sandbox", "hello"),
                              "SnapshotReady").get("status") == "True",
            120,
            what="sandbox hello's snapshot ready",
        )  # fmt: skip
    except TimeoutError as exc:  # say where it stands: the sandbox's, the snapshots'
        state = cluster.kubectl("get", "sandbox,volumesnapshot", "-n", namespace, "-o", "yaml")
        columns = ("custom-columns=NAME:.metadata.name,NS:.spec.volumeSnapshotRef.namespace,"
                   "READY:.status.readyToUse,ERROR:.status.error.message")  # fmt: skip
        contents = cluster.kubectl("get", "volumesnapshotcontent", "-o", columns).stdout
        ours = [line for line in contents.splitlines() if namespace in line]
        raise AssertionError(f"{state.stdout}\n" + "\n".join(ours)) from exc
    fork = wait_for_phase(cluster, namespace, "hello-fork", "Ready")
    assert fork["restoredFrom"] == status_of(cluster, namespace, "sandbox", "hello")["snapshot"]


def test_a_run_waiting_for_its_secret_starts_once_it_exists_and_says_so(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    run = command_run("keyed", "box", 'test -n "$TOKEN"')
    run["spec"]["secrets"] = [{"name": "TOKEN", "secretKeyRef": {"name": "later", "key": "t"}}]
    cluster.apply(run, namespace)
    waiting = wait_for_run(cluster, namespace, "keyed", ("Pending",))
    assert condition(waiting, "SecretsFound")["status"] == "False"
    cluster.apply(secret("later", t="tok-abcdef-123456"), namespace)
    done = wait_for_run(cluster, namespace, "keyed")
    assert done["phase"] == "Succeeded"
    assert condition(done, "SecretsFound")["status"] == "True"


def test_deleting_a_running_run_kills_its_processes(
    cluster: Cluster, namespace: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("doomed", "box", "sleep 300 & echo $!; wait"), namespace)
    output = wait_for(
        lambda: of_type(log_events(cluster, namespace, "doomed"), "output"), 60, what="the pid"
    )
    child = int(output[0]["data"]["text"])
    cluster.kubectl("delete", "agentrun", "doomed", "-n", namespace, "--timeout=60s")
    wait_for(lambda: not Path(f"/proc/{child}").exists(), 30, what="the child process gone")
    assert get(cluster, namespace, "agentrun", "doomed") is None
