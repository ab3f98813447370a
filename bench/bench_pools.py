"""Benchmark: runs taking sandboxes from a SandboxPool, against making their sandboxes, on the
local control plane (kwok), with the operator running as its own process.

- Fill: a pool of ``--pool`` (as many as ``--runs``) members from nothing to all Ready, in
  members Ready a second; the baseline, the same number of Sandboxes of the same template
  applied directly.
- Start: ``--runs`` (100) command runs applied at ``--rate`` (50) a second naming the full pool
  (``poolRef``), and the same runs naming the template (``sandboxTemplate``, each makes its own
  sandbox) as the baseline: from apply to the sandbox assigned (the run's ``sandbox.ready``
  event) and to the harness started (``run.started``), p50, p90 and p99 of each, and their
  ratios; how many took a member (the rest made their own while the pool had none Ready);
  and the refill: from the first run applied to the pool Ready again (its ``Ready``
  condition's transition, to the second).
- Writes: the operator's API writes for each run, from its apply to its harness started, by
  verb and resource, from the API server's audit log (the operator runs as a ServiceAccount,
  which the local cluster audits): to the run, its log, and the sandbox it took or made. The
  Events it posts are counted apart (created by generateName: not by object).

Usage: ``make bench``, or ``python bench/bench_pools.py`` (starts the local cluster when it is
not up, and stops it again).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_runs import start_operator, wait

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # support/identity.py

from paddock.api.agentrun import TERMINAL_PHASES
from paddock.kube import client as kube
from paddock.runs import events as ev
from paddock.runs.log import read_log
from paddock.times import parse_time
from paddock_dev import cluster as local
from paddock_dev.audit import Request, each_request
from paddock_dev.binaries import ensure_binaries
from support import identity
from support.kube import Cluster

TEMPLATE = {"workspaceRef": {"name": "bench"}}
USER = f"system:serviceaccount:{identity.NAMESPACE}:{identity.ACCOUNT}"
WRITES = {"create", "update", "patch", "delete"}


@dataclass(frozen=True)
class Start:
    """One run's start: when it was applied, its sandbox assigned and its harness started
    (epoch seconds), and the sandbox and how it got it."""

    name: str
    applied: float
    assigned: float
    started: float
    sandbox: str
    taken: str


def _apply(namespace: str, obj: dict[str, Any]) -> None:
    kube.create({**obj, "metadata": {**obj["metadata"], "namespace": namespace}})


def _ready_count(namespace: str, names: list[str]) -> int:
    return sum(
        ((kube.get("Sandbox", namespace, n) or {}).get("status") or {}).get("phase") == "Ready"
        for n in names
    )


def refilled(namespace: str, since: float) -> float:
    """Seconds from ``since`` (epoch) until the pool was full and Ready again."""
    wait(lambda: _pool_ready(namespace) >= _pool_replicas(namespace), 600, "the pool to refill")
    pool = kube.get("SandboxPool", namespace, "bench") or {}
    ready = next(c for c in pool["status"]["conditions"] if c["type"] == "Ready")
    return _epoch(ready["lastTransitionTime"]) - since


def _pool_replicas(namespace: str) -> int:
    pool = kube.get("SandboxPool", namespace, "bench") or {}
    return int(pool["spec"]["replicas"])


def fill(namespace: str, count: int) -> tuple[float, float]:
    """Seconds for a pool of ``count`` to be all Ready, and then for as many Sandboxes applied
    directly (the baseline; the pool's members stay, as the runs will take them)."""
    start = time.monotonic()
    pool = {"apiVersion": "paddock.dev/v1alpha1", "kind": "SandboxPool",
            "metadata": {"name": "bench"},
            "spec": {"replicas": count, "template": TEMPLATE}}  # fmt: skip
    _apply(namespace, pool)
    wait(lambda: _pool_ready(namespace) == count, 600, "the pool to fill")
    pooled = time.monotonic() - start
    start = time.monotonic()
    names = [f"direct-{i}" for i in range(count)]
    for name in names:
        _apply(namespace, {"apiVersion": "paddock.dev/v1alpha1", "kind": "Sandbox",
                           "metadata": {"name": name}, "spec": TEMPLATE})  # fmt: skip
    wait(lambda: _ready_count(namespace, names) == count, 600, "the direct sandboxes")
    direct = time.monotonic() - start
    for name in names:
        kube.delete("Sandbox", namespace, name)
    return pooled, direct


def _pool_ready(namespace: str) -> int:
    pool = kube.get("SandboxPool", namespace, "bench") or {}
    return int((pool.get("status") or {}).get("readyReplicas") or 0)


def starts(
    namespace: str, prefix: str, count: int, rate: float, source: dict[str, Any]
) -> list[Start]:
    """Apply ``count`` runs at ``rate`` a second; when each got its sandbox and started."""
    applied = {}
    for index in range(count):
        name = f"{prefix}-{index}"
        applied[name] = time.time()
        spec = {"harness": "command", "command": "true", **source}
        _apply(namespace, {"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
                           "metadata": {"name": name}, "spec": spec})  # fmt: skip
        time.sleep(max(0.0, 1 / rate - (time.time() - applied[name])))
    found = []
    for name, at in applied.items():
        wait(lambda n=name: _ended(namespace, n), 600, f"run {name}")
        run = kube.get("AgentRun", namespace, name)
        assert run is not None
        events = read_log(kube, namespace, run["metadata"]["uid"])
        ready = next(e for e in events if e["type"] == ev.SANDBOX_READY)
        begun = next(e for e in events if e["type"] == ev.RUN_STARTED)
        taken = str(ready["data"].get("taken", "template"))
        found.append(Start(name, at, _epoch(ready["time"]), _epoch(begun["time"]),
                           ready["data"]["sandbox"], taken))  # fmt: skip
    return found


def writes(audit: Path, runs: list[Start]) -> tuple[Counter[str], int]:
    """The operator's writes for the runs until each one's start is recorded (to the run, its
    log and its sandbox, up to the log write that holds ``run.started``), by verb and
    resource; and the Events it created meanwhile."""
    since, until = min(r.applied for r in runs), max(r.started for r in runs) + 30
    mine = {("agentruns", r.name): r for r in runs} | {("sandboxes", r.sandbox): r for r in runs}
    found: dict[str, list[Request]] = {r.name: [] for r in runs}
    events = 0
    for request in each_request(audit, USER, since, until):
        if request.verb not in WRITES:
            continue
        if request.resource == "events":
            events += 1
            continue
        kind = request.resource.split("/")[0]
        run = mine.get((kind, request.name))
        if run is None and kind == "configmaps":
            run = next((r for r in runs if request.name.startswith(f"{r.name}-log-")), None)
        if run is not None:
            found[run.name].append(request)
    counted: Counter[str] = Counter()
    for run in runs:
        recorded = min(
            (q.received for q in found[run.name]
             if q.resource == "configmaps" and q.received >= run.started),
            default=until,
        )  # fmt: skip
        counted.update(f"{q.verb} {q.resource}" for q in found[run.name] if q.received <= recorded)
    return counted, events


def _epoch(stamp: str) -> float:
    parsed = parse_time(stamp)
    assert parsed is not None
    return parsed.timestamp()


def _ended(namespace: str, name: str) -> bool:
    run = kube.get("AgentRun", namespace, name) or {}
    return (run.get("status") or {}).get("phase") in TERMINAL_PHASES


def quantiles(values: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[89], cuts[98]


def _line(label: str, values: list[float], base: list[float]) -> str:
    p50, p90, p99 = quantiles(values)
    b50 = statistics.median(base)
    return (f"  {label:<32}: p50 {p50 * 1000:7.0f} ms, p90 {p90 * 1000:7.0f} ms, "
            f"p99 {p99 * 1000:7.0f} ms; p50 / baseline's {p50 / b50:.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--pool", type=int, help="the pool's replicas (default: --runs)")
    args = parser.parse_args()
    args.pool = args.pool or args.runs
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    kubeconfig = local.up(directory)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    cluster = Cluster("local", kubeconfig, str(ensure_binaries().kubectl))
    cluster.install_crds()
    kube.load_config()
    as_operator = identity.operator_kubeconfig(cluster, Path(tempfile.mkdtemp()))
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    operator = start_operator(namespace, {"KUBECONFIG": str(as_operator)})
    try:
        _apply(namespace, {"apiVersion": "paddock.dev/v1alpha1", "kind": "Workspace",
                           "metadata": {"name": "bench"}, "spec": {"setup": ["true"]}})  # fmt: skip
        pool_seconds, direct_seconds = fill(namespace, args.pool)
        pooled = starts(namespace, "pooled", args.runs, args.rate, {"poolRef": {"name": "bench"}})
        refill = refilled(namespace, min(r.applied for r in pooled))
        made = starts(namespace, "made", args.runs, args.rate, {"sandboxTemplate": TEMPLATE})
        time.sleep(2)  # the audit log is written asynchronously
        counted = {label: writes(local.audit_log(directory), runs)
                   for label, runs in (("pool", pooled), ("template", made))}  # fmt: skip
    finally:
        operator.terminate()
        operator.wait()
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    report(args, pool_seconds, direct_seconds, pooled, made, counted)
    print(f"  refill: the pool of {args.pool} full and Ready again {refill:.0f} s after the first "
          "run was applied")  # fmt: skip
    return 0


def report(
    args: argparse.Namespace,
    pool_seconds: float,
    direct_seconds: float,
    pooled: list[Start],
    made: list[Start],
    counted: dict[str, tuple[Counter[str], int]],
) -> None:
    print(f"SandboxPool fill, {args.pool} sandboxes (local control plane, kwok)")
    print(f"  sandboxes applied (baseline)    : {args.pool / direct_seconds:7.1f} Ready/s")
    print(f"  a pool of {args.pool:<4}                 : {args.pool / pool_seconds:7.1f} Ready/s; "
          f"ratio {direct_seconds / pool_seconds:.2f}")  # fmt: skip
    claimed = [r.taken for r in pooled].count("claimed")
    print(f"Run start, {args.runs} runs at {args.rate:.0f}/s: poolRef ({claimed} of {args.runs} "
          f"took a member of the pool of {args.pool}) against sandboxTemplate "
          "(baseline)")  # fmt: skip
    base_assigned = [r.assigned - r.applied for r in made]
    base_started = [r.started - r.applied for r in made]
    print(_line("apply -> sandbox, template", base_assigned, base_assigned))
    print(_line("apply -> sandbox, pool", [r.assigned - r.applied for r in pooled], base_assigned))
    print(_line("apply -> harness started, template", base_started, base_started))
    print(_line("apply -> harness started, pool", [r.started - r.applied for r in pooled],
                base_started))  # fmt: skip
    for label, runs in (("pool", pooled), ("template", made)):
        found, events = counted[label]
        each = ", ".join(f"{what} {n / len(runs):.2f}" for what, n in found.most_common())
        total = sum(found.values()) / len(runs)
        print(f"  writes per run to started, {label:<8}: {total:.2f} ({each}); "
              f"Events {events / len(runs):.2f}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
