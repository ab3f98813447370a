"""``paddock dev`` (``make dev``): the main job on whatever cluster is at hand.

Uses the cluster of the current kubeconfig when one answers, else starts the local one; then
installs the CRDs, applies the examples, says what to look at, and runs the operator in the
foreground until interrupted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from kubernetes import client, config

from paddock import GROUP
from paddock.api import KINDS
from paddock.devcluster import cluster
from paddock.devcluster.binaries import REPO_ROOT, ensure_binaries

NEXT_STEPS = """
Paddock is running. In another shell:

  export KUBECONFIG={kubeconfig}
  kubectl get paddock                 # every Paddock object
  kubectl get sbx,run                 # sandboxes and runs, with their phases
  kubectl describe sandbox hello      # conditions and events
  paddock logs hello-run --follow     # the run's event log, replayed and followed

Stop with Ctrl-C; `paddock cluster down` removes the local cluster.
"""


def current_cluster_answers() -> bool:
    try:
        config.load_kube_config()
        client.VersionApi().get_code(_request_timeout=3)
    except Exception:
        return False
    return True


def _kubectl() -> str:
    return shutil.which("kubectl") or str(ensure_binaries().kubectl)


def _run(*argv: str) -> None:
    print("+ " + " ".join(argv), file=sys.stderr)
    subprocess.run(argv, check=True)


def run_dev(*, operator: bool = True) -> int:
    if current_cluster_answers():
        kubeconfig = os.environ.get("KUBECONFIG", str(Path.home() / ".kube" / "config"))
        print("dev: using the cluster of the current kubeconfig", file=sys.stderr)
    else:
        print("dev: no cluster answers; starting the local one", file=sys.stderr)
        try:
            kubeconfig = str(cluster.up(cluster.default_state_dir()))
        except cluster.ClusterError as exc:
            print(f"dev: the local cluster did not start: {exc}", file=sys.stderr)
            return 1
        os.environ["KUBECONFIG"] = kubeconfig
    kubectl = _kubectl()
    _run(kubectl, "apply", "--server-side", "-k", str(REPO_ROOT / "crds"))
    crds = [f"crd/{kind.kind_info.plural}.{GROUP}" for kind in KINDS]
    _run(kubectl, "wait", "--for=condition=Established", "--timeout=60s", *crds)
    _run(kubectl, "apply", "-k", str(REPO_ROOT / "examples"))
    print(NEXT_STEPS.format(kubeconfig=kubeconfig), file=sys.stderr)
    if not operator:
        return 0
    from paddock.operator_main import run_operator

    return run_operator(namespaces=[], liveness="", priority=None, log_format="text", verbose=False)
