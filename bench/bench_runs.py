"""Benchmark: a run emitting 10,000 events, against the local control plane.

Prints events per second and API writes per event for

- the baseline: the same events appended straight to a ConfigMap log, in the batches the run
  uses (the log's own ceiling on this API server), and
- the run: a ``command`` run printing 10,000 lines, driven by the same ``Execution`` the
  operator's daemon steps (in this process, so its writes can be counted), through exec polls
  of the journal in a kwok sandbox,

and the run's rate as a ratio of the baseline's. Usage: ``make bench`` (starts the local
cluster when it is not up, and stops it again).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from paddock.agentruns.execution import Execution
from paddock.devcluster import cluster as local
from paddock.kube import client as kube
from paddock.runs import events as ev
from paddock.runs.journal import BATCH_BYTES
from paddock.runs.log import ConfigMapLog

EVENTS = 10_000
ROOT = Path(__file__).resolve().parents[1]


def kubectl(kubectl_bin: str, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [kubectl_bin, *args], input=stdin, capture_output=True, text=True, check=True
    )
    return done.stdout


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise TimeoutError(f"timed out waiting for {what}")


def ready_sandbox(kubectl_bin: str, namespace: str) -> None:
    """A Workspace and a Ready Sandbox, prepared by a short-lived operator process."""
    manifests = [
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": "bench"},
            "spec": {"setup": ["true"]},
        },
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "Sandbox",
            "metadata": {"name": "bench"},
            "spec": {"workspaceRef": {"name": "bench"}},
        },
    ]
    kubectl(kubectl_bin, "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump_all(manifests))
    operator = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait(
            lambda: (
                ((kube.get("Sandbox", namespace, "bench") or {}).get("status") or {}).get("phase")
                == "Ready"
            ),
            120,
            "the sandbox",
        )
    finally:
        operator.terminate()
        operator.wait()


def make_run(namespace: str, name: str, command: str) -> dict[str, Any]:
    kube.create(
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "AgentRun",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"sandboxRef": {"name": "bench"}, "harness": "command", "command": command},
        }
    )
    run = kube.get("AgentRun", namespace, name)
    assert run is not None
    return run


def baseline(namespace: str) -> tuple[float, int]:
    """Seconds and writes to append EVENTS events to a log in the run's batch size."""
    run = make_run(namespace, "baseline", "true")
    log = ConfigMapLog(run, kube)
    log.load()
    drafts = [
        ev.Draft(ev.OUTPUT, f"event {i}", {"stream": "stdout", "text": f"event {i}"})
        for i in range(EVENTS)
    ]
    start = time.perf_counter()
    batch: list[dict[str, Any]] = []
    size = 0
    for seq, draft in enumerate(drafts):
        event = ev.stamp(draft, seq, ev.now())
        batch.append(event)
        size += len(ev.encode(draft.data)) + 100
        if size >= BATCH_BYTES:
            log.append(batch, {"stdout": seq})
            batch, size = [], 0
    if batch:
        log.append(batch, {"stdout": EVENTS})
    return time.perf_counter() - start, log.writes


def full_run(namespace: str) -> tuple[float, int, int, int]:
    """Seconds from the first step to the end, events, log writes and status writes."""
    run = make_run(namespace, "chatty", f"seq 1 {EVENTS} | sed 's/^/event /'")
    execution = Execution.load(run)
    status_writes = 0
    original = kube.patch_status

    def counting_patch(*args: Any) -> None:
        nonlocal status_writes
        status_writes += 1
        original(*args)

    kube.patch_status = counting_patch  # type: ignore[assignment]
    start = time.perf_counter()
    try:
        while True:
            delay = execution.step(run)
            if delay is None:
                break
            time.sleep(delay)
    finally:
        kube.patch_status = original  # type: ignore[assignment]
    elapsed = time.perf_counter() - start
    return elapsed, execution.summary.next_seq, execution.log.writes, status_writes


def main() -> int:
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    kubeconfig = local.up(directory)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    kubectl_bin = str(local.ensure_binaries().kubectl)
    kubectl(kubectl_bin, "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
    kube.load_config()
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    kubectl(kubectl_bin, "create", "namespace", namespace)
    try:
        ready_sandbox(kubectl_bin, namespace)
        base_seconds, base_writes = baseline(namespace)
        run_seconds, run_events, log_writes, status_writes = full_run(namespace)
    finally:
        kubectl(kubectl_bin, "delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    base_rate = EVENTS / base_seconds
    run_rate = run_events / run_seconds
    print(f"AgentRun event log, {EVENTS} events (local control plane, kwok exec)")
    print(
        f"  baseline  log appends only : {base_rate:9.0f} events/s, "
        f"{base_writes / EVENTS:.4f} log writes/event"
    )
    print(
        f"  run       command, end to end: {run_rate:9.0f} events/s, "
        f"{log_writes / run_events:.4f} log writes/event, "
        f"{status_writes / run_events:.4f} status writes/event ({run_events} events)"
    )
    print(f"  ratio     run / baseline     : {run_rate / base_rate:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
