"""Benchmark: N Sandboxes of one Workspace applied at once, against the local control plane.

Prints, each next to a baseline measured in the same run:

- time to all Ready, and p50/p99 of each sandbox's readySeconds, against the benchmark itself
  creating the same PVCs and pods directly (the floor no controller can beat);
- the operator's API requests per sandbox, by verb and resource, from the API server's audit
  log (the operator runs as a ServiceAccount, which the local cluster audits);
- operator CPU seconds per sandbox, and its RSS: with no sandbox (the baseline), with all
  Ready, and that difference per 1,000 sandboxes; the bytes of a sandbox pod as the API
  server serves it against what the operator's watch cache keeps of it;
- the idle cost over one minute with every sandbox Ready (requests, CPU and RSS growth;
  baseline: zero);
- time to delete them all.

With ``--profile DIR``, the operator is sampled by py-spy from the apply to all Ready: a flame
graph and collapsed stacks in DIR, and its top frames printed (``profiling.py``).

Usage: ``make bench`` (200 sandboxes), ``python bench/bench_sandboxes.py --sandboxes 1000``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the operator's test identity (support/identity.py)

from profiling import Profile  # noqa: E402

from paddock.api.sandbox import SandboxSpec  # noqa: E402
from paddock.api.workspace import WorkspaceSpec  # noqa: E402
from paddock.render.projections import render_projection  # noqa: E402
from paddock.render.sandbox import (  # noqa: E402
    SandboxInputs,
    render_sandbox_pod,
    render_workspace_pvc,
)
from paddock.sandboxes.observe import pod_view  # noqa: E402
from paddock_dev import cluster as local  # noqa: E402
from paddock_dev.audit import each_request, requests  # noqa: E402
from paddock_dev.binaries import ensure_binaries  # noqa: E402
from support import identity  # noqa: E402
from support.kube import Cluster  # noqa: E402

IDLE_SECONDS = 60
WRITES = {"create", "update", "patch", "delete", "deletecollection"}
READS = {"get", "list"}
USER = f"system:serviceaccount:{identity.NAMESPACE}:{identity.ACCOUNT}"


def apply(cluster: Cluster, namespace: str, docs: list[dict[str, Any]]) -> None:
    for start in range(0, len(docs), 200):  # kubectl apply -f - takes a few hundred at once
        chunk = yaml.safe_dump_all(docs[start : start + 200])
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=chunk)


def items(cluster: Cluster, namespace: str, resource: str) -> list[dict[str, Any]]:
    out = cluster.kubectl("get", resource, "-n", namespace, "-o", "json").stdout
    found: list[dict[str, Any]] = json.loads(out)["items"]
    return found


def wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


def direct(cluster: Cluster, namespace: str, count: int) -> float:
    """Seconds for the benchmark to create PVC + pod per sandbox and see every pod Ready."""
    workspace = WorkspaceSpec(setup=["true"])
    docs: list[dict[str, Any]] = []
    for index in range(count):
        spec = SandboxSpec.model_validate({"workspaceRef": {"name": "w"}})
        image = "localhost/paddock-sandbox:latest"
        inputs = SandboxInputs(f"direct-{index}", namespace, spec, workspace, image, "bench")
        pvc, pod = (
            render_workspace_pvc(inputs),
            # The same pod a Sandbox of the benchmark's Workspace gets, init containers too.
            render_sandbox_pod(
                inputs, render_projection(workspace), prepared=False, files="bench-files"
            ),
        )
        for obj in (pvc, pod):
            obj["metadata"].pop("labels", None)  # not a sandbox's: no operator would look
        docs += [pvc, pod]
    start = time.monotonic()
    apply(cluster, namespace, docs)
    wait(lambda: _ready_pods(cluster, namespace) >= count, 900, "the direct pods")
    elapsed = time.monotonic() - start
    cluster.kubectl("delete", "pods,pvc", "--all", "-n", namespace, "--wait=false")
    wait(lambda: not items(cluster, namespace, "pods"), 900, "the direct pods gone")
    # Their volumes too: the provisioner deletes them one by one, and the operator's sandboxes
    # measured next would otherwise wait behind the deletes for volumes of their own.
    wait(lambda: not _volumes_of(cluster, namespace), 900, "the direct volumes gone")
    return elapsed


def _volumes_of(cluster: Cluster, namespace: str) -> list[str]:
    out = cluster.kubectl("get", "pv", "-o", "json").stdout
    return [
        pv["metadata"]["name"]
        for pv in json.loads(out)["items"]
        if ((pv.get("spec") or {}).get("claimRef") or {}).get("namespace") == namespace
    ]


def _ready_pods(cluster: Cluster, namespace: str) -> int:
    return sum(
        1
        for pod in items(cluster, namespace, "pods")
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (pod.get("status") or {}).get("conditions", [])
        )
    )


class Operator:
    """``paddock operator -n NS`` as the operator's ServiceAccount, its CPU read from /proc."""

    def __init__(self, namespace: str, kubeconfig: Path, log: Path) -> None:
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PADDOCK_METRICS_PORT": "0"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", ""],
            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
        kib = {line.split(":")[0]: int(line.split()[1]) for line in status if "kB" in line}
        return kib["VmRSS"] / 1024, kib["VmHWM"] / 1024

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


