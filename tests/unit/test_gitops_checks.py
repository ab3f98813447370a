"""The objects of every kind in every state tests/integration/test_gitops.py made on the local
control plane (recorded in tests/data/gitops-objects.json), read as GitOps tools read them:
kstatus (sigs.k8s.io/cli-utils, Flux's health library) and the chart's Argo CD health script
in Argo CD's Lua engine (gopher-lua), both built from their modules (hack/gitops-health).
Also the states a recording does not hold: a generation the operator has not seen yet, a
deletion, an object the operator has not reported on (the status its CRD defaults). And the
chart's argocd-cm snippet is that script for each kind."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from paddock.api import KINDS
from paddock.api.crd import render_crd
from support import gitops
from support.kube import ROOT

RECORDED: dict[str, dict[str, Any]] = json.loads(
    (ROOT / "tests" / "data" / "gitops-objects.json").read_text()
)


def test_every_recorded_state_reads_as_it_should() -> None:
    assert set(RECORDED) == set(gitops.EXPECTED)
    seen = gitops.check(list(RECORDED.values()))
    got = {key: (v["kstatus"], v["argo"]) for key, v in zip(RECORDED, seen, strict=True)}
    assert got == gitops.EXPECTED


def test_an_unseen_generation_a_deletion_and_no_report_yet_are_under_way() -> None:
    ready = RECORDED["Sandbox/box"]
    unseen = copy.deepcopy(ready)
    unseen["metadata"]["generation"] += 1
    deleted = copy.deepcopy(ready)
    deleted["metadata"]["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    # Not reported on yet: the API server gives it the status its CRD defaults (every kind's),
    # which says no generation was observed; with no status at all kstatus would read Current.
    unreported = copy.deepcopy(RECORDED["AgentRun/done"])
    schema = render_crd(KINDS[4])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    unreported["status"] = schema["properties"]["status"]["default"]
    seen = gitops.check([unseen, deleted, unreported])
    assert [(v["kstatus"], v["argo"]) for v in seen] == [
        ("InProgress", "Progressing"),
        ("Terminating", "Healthy"),  # Argo CD says deletion itself; the script its last state
        ("InProgress", "Progressing"),
    ]
    assert "generation" in seen[0]["argoMessage"]
    assert "observed generation is 0" in seen[2]["kstatusMessage"]


def test_every_kind_defaults_a_status_that_observed_no_generation() -> None:
    for kind in KINDS:
        schema = render_crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        status = schema["properties"]["status"]
        assert status["default"] == {"observedGeneration": 0}, kind.kind_info.kind
        assert status["properties"]["observedGeneration"]["type"] == "integer"


def test_the_argocd_snippet_is_the_script_for_each_kind() -> None:
    snippet = yaml.safe_load(
        (ROOT / "charts" / "paddock" / "argocd" / "argocd-cm.yaml").read_text()
    )
    script = gitops.ARGO_HEALTH.read_text()
    expected = {f"resource.customizations.health.paddock.dev_{k.kind_info.kind}" for k in KINDS}
    assert set(snippet["data"]) == expected
    assert all(value == script for value in snippet["data"].values())
