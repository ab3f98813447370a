"""Helpers for tests of AgentRuns on a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from paddock.api.agentrun import LogBackend
from paddock.runs.log import chunk_selector, ordered_events
from support.kube import Cluster
from support.sandboxes import get, ready_sandbox, status_of
from support.waiting import wait_for

TERMINAL = ("Succeeded", "Failed", "Cancelled", "TimedOut")


def command_run(name: str, sandbox: str, command: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"sandboxRef": {"name": sandbox}, "harness": "command", "command": command, **spec},
    }


def configmap_prompt_run(name: str, sandbox: str, configmap: str, key: str) -> dict[str, Any]:
    """A Claude Code run whose prompt is the key ``key`` of the ConfigMap ``configmap``."""
    run = agent_run(name, sandbox, "claude-code", "")
    del run["spec"]["prompt"]
    run["spec"]["promptFrom"] = {"configMapKeyRef": {"name": configmap, "key": key}}
    return run


def agent_run(name: str, sandbox: str, harness: str, prompt: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"sandboxRef": {"name": sandbox}, "harness": harness, "prompt": prompt, **spec},
    }


def scripted_claude_run(name: str, sandbox: str, prompt: str, model_url: str) -> dict[str, Any]:
    """A Claude Code run against the scripted model server at ``model_url``, its API key
    from the Secret ``llm`` (key ``key``, any value: the server checks none)."""
    run = agent_run(name, sandbox, "claude-code", prompt, model="claude-sonnet-4-5")
    run["spec"]["env"] = [
        {"name": "ANTHROPIC_BASE_URL", "value": model_url},
        {"name": "CLAUDE_CODE_MAX_RETRIES", "value": "0"},
    ]
    run["spec"]["secrets"] = [
        {"name": "ANTHROPIC_API_KEY", "secretKeyRef": {"name": "llm", "key": "key"}}
    ]
    return run


def wait_for_run(
    cluster: Cluster,
    namespace: str,
    name: str,
    phases: tuple[str, ...] = TERMINAL,
    timeout: float = 90,
) -> dict[str, Any]:
    return wait_for(
        lambda: (s := status_of(cluster, namespace, "agentrun", name)).get("phase") in phases and s,
        timeout,
        what=f"run {name} in phase {' or '.join(phases)}",
    )


def log_events(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    """The run's full log. One kept in ConfigMaps is read with kubectl and put in order as
    ``paddock logs`` does (``ordered_events``, which also refuses a gap or a repeat): a
    ``paddock`` process costs 1.5 s of imports, kubectl 0.1 s. One in an object store (or
    a run not found) is read with ``paddock logs -o json``, which ``test_cli_runs`` tests."""
    run = get(cluster, namespace, "agentrun", name)
    where = ((run or {}).get("status") or {}).get("log") or {}
    if run is None or where.get("backend") == LogBackend.S3:
        result = cluster.paddock("logs", name, "-n", namespace, "-o", "json")
        return [json.loads(line) for line in result.stdout.splitlines() if line]
    selector = chunk_selector(run["metadata"]["uid"])
    listing = cluster.kubectl("get", "configmaps", "-n", namespace, "-l", selector, "-o", "json")
    return ordered_events(json.loads(listing.stdout)["items"])


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


class OperatorProcess:
    """``paddock operator`` watching ``namespace`` as a process of its own (with this
    process's environment, so its settings, and the operator's identity), to SIGKILL and
    start again as a crash and a new pod would; killed when the block ends."""

    def __init__(self, namespace: str, as_operator: str, env: dict[str, str] | None = None) -> None:
        self.namespace, self.as_operator, self.env = namespace, as_operator, env or {}
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "paddock.cli", "operator", "-n", self.namespace,
             "--liveness", ""],
            env={**os.environ, **self.env, "KUBECONFIG": self.as_operator},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def kill(self) -> None:
        """SIGKILL: no chance to finish a write or a status patch."""
        self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        self.kill()
        self.process = self._start()

    def __enter__(self) -> OperatorProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()


def run_through_kills(
    cluster: Cluster,
    namespace: str,
    as_operator: str,
    run: dict[str, Any],
    thresholds: tuple[int, ...],
) -> dict[str, Any]:
    """Make the run's sandbox and apply ``run`` with an ``OperatorProcess``, SIGKILL that
    process each time the run's event count reaches a threshold and start another, and return
    the run's final status."""
    name = run["metadata"]["name"]

    def count() -> int:
        return int(status_of(cluster, namespace, "agentrun", name).get("eventCount") or 0)

    with OperatorProcess(namespace, as_operator) as operator:
        ready_sandbox(cluster, namespace, run["spec"]["sandboxRef"]["name"])
        cluster.apply(run, namespace)
        for threshold in thresholds:
            wait_for(lambda t=threshold: count() >= t, 60, what=f"{threshold} events")
            operator.restart()
        return wait_for_run(cluster, namespace, name)
