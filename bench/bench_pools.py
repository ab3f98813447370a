"""Benchmark: runs taking sandboxes from a SandboxPool, against making their sandboxes, on the
local control plane (kwok), with the operator running as its own process.

- Fill: a pool of ``--runs`` (40) members from nothing to all Ready, in members Ready a second;
  the baseline, the same number of Sandboxes of the same template applied directly.
- Start: ``--runs`` command runs applied at ``--rate`` (20) a second naming the full pool
  (``poolRef``), and the same runs naming the template (``sandboxTemplate``, each makes its own
  sandbox) as the baseline: from apply to the sandbox assigned (the run's ``sandbox.ready``
  event) and to the harness started (``run.started``), p50, p90 and p99 of each, and their
  ratios.

Usage: ``make bench``, or ``python bench/bench_pools.py`` (starts the local cluster when it is
not up, and stops it again).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from bench_runs import kubectl, start_operator, wait

from paddock.api.agentrun import TERMINAL_PHASES
from paddock.devcluster import cluster as local
from paddock.devcluster.binaries import ensure_binaries
from paddock.kube import client as kube
from paddock.runs import events as ev
from paddock.runs.log import read_log
from paddock.times import parse_time

TEMPLATE = {"workspaceRef": {"name": "bench"}}


def _apply(namespace: str, obj: dict[str, Any]) -> None:
    kube.create({**obj, "metadata": {**obj["metadata"], "namespace": namespace}})


def _ready_count(namespace: str, names: list[str]) -> int:
    return sum(
        ((kube.get("Sandbox", namespace, n) or {}).get("status") or {}).get("phase") == "Ready"
        for n in names
    )


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
) -> tuple[list[float], list[float], list[str]]:
    """Apply ``count`` runs at ``rate`` a second; seconds from each apply to its sandbox
    assigned and to its harness started, and how each got its sandbox."""
    applied = {}
    for index in range(count):
        name = f"{prefix}-{index}"
        applied[name] = time.time()
        spec = {"harness": "command", "command": "true", **source}
        _apply(namespace, {"apiVersion": "paddock.dev/v1alpha1", "kind": "AgentRun",
                           "metadata": {"name": name}, "spec": spec})  # fmt: skip
        time.sleep(max(0.0, 1 / rate - (time.time() - applied[name])))
    assigned, started, taken = [], [], []
    for name, at in applied.items():
        wait(lambda n=name: _ended(namespace, n), 600, f"run {name}")
        run = kube.get("AgentRun", namespace, name)
        assert run is not None
        events = read_log(kube, namespace, run["metadata"]["uid"])
        ready = next(e for e in events if e["type"] == ev.SANDBOX_READY)
        begun = next(e for e in events if e["type"] == ev.RUN_STARTED)
        assigned.append(_epoch(ready["time"]) - at)
        started.append(_epoch(begun["time"]) - at)
        taken.append(str(ready["data"].get("taken", "template")))
    return assigned, started, taken


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
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rate", type=float, default=20.0)
    args = parser.parse_args()
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    kubeconfig = local.up(directory)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    kubectl_bin = str(ensure_binaries().kubectl)
    crds = Path(__file__).resolve().parents[1] / "crds"
    kubectl(kubectl_bin, "apply", "--server-side", "--force-conflicts", "-k", str(crds))
    kube.load_config()
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    kubectl(kubectl_bin, "create", "namespace", namespace)
    operator = start_operator(namespace)
    try:
        _apply(namespace, {"apiVersion": "paddock.dev/v1alpha1", "kind": "Workspace",
                           "metadata": {"name": "bench"}, "spec": {"setup": ["true"]}})  # fmt: skip
        pool_seconds, direct_seconds = fill(namespace, args.runs)
        pooled = starts(namespace, "pooled", args.runs, args.rate, {"poolRef": {"name": "bench"}})
        made = starts(namespace, "made", args.runs, args.rate, {"sandboxTemplate": TEMPLATE})
    finally:
        operator.terminate()
        operator.wait()
        kubectl(kubectl_bin, "delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    print(f"SandboxPool fill, {args.runs} sandboxes (local control plane, kwok)")
    print(f"  sandboxes applied (baseline)    : {args.runs / direct_seconds:7.1f} Ready/s")
    print(f"  a pool of {args.runs:<4}                 : {args.runs / pool_seconds:7.1f} Ready/s; "
          f"ratio {direct_seconds / pool_seconds:.2f}")  # fmt: skip
    claimed = pooled[2].count("claimed")
    print(f"Run start, {args.runs} runs at {args.rate:.0f}/s: poolRef ({claimed} took a member) "
          "against sandboxTemplate (baseline)")  # fmt: skip
    print(_line("apply -> sandbox, template", made[0], made[0]))
    print(_line("apply -> sandbox, pool", pooled[0], made[0]))
    print(_line("apply -> harness started, template", made[1], made[1]))
    print(_line("apply -> harness started, pool", pooled[1], made[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
