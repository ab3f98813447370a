"""Benchmark: a run emitting 10,000 events, and a run's latencies, against the local control
plane.

Prints events per second and API writes per event for

- the baseline: the same events appended straight to a ConfigMap log, in the batches the run
  uses (the log's own ceiling on this API server), and
- the run: a ``command`` run printing 10,000 lines, driven by the same ``Execution`` the
  operator's daemon steps (in this process, so its writes can be counted), through the run's
  stream from a kwok sandbox,

and the run's rate as a ratio of the baseline's; the same run with its log in the local S3
server (versitygw), its events per second and bytes stored as ratios to the ConfigMap log's;
then, with the operator running, the p50 of apply -> harness started (floor: one exec into the
sandbox) and of a line printed in the sandbox -> seen by ``paddock logs --follow`` (floor: a
ConfigMap write seen by a watch).
Usage: ``make bench`` (starts the local cluster when it is not up, and stops it again).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from paddock.agentruns import logstore
from paddock.agentruns.execution import Execution
from paddock.api.agentrun import TERMINAL_PHASES
from paddock.client import logs
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.kube import watches
from paddock.objectstore import client as objectstore_client
from paddock.runs import events as ev
from paddock.runs.journal import BATCH_BYTES
from paddock.runs.log import DATA_KEY, ConfigMapLog, chunk_selector, read_log
from paddock.runs.objectlog import run_prefix
from paddock.settings import OperatorSettings
from paddock.times import parse_time
from paddock.vocab.names import SANDBOX_CONTAINER
from paddock_dev import cluster as local
from paddock_dev import object_store
from paddock_dev.binaries import ensure_binaries

EVENTS = 10_000
LATENCY_RUNS = 20
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


def start_operator(namespace: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


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
    operator = start_operator(namespace)
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


def s3_settings() -> OperatorSettings:
    """The operator's settings for the local cluster's S3 server, from its Secret."""
    keys = ("endpoint", "bucket", object_store.ACCESS_KEY, object_store.SECRET_KEY)
    found = kube.secret_values(object_store.NAMESPACE, [(object_store.SECRET, k) for k in keys])
    endpoint, bucket, access, secret = (found[(object_store.SECRET, k)] for k in keys)
    return OperatorSettings(
        log_backend="s3",
        s3_endpoint=endpoint,
        s3_bucket=bucket,
        s3_path_style=True,
        s3_prefix=f"bench/{uuid.uuid4().hex[:8]}",
        s3_access_key_id=access,
        s3_secret_access_key=secret,
    )


def stored_bytes(run: dict[str, Any], settings: OperatorSettings) -> int:
    """Bytes the run's log takes where it is kept: ConfigMap data, or object sizes."""
    meta = run["metadata"]
    if settings.logs.backend == "s3":
        bucket = objectstore_client.bucket(logstore.s3_config(settings.s3))
        listed = bucket.listing(run_prefix(logstore.logs_prefix(settings), run))
        return sum(item.size for item in listed)
    chunks = kube.list_configmaps(meta["namespace"], chunk_selector(meta["uid"]))
    return sum(len(chunk["data"][DATA_KEY].encode()) for chunk in chunks)


def full_run(
    namespace: str, name: str, settings: OperatorSettings
) -> tuple[float, int, int, int, int]:
    """Seconds from the first step to the end, events, log writes, status writes, and the
    bytes the log takes."""
    run = make_run(namespace, name, f"seq 1 {EVENTS} | sed 's/^/event /'")
    execution = Execution.load(run, settings)
    status_writes = 0
    original = kube.patch_status

    def counting_patch(kind: str, namespace: str, name: str, status: Any) -> Any:
        nonlocal status_writes
        status_writes += 1
        return original(kind, namespace, name, status)

    kube.patch_status = counting_patch
    news = threading.Event()  # as the daemon does: a step when the run's stream says something
    execution.wake = lambda urgent: news.set()
    start = time.perf_counter()
    try:
        while True:
            news.clear()
            delay = execution.step(run)
            if delay is None:
                break
            news.wait(delay)
    finally:
        kube.patch_status = original
    elapsed = time.perf_counter() - start
    size = stored_bytes(run, settings)
    return elapsed, execution.summary.next_seq, execution.log.writes, status_writes, size


