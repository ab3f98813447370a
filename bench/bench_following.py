"""Benchmark: what quiet running runs cost the operator that follows them, against the same
number of Ready sandboxes with no run, on the local control plane.

N Sandboxes of one Workspace are made Ready by an operator process; over a window of W
seconds the bench reads that process's CPU time (``/proc``) and its calls into pods (its
``paddock_agentrun_pod_calls_total``): first with no run, then with a quiet ``command`` run
(``sleep``) running in each sandbox. It prints, per run, execs and streams opened a second
(goal: execs <= 0.01) and the operator's CPU in % of a core (goal <= 0.02 %), and the CPU as a
ratio of the idle baseline's.

Usage: ``bench/bench_following.py [--runs N] [--window SECONDS]`` (``make bench`` runs it with
40); starts the local cluster when it is not up, and stops it again.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml
from bench_runs import ROOT, kubectl, wait

from paddock.kube import client as kube
from paddock_dev import cluster as local
from paddock_dev.binaries import ensure_binaries

TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        return int(listening.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _calls(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = re.findall(r'paddock_agentrun_pod_calls_total\{kind="(\w+)"\} ([0-9.e+]+)', text)
    return {kind: float(value) for kind, value in found}


def _phases(namespace: str, kind: str) -> list[str]:
    return [str((o.get("status") or {}).get("phase")) for o in kube.listed(kind, namespace)]


def _window(pid: int, port: int, seconds: float) -> tuple[float, dict[str, float]]:
    """The operator's CPU seconds and its calls into pods over ``seconds``."""
    cpu, calls = _cpu_seconds(pid), _calls(port)
    time.sleep(seconds)  # the measurement window itself
    after = _calls(port)
    return _cpu_seconds(pid) - cpu, {k: after[k] - calls.get(k, 0) for k in after}


def _manifests(runs: int) -> list[dict[str, Any]]:
    workspace = {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": "bench"},
        "spec": {"setup": ["true"]},
    }
    sandboxes = [
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "Sandbox",
            "metadata": {"name": f"box-{i}"},
            "spec": {"workspaceRef": {"name": "bench"}},
        }
        for i in range(runs)
    ]
    return [workspace, *sandboxes]


def _run(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": f"quiet-{index}"},
        "spec": {"sandboxRef": {"name": f"box-{index}"}, "harness": "command",
                 "command": "sleep 3600"},
    }  # fmt: skip


def measure(kubectl_bin: str, namespace: str, runs: int, window: float) -> None:
    manifests = yaml.safe_dump_all(_manifests(runs))
    kubectl(kubectl_bin, "apply", "-n", namespace, "-f", "-", stdin=manifests)
    port = _free_port()
    env = {**os.environ, "PADDOCK_METRICS_PORT": str(port)}
    argv = [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", ""]
    operator = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait(lambda: _phases(namespace, "Sandbox").count("Ready") == runs, 600, "sandboxes")
        idle_cpu, _ = _window(operator.pid, port, window)
        listing = yaml.safe_dump_all([_run(i) for i in range(runs)])
        kubectl(kubectl_bin, "apply", "-n", namespace, "-f", "-", stdin=listing)
        wait(lambda: _phases(namespace, "AgentRun").count("Running") == runs, 600, "runs")
        time.sleep(2)  # the starts' own calls are done before the window
        run_cpu, calls = _window(operator.pid, port, window)
    finally:
        operator.terminate()
        operator.wait()
    per = runs * window
    print(f"Quiet running runs, {runs} (a window of {window:.0f} s; local control plane, kwok)")
    print(f"  baseline  {runs} Ready sandboxes, no run: operator CPU {idle_cpu / window:.2%} "
          "of a core")  # fmt: skip
    print(
        f"  runs      {runs} running: operator CPU {run_cpu / window:.2%} of a core; per run "
        f"{(run_cpu - idle_cpu) / per:.4%} of a core over the baseline (goal <= 0.02 %), "
        f"{calls.get('exec', 0) / per:.4f} exec/s (goal <= 0.01), "
        f"{calls.get('stream', 0) / per:.4f} streams opened/s"
    )
    print(f"  ratio     runs / baseline CPU: {run_cpu / max(idle_cpu, 1e-9):.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--window", type=float, default=30.0)
    args = parser.parse_args()
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    os.environ["KUBECONFIG"] = str(local.up(directory))
    kubectl_bin = str(ensure_binaries().kubectl)
    kubectl(kubectl_bin, "apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "crds"))
    kube.load_config()
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    kubectl(kubectl_bin, "create", "namespace", namespace)
    try:
        measure(kubectl_bin, namespace, args.runs, args.window)
    finally:
        kubectl(kubectl_bin, "delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