def sandboxes(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "paddock.dev/v1alpha1",
            "kind": "Sandbox",
            "metadata": {"name": f"s-{index}"},
            "spec": {"workspaceRef": {"name": "bench"}},
        }
        for index in range(count)
    ]


def ready_seconds(cluster: Cluster, namespace: str, count: int) -> list[float] | None:
    found = items(cluster, namespace, "sandboxes")
    ready = [
        s["status"]["timings"]["readySeconds"]
        for s in found
        if (s.get("status") or {}).get("phase") == "Ready"
        and (s["status"].get("timings") or {}).get("readySeconds") is not None
    ]
    return ready if len(ready) >= count else None


def summarise(counted: Counter[tuple[str, str]], count: int) -> str:
    writes = sum(n for (verb, _), n in counted.items() if verb in WRITES)
    reads = sum(n for (verb, _), n in counted.items() if verb in READS)
    detail = ", ".join(
        f"{verb} {resource} {n / count:.2f}" for (verb, resource), n in counted.most_common()
    )
    return f"{writes / count:.2f} writes, {reads / count:.2f} reads per sandbox ({detail})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=200)
    parser.add_argument("--idle-seconds", type=int, default=IDLE_SECONDS)
    parser.add_argument("--profile", type=Path, help="sample the operator; flame graph here")
    args = parser.parse_args()
    count = args.sandboxes
    directory = local.default_state_dir()
    started_here = not local.is_up(directory)
    kubeconfig = local.up(directory)
    os.environ["KUBECONFIG"] = str(kubeconfig)
    cluster = Cluster("local", kubeconfig, str(ensure_binaries().kubectl))
    cluster.install_crds()
    audit = local.audit_log(directory)
    scratch = Path(tempfile.mkdtemp(prefix="paddock-bench-"))
    operator_config = identity.operator_kubeconfig(cluster, scratch)
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    try:
        floor = direct(cluster, namespace, count)
        results = measure(cluster, namespace, count, operator_config, audit, scratch, args)
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")
        if started_here:
            local.down(directory)
    report(count, floor, results, args.idle_seconds)
    return 0