def harness_start(namespace: str, runs: int) -> tuple[list[float], list[float]]:
    """Seconds from applying a run to its harness started (its ``run.started`` event), for
    ``runs`` runs one after another with the operator running; and the floor: one exec into
    the same sandbox pod (a launch is one exec, after which the run is started)."""
    sandbox = kube.get("Sandbox", namespace, "bench") or {}
    pod = sandbox["status"]["podName"]
    floor = []
    for _ in range(runs):
        start = time.time()
        kube_exec.run(namespace, pod, SANDBOX_CONTAINER, ["true"])
        floor.append(time.time() - start)
    seconds = []
    for index in range(runs):
        name = f"start-{index}"
        applied = time.time()
        make_run(namespace, name, "true")
        started = wait(lambda n=name: _started(namespace, n), 60, f"run {name} to start")
        seconds.append(started - applied)
        wait(lambda n=name: _ended(namespace, n), 60, f"run {name} to end")
    return seconds, floor


def follow_delay(
    namespace: str, lines: int, name: str = "ticks", every: float = 0.3
) -> list[float]:
    """Seconds from a line printed in the sandbox (its text is the time it was printed) to
    the event reaching a follower (``paddock logs --follow``'s generator, in this process),
    for lines printed ``every`` seconds."""
    script = f"for i in $(seq 1 {lines}); do date +%s.%N; sleep {every}; done"
    make_run(namespace, name, script)
    seconds = []
    for event in logs.events(namespace, name, follow=True):
        if event["type"] == ev.OUTPUT:
            seconds.append(time.time() - float(event["data"]["text"]))
    return seconds


def s3_env(settings: OperatorSettings) -> dict[str, str]:
    """An operator process's environment for these S3 settings, and this process's for
    reading the log back (the standard AWS variables, as ``paddock logs`` reads them)."""
    assert settings.s3.access_key_id
    assert settings.s3.secret_access_key
    key = settings.s3.access_key_id.get_secret_value()
    secret = settings.s3.secret_access_key.get_secret_value()
    return {
        "PADDOCK_LOG_BACKEND": "s3",
        "PADDOCK_S3_ENDPOINT": str(settings.s3.endpoint),
        "PADDOCK_S3_BUCKET": str(settings.s3.bucket),
        "PADDOCK_S3_PATH_STYLE": "true",
        "PADDOCK_S3_PREFIX": settings.s3.prefix,
        "PADDOCK_S3_ACCESS_KEY_ID": key,
        "PADDOCK_S3_SECRET_ACCESS_KEY": secret,
        "AWS_ACCESS_KEY_ID": key,
        "AWS_SECRET_ACCESS_KEY": secret,
    }


def _watch_floor(namespace: str, writes: int) -> list[float]:
    selector = "paddock.dev/bench=watch-floor"
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "watch-floor",
            "namespace": namespace,
            "labels": {"paddock.dev/bench": "watch-floor"},
        },
        "data": {"at": "0"},
    }
    stored = kube.create_configmap(configmap)
    delays: list[float] = []

    def watch() -> None:
        version = stored["metadata"]["resourceVersion"]
        for _, seen in watches.watch_configmaps(namespace, selector, version, 60):
            delays.append(time.time() - float(seen["data"]["at"]))
            if len(delays) == writes + 1:
                return

    watcher = threading.Thread(target=watch)
    watcher.start()
    for _ in range(writes + 1):  # the first is seen once the watch has connected: not counted
        time.sleep(0.05)  # paced, as a run's writes are
        stored["data"] = {"at": repr(time.time())}
        stored = kube.replace_configmap(stored)
    watcher.join(60)
    return delays[1:]


