"""What a run reads before and around its harness: its sandbox (found, made, marked active),
its Secrets and prompt, and its own sandbox's removal at the end. The decisions are
``sandbox.py``'s; this module makes the calls."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from paddock.agentruns import sandbox as sandboxes
from paddock.agentruns.sandbox import ReadySandbox, Verdict
from paddock.api.agentrun import AgentRunSpec, Reuse
from paddock.api.workspace import WorkspaceSpec
from paddock.kube import client as kube
from paddock.render.names import ACTIVITY_ANNOTATION
from paddock.render.ownership import controlled_by
from paddock.runs.scrubbing import Scrubber
from paddock.times import format_time, utcnow

Obj = dict[str, Any]


def find_sandbox(run: Obj, spec: AgentRunSpec) -> Verdict:
    """Read the run's sandbox (and a template's Workspace), judge it, and act on the verdict:
    create the sandbox from the template, or mark it active. A Ready sandbox is checked to own
    the pod the run will exec into."""
    namespace = run["metadata"]["namespace"]
    workspace_hash = ""
    if spec.sandbox_template is not None:
        workspace_name = spec.sandbox_template.workspace_ref.name
        workspace_hash = sandboxes.workspace_hash_of(
            kube.get("Workspace", namespace, workspace_name)
        )
    name = sandboxes.sandbox_name(run, spec, workspace_hash)
    if isinstance(name, sandboxes.Waiting):
        return Verdict(name)
    found = kube.get("Sandbox", namespace, name)
    verdict = sandboxes.judge(run, spec, name, found, workspace_hash)
    if verdict.create is not None:
        kube.create(verdict.create)
    if verdict.touch:
        touch(namespace, name, utcnow())
    if isinstance(verdict.state, ReadySandbox):
        pod = kube.get("Pod", namespace, verdict.state.pod)
        return Verdict(sandboxes.check_pod(verdict.state, pod))
    return verdict


def touch(namespace: str, sandbox: str, now: datetime) -> None:
    """Mark the sandbox active: keeps it from idling out, and resumes it when paused idle."""
    annotations = {ACTIVITY_ANNOTATION: format_time(now)}
    kube.patch("Sandbox", namespace, sandbox, {"metadata": {"annotations": annotations}})


def secrets_for(
    namespace: str, spec: AgentRunSpec, sandbox: ReadySandbox
) -> tuple[dict[str, str], Scrubber]:
    """The run's secret env (for the harness), and a scrubber of every secret value the run
    could see: its own, its Secret prompt's, its Workspace's."""
    refs = spec.secret_refs()
    workspace = kube.get("Workspace", namespace, sandbox.workspace)
    # An invalid Workspace is the Sandbox's to report; the run's own refs still count.
    with contextlib.suppress(ValidationError):
        if workspace is not None:
            refs += WorkspaceSpec.model_validate(workspace.get("spec") or {}).secret_refs()
    values = kube.secret_values(namespace, refs)
    wanted = {s.name: s.secret_key_ref.pair for s in spec.secrets}
    env = {name: values[ref] for name, ref in wanted.items() if ref in values}
    return env, Scrubber(values.values())


def missing_prompt(namespace: str, spec: AgentRunSpec) -> str | None:
    """``configmap/key`` when the run's prompt is to come from a ConfigMap key that is not
    there. (A Secret prompt is one of the run's Secret references.)"""
    ref = spec.prompt_from.config_map_key_ref if spec.prompt_from else None
    if ref is None:
        return None
    configmap = kube.get("ConfigMap", namespace, ref.name) or {}
    return None if ref.key in (configmap.get("data") or {}) else f"{ref.name}/{ref.key}"


def prompt(namespace: str, spec: AgentRunSpec) -> str | None:
    if spec.prompt_from is None:
        return spec.prompt
    if spec.prompt_from.config_map_key_ref is not None:
        ref = spec.prompt_from.config_map_key_ref
        configmap = kube.get("ConfigMap", namespace, ref.name) or {}
        return str((configmap.get("data") or {}).get(ref.key, ""))
    assert spec.prompt_from.secret_key_ref is not None
    pair = spec.prompt_from.secret_key_ref.pair
    return kube.secret_values(namespace, [pair]).get(pair, "")


def remove_own_sandbox(run: Obj, spec: AgentRunSpec, name: str | None) -> None:
    """Delete the sandbox a ``reuse: none`` run made, if it is still the one it controls."""
    if spec.sandbox_template is None or spec.effective_reuse != Reuse.NONE or not name:
        return
    meta = run["metadata"]
    found = kube.get("Sandbox", meta["namespace"], name)
    if found is not None and controlled_by(found, meta["uid"]):
        kube.delete("Sandbox", meta["namespace"], name, found["metadata"]["uid"])