def measure(
    cluster: Cluster,
    namespace: str,
    count: int,
    kubeconfig: Path,
    audit: Path,
    scratch: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    workspace = {
        "apiVersion": "paddock.dev/v1alpha1",
        "kind": "Workspace",
        "metadata": {"name": "bench"},
        "spec": {"setup": ["true"]},
    }
    apply(cluster, namespace, [workspace])
    operator = Operator(namespace, kubeconfig, scratch / "operator.log")
    try:
        time.sleep(5)  # the operator's start-up is not what is measured
        rss0 = operator.rss_mib()[0]
        cpu0, t0 = operator.cpu_seconds(), time.time()
        start = time.monotonic()
        with Profile(operator.process.pid, args.profile, f"sandboxes-{count}") as profile:
            apply(cluster, namespace, sandboxes(count))
            each = wait(lambda: ready_seconds(cluster, namespace, count), 1800, "every sandbox")
            to_ready = time.monotonic() - start
        cpu1, t1 = operator.cpu_seconds(), time.time()
        rss1 = operator.rss_mib()[0]
        pods = items(cluster, namespace, "pods")
        time.sleep(args.idle_seconds)
        cpu2, t2 = operator.cpu_seconds(), time.time()
        rss = operator.rss_mib()
        start = time.monotonic()
        cluster.kubectl("delete", "sandboxes", "--all", "-n", namespace, "--wait=false")
        wait(lambda: not items(cluster, namespace, "sandboxes"), 900, "the sandboxes gone")
        wait(lambda: not items(cluster, namespace, "pods"), 900, "the pods gone")
        to_gone = time.monotonic() - start
        cpu3, t3 = operator.cpu_seconds(), time.time()
    finally:
        operator.stop()
    time.sleep(2)  # the audit log is written asynchronously
    return {
        "to_ready": to_ready,
        "ready_each": sorted(each),
        "to_gone": to_gone,
        "cpu_create": cpu1 - cpu0,
        "cpu_idle": cpu2 - cpu1,
        "idle_wall": t2 - t1,
        "cpu_delete": cpu3 - cpu2,
        "rss": rss,
        "rss_empty": rss0,
        "rss_ready": rss1,
        "pod_bytes": _bytes_per_object(pods),
        "lifecycle": requests(audit, USER, t0, t1) + requests(audit, USER, t2, t3 + 1),
        "throttled": sum(r.code == 429 for r in each_request(audit, USER, t0, t3 + 1)),
        "idle": requests(audit, USER, t1, t2),
        "profile": profile.summary(),
    }


def _bytes_per_object(pods: list[dict[str, Any]]) -> tuple[float, float]:
    """A sandbox pod's JSON as the API server serves it, and what the watch cache keeps."""
    whole = sum(len(json.dumps(pod, separators=(",", ":"))) for pod in pods)
    kept = sum(len(json.dumps(pod_view(pod), separators=(",", ":"))) for pod in pods)
    return whole / len(pods), kept / len(pods)


def report(count: int, floor: float, r: dict[str, Any], idle_seconds: int) -> None:
    each = r["ready_each"]
    p50 = statistics.median(each)
    p99 = each[min(len(each) - 1, int(len(each) * 0.99))]
    idle = r["idle"]
    idle_reads = sum(n for (verb, _), n in idle.items() if verb in READS)
    idle_writes = sum(n for (verb, _), n in idle.items() if verb in WRITES)
    # A watch the server ends after its timeout (300 s) is started again: the audit log shows
    # each renewal twice (response started, and complete); it reads no object.
    renewals = sum(n for (verb, _), n in idle.items() if verb == "watch") // 2
    print(f"Sandboxes: {count} applied at once (local control plane, kwok node)")
    print(f"  baseline  PVC + pod created directly: all Ready in {floor:7.1f} s")
    print(
        f"  operator  all Ready in {r['to_ready']:7.1f} s (ratio {r['to_ready'] / floor:.2f}); "
        f"per sandbox p50 {p50:.1f} s, p99 {p99:.1f} s"
    )
    print(f"  lifecycle create -> Ready -> delete: {summarise(r['lifecycle'], count)}")
    print(f"  throttled {r['throttled']} of the operator's requests answered 429 (priority and "
          "fairness), each sent again after the Retry-After it gave")  # fmt: skip
    cpu = (r["cpu_create"] + r["cpu_delete"]) / count * 1000
    print(f"  cpu       {cpu:.1f} ms per sandbox (create and delete)")
    empty, ready = r["rss_empty"], r["rss_ready"]
    print(
        f"  memory    RSS {empty:.0f} MiB with no sandbox (baseline), {ready:.0f} MiB with all "
        f"Ready: {(ready - empty) / count * 1000:.0f} MiB per 1,000 sandboxes; "
        f"peak {r['rss'][1]:.0f} MiB"
    )
    whole, kept = r["pod_bytes"]
    print(f"  cache     a sandbox pod: {whole:.0f} bytes served, {kept:.0f} bytes kept")
    per_minute = 60 / r["idle_wall"]
    print(
        f"  idle      {idle_seconds} s with all Ready: {idle_reads * per_minute:.0f} reads and "
        f"{idle_writes * per_minute:.0f} writes a minute (baseline 0), "
        f"{renewals} watch renewals; CPU {r['cpu_idle'] / r['idle_wall'] * 100:.2f}% "
        f"(baseline 0); RSS {r['rss'][0] - ready:+.1f} MiB"
    )
    if idle_reads or idle_writes:
        named = ", ".join(
            f"{n} {verb} {resource}"
            for (verb, resource), n in sorted(idle.items())
            if verb in READS | WRITES
        )
        print(f"  idle      requests: {named}")
    print(f"  delete    all gone in {r['to_gone']:.1f} s")
    if r["profile"]:
        print(r["profile"])


if __name__ == "__main__":
    sys.exit(main())
