"""Prometheus metrics, served on their own port (``PADDOCK_METRICS_PORT``, default 8081).

Names and units follow Prometheus conventions: ``_total`` counters, ``_seconds`` and
``_bytes`` units, gauges named for what they count. The README lists them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from threading import Lock
from typing import Any

import prometheus_client
from prometheus_client import Counter, Gauge, Histogram

from paddock import __version__
from paddock.api.agentrun import Harness, RunPhase
from paddock.api.sandbox import SandboxPhase
from paddock.times import parse_time

# The *_created series (a timestamp per counter and histogram) double what a scrape carries
# for nothing a dashboard uses.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

_DURATIONS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_STARTUP = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800)
_RUN = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600)

BUILD_INFO = Gauge("paddock_build_info", "The running Paddock's version; always 1.", ["version"])
BUILD_INFO.labels(__version__).set(1)

RECONCILES = Counter(
    "paddock_reconciles_total",
    "Reconciles, by kind and result (ok, waiting, error).",
    ["kind", "result"],
)
RECONCILE_SECONDS = Histogram(
    "paddock_reconcile_duration_seconds",
    "Time one reconcile took, by kind.",
    ["kind"],
    buckets=_DURATIONS,
)
SANDBOXES = Gauge("paddock_sandboxes", "Sandboxes, by phase.", ["phase"])
SANDBOX_READY_SECONDS = Histogram(
    "paddock_sandbox_ready_seconds",
    "Time from a Sandbox's creation to Ready, by start (cold: set up; restored: from a snapshot).",
    ["start"],
    buckets=_STARTUP,
)
SETUP_SECONDS = Histogram(
    "paddock_sandbox_setup_duration_seconds",
    "Time a Sandbox's clone, projection and setup took.",
    buckets=_STARTUP,
)
RUNS = Gauge("paddock_agentruns", "AgentRuns, by phase and harness.", ["phase", "harness"])
RUN_SECONDS = Histogram(
    "paddock_agentrun_duration_seconds",
    "Time from an AgentRun's start to its end, by harness and final phase.",
    ["harness", "phase"],
    buckets=_RUN,
)
RUN_EVENTS = Counter(
    "paddock_agentrun_events_total", "Events appended to run logs, by harness.", ["harness"]
)
LOG_BYTES = Counter(
    "paddock_agentrun_log_bytes_total",
    "Bytes of events written to run logs, by backend.",
    ["backend"],
)

POD_CALLS = Counter(
    "paddock_agentrun_pod_calls_total",
    "Calls runs made into their sandboxes' pods through the API server, by kind: a command that "
    "runs and ends (exec), or a run's long-lived stream opened (stream).",
    ["kind"],
)
for _kind in ("exec", "stream"):
    POD_CALLS.labels(_kind)


def pod_called(kind: str) -> None:
    POD_CALLS.labels(kind).inc()


POLICY_SOURCES = ("setup", "command", "harness")  # paddock exec and MCP exec are command runs
POLICY_DECISIONS = Counter(
    "paddock_policy_decisions_total",
    "Commands the policy gate judged, by decision (allow, ask, deny) and source (setup, "
    "command, harness).",
    ["decision", "source"],
)
for _source in POLICY_SOURCES:
    for _decision in ("allow", "ask", "deny"):
        POLICY_DECISIONS.labels(_decision, _source)  # every series exists from the start


def policy_decided(decisions: Iterable[str], source: str) -> None:
    for decision in decisions:
        POLICY_DECISIONS.labels(str(decision), source).inc()


@contextmanager
def reconciling(kind: str) -> Iterator[dict[str, str]]:
    """Time a reconcile and count it; the body may set ``result["result"]``."""
    result = {"result": "ok"}
    start = time.perf_counter()
    try:
        yield result
    except Exception:
        result["result"] = "error"
        raise
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - start)
        RECONCILES.labels(kind, result["result"]).inc()


class PhaseTracker:
    """Keeps a gauge of objects by phase from the objects' own watch events, so it is right
    after a restart too (kopf lists every object at start)."""

    def __init__(self, gauge: Gauge, labels: tuple[str, ...]) -> None:
        self.gauge = gauge
        self.labels = labels
        self.seen: dict[str, tuple[str, ...]] = {}
        self.lock = Lock()

    def update(self, uid: str, values: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """Record the object's labels (None: it is gone); the labels it had before."""
        with self.lock:
            before = self.seen.pop(uid, None)
            if before is not None:
                self.gauge.labels(*before).dec()
            if values is not None:
                self.seen[uid] = values
                self.gauge.labels(*values).inc()
            return before


SANDBOX_PHASES = PhaseTracker(SANDBOXES, ("phase",))
RUN_PHASES = PhaseTracker(RUNS, ("phase", "harness"))
# Every series exists from the start, at 0: a dashboard can tell "none" from "not reported".
for _sandbox_phase in SandboxPhase:
    SANDBOXES.labels(_sandbox_phase.value).set(0)
for _run_phase in RunPhase:
    for _harness in Harness:
        RUNS.labels(_run_phase.value, _harness.value).set(0)


def sandbox_seen(event_type: str, body: dict[str, Any]) -> None:
    """A Sandbox watch event: move the phase gauge, and time it when it first gets Ready."""
    uid = body["metadata"]["uid"]
    status = body.get("status") or {}
    phase = status.get("phase") or "Pending"
    before = SANDBOX_PHASES.update(uid, None if event_type == "DELETED" else (phase,))
    if phase == "Ready" and before is not None and before[0] != "Ready":
        timings = status.get("timings") or {}
        if timings.get("readySeconds") is not None:
            start = "restored" if status.get("restoredFrom") else "cold"
            SANDBOX_READY_SECONDS.labels(start).observe(float(timings["readySeconds"]))
        if timings.get("setupSeconds") is not None:
            SETUP_SECONDS.observe(float(timings["setupSeconds"]))


def run_seen(event_type: str, body: dict[str, Any], terminal: frozenset[str]) -> None:
    """An AgentRun watch event: move the phase gauge, and time it when it ends."""
    uid = body["metadata"]["uid"]
    status = body.get("status") or {}
    phase, harness = status.get("phase") or "Pending", str(body["spec"].get("harness"))
    before = RUN_PHASES.update(uid, None if event_type == "DELETED" else (phase, harness))
    ended = phase in terminal and before is not None and before[0] not in terminal
    if ended and status.get("startedAt") and status.get("completedAt"):
        started = _seconds(status["startedAt"])
        completed = _seconds(status["completedAt"])
        RUN_SECONDS.labels(harness, phase).observe(max(0.0, completed - started))


def _seconds(stamp: str) -> float:
    when = parse_time(stamp)
    return when.timestamp() if when else 0.0
