"""How GitOps tools see objects: hack/gitops-health (built and cached by
hack/gitops-health.sh) computes each one's kstatus, as Flux's health checks do, and runs the
chart's Argo CD health script on it in Argo CD's Lua engine."""

from __future__ import annotations

import functools
import json
import subprocess
from typing import Any

from support.kube import ROOT

# What kstatus and Argo CD make of each object tests/integration/test_gitops.py creates (and
# tests/data/gitops-objects.json keeps), by "Kind/name".
EXPECTED = {
    "Workspace/app": ("Current", "Healthy"),
    "SandboxPolicy/valid": ("Current", "Healthy"),
    "SandboxPolicy/ineffective": ("Failed", "Degraded"),
    "Sandbox/box": ("Current", "Healthy"),
    "Sandbox/orphan": ("InProgress", "Progressing"),
    "Sandbox/resting": ("InProgress", "Suspended"),
    "SandboxPool/warm": ("Current", "Healthy"),
    "AgentRun/done": ("Current", "Healthy"),
    "AgentRun/broken": ("Failed", "Degraded"),
    "AgentRun/stranded": ("Failed", "Degraded"),
}
KEPT = ("name", "generation", "creationTimestamp", "deletionTimestamp")
ARGO_HEALTH = ROOT / "charts" / "paddock" / "argocd" / "health.lua"


@functools.cache
def checker() -> str:
    done = subprocess.run(
        [str(ROOT / "hack" / "gitops-health.sh")], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().rpartition("GITOPS_HEALTH=")[2]


def check(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each object's ``kstatus`` and ``kstatusMessage``, ``argo`` and ``argoMessage``."""
    done = subprocess.run(
        [checker(), f"--lua={ARGO_HEALTH}"],
        input=json.dumps(objects),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found: list[dict[str, str]] = json.loads(done.stdout)
    return found


def recordable(objects: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The objects as a test may keep them: without what names one cluster's copy."""
    kept = {}
    for key, obj in objects.items():
        meta = {k: v for k, v in obj["metadata"].items() if k in KEPT}
        kept[key] = {**obj, "metadata": meta}
    return kept