def _started(namespace: str, name: str) -> float | None:
    """When the run's harness started (its ``run.started`` event), once it has."""
    run = kube.get("AgentRun", namespace, name)
    events = read_log(kube, namespace, run["metadata"]["uid"]) if run else []
    started = next((e for e in events if e["type"] == ev.RUN_STARTED), None)
    stamp = parse_time(started["time"]) if started else None
    return stamp.timestamp() if stamp else None


def _ended(namespace: str, name: str) -> bool:
    run = kube.get("AgentRun", namespace, name) or {}
    return (run.get("status") or {}).get("phase") in TERMINAL_PHASES


def p50(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    kubeconfig = local.up(directory)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    kubectl_bin = str(ensure_binaries().kubectl)
    kubectl(kubectl_bin, "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
    kube.load_config()
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    kubectl(kubectl_bin, "create", "namespace", namespace)
    try:
        ready_sandbox(kubectl_bin, namespace)
        base_seconds, base_writes = baseline(namespace)
        run_seconds, run_events, log_writes, status_writes, run_bytes = full_run(
            namespace, "chatty", OperatorSettings()
        )
        s3 = s3_settings()
        s3_seconds, s3_events, s3_writes, _, s3_bytes = full_run(namespace, "chatty-s3", s3)
        operator = start_operator(namespace)
        try:
            start, start_floor = harness_start(namespace, LATENCY_RUNS)
            follow = follow_delay(namespace, LATENCY_RUNS)
            sporadic = follow_delay(namespace, LATENCY_RUNS, "sporadic", every=1.5)
            follow_floor = _watch_floor(namespace, LATENCY_RUNS)
        finally:
            operator.terminate()
            operator.wait()
        os.environ.update({k: v for k, v in s3_env(s3).items() if k.startswith("AWS_")})
        operator = start_operator(namespace, s3_env(s3))
        try:
            follow_s3 = follow_delay(namespace, LATENCY_RUNS, "ticks-s3")
        finally:
            operator.terminate()
            operator.wait()
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
    s3_rate = s3_events / s3_seconds
    print(f"AgentRun event log by backend, the same run ({EVENTS} events)")
    print(
        f"  configmap (baseline)         : {run_rate:9.0f} events/s, {run_bytes:9d} bytes stored, "
        f"{log_writes / run_events:.4f} writes/event"
    )
    print(
        f"  s3 (versitygw, local)        : {s3_rate:9.0f} events/s, {s3_bytes:9d} bytes stored, "
        f"{s3_writes / s3_events:.4f} writes/event"
    )
    print(
        f"  ratio     s3 / configmap     : {s3_rate / run_rate:9.2f} events/s, "
        f"{s3_bytes / run_bytes:.2f} bytes stored"
    )
    print(f"AgentRun latency, p50 of {LATENCY_RUNS} (goal: 1 s each)")
    print(
        f"  apply -> harness started       : {p50(start):6.2f} s (p99 {max(start):.2f} s); "
        f"floor, one exec: {p50(start_floor):.3f} s; ratio {p50(start) / p50(start_floor):.1f}"
    )
    print(
        f"  event printed -> logs --follow : {p50(follow):6.2f} s (p99 {max(follow):.2f} s); "
        f"floor, write -> watch: {p50(follow_floor):.3f} s; "
        f"ratio {p50(follow) / p50(follow_floor):.1f}"
    )
    print(
        f"  the same, lines 1.5 s apart    : {p50(sporadic):6.2f} s (p99 {max(sporadic):.2f} s); "
        f"ratio {p50(sporadic) / p50(follow_floor):.1f} (lines 0.3 s apart are written to the "
        "log together, about once a second)"
    )
    print(
        f"  the same, log in s3            : {p50(follow_s3):6.2f} s (p99 {max(follow_s3):.2f} s); "
        f"ratio to the ConfigMap log's {p50(follow_s3) / p50(follow):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
