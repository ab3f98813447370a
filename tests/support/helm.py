"""The helm CLI (built and cached by hack/helm.sh) and the chart it installs."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support.kube import ROOT

CHART = ROOT / "charts" / "paddock"
# `helm template` assumes an old Kubernetes unless told; the chart needs 1.31 (kubeVersion).
KUBE_VERSION = "--kube-version=1.34.4"


def helm_binary() -> str:
    done = subprocess.run(
        [str(ROOT / "hack" / "helm.sh")], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().rpartition("HELM=")[2]


def run_helm(helm: str, *args: str, kubeconfig: Path | None = None) -> str:
    argv = [helm, *args] + ([f"--kubeconfig={kubeconfig}"] if kubeconfig else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
    return done.stdout
