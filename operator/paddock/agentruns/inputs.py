"""What a run reads before and around its harness: its sandbox (found, made, marked active),
its Secrets, prompt and policy, and its own sandbox's removal at the end. The decisions are
``sandbox.py``'s and ``decide.py``'s; this module makes the calls. Sandboxes, their pods,
Workspaces and policies are read from what the operator's watches show (``kube.cache``: the
API only on a miss); Secrets and a prompt's ConfigMap from the API."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from paddock import metrics
from paddock.agentruns import activity, claims, decide, gating, taking
from paddock.agentruns import sandbox as sandboxes
from paddock.agentruns.decide import Asked, Ending, Wait
from paddock.agentruns.sandbox import ReadySandbox, Verdict
from paddock.api.agentrun import AgentRunSpec, Reuse
from paddock.api.approvals import ApprovalState
from paddock.api.errors import describe
from paddock.api.policy import SandboxPolicySpec
from paddock.api.workspace import WorkspaceSpec
from paddock.harness import HARNESSES, Invocation
from paddock.harness.base import WorkspaceContext
from paddock.kube import client as kube
from paddock.kube import exec as kube_exec
from paddock.kube.cache import CACHE
from paddock.kube.errors import KubeError
from paddock.policy.gate import judge_command
from paddock.render import gate_scripts, run_scripts
from paddock.render.gate_scripts import GatePoll
from paddock.render.names import (
    GATE_CONTAINER,
    LAST_RUN_ANNOTATION,
    SANDBOX_CONTAINER,
)
from paddock.render.ownership import controlled_by
from paddock.render.projections import agent_skills, mcp_servers, render_agents_md
from paddock.runs import journal
from paddock.runs.scrubbing import Scrubber
from paddock.times import utcnow

Obj = dict[str, Any]


def find_sandbox(run: Obj, spec: AgentRunSpec) -> Verdict:
    """Read the run's sandbox (and a template's Workspace), judge it, and act on the verdict:
    create the sandbox from the template, or mark it active. A Ready sandbox is checked to own
    the pod the run will exec into."""
    namespace = run["metadata"]["namespace"]
    if spec.pool_ref is not None:
        return taking.from_pool(run, spec, spec.pool_ref.name)
    pool, workspace_hash = None, ""
    if spec.sandbox_template is not None:
        pool = claims.matching_pool(spec.sandbox_template, CACHE.listed("SandboxPool", namespace))
        if pool is not None and spec.effective_reuse == Reuse.NONE:
            return taking.from_pool(run, spec, pool)
        workspace_name = spec.sandbox_template.workspace_ref.name
        workspace_hash = sandboxes.workspace_hash_of(
            CACHE.get("Workspace", namespace, workspace_name)
        )
    name = sandboxes.sandbox_name(run, spec, workspace_hash)
    if isinstance(name, sandboxes.Waiting):
        return Verdict(name)
    found = CACHE.get("Sandbox", namespace, name)
    if found is None and spec.effective_reuse == Reuse.THREAD:
        taken = taking.for_thread(run, spec, workspace_hash, pool)
        if taken is not None:
            return taken
    verdict = sandboxes.judge(run, spec, name, found, workspace_hash)
    if verdict.create is not None:
        kube.create(verdict.create)
    if verdict.touch:
        activity.touch(namespace, name, utcnow())
    if isinstance(verdict.state, ReadySandbox):
        pod = CACHE.get("Pod", namespace, verdict.state.pod)
        ready = verdict.state
        if pool is not None and claims.made_by(run, found):  # a thread's, the pool empty
            ready = replace(ready, pool=pool, claimed=False)
        return Verdict(sandboxes.check_pod(ready, pod))
    return verdict


def seen(event_type: str, run: Obj) -> None:
    """A watch event of a run: what decides the line for a sandbox is kept, so that a run
    finds the others of its sandbox without a read."""
    CACHE.seen(event_type, sandboxes.queue_view(run))


def queued(run: Obj, spec: AgentRunSpec, sandbox: ReadySandbox) -> Wait | None:
    """Whether the run waits for another run of its sandbox or thread to finish first."""
    others = CACHE.listed("AgentRun", run["metadata"]["namespace"])
    busy = sandboxes.busy(run, spec, sandbox.name, others)
    return None if busy is None else decide.waiting_for_sandbox(busy)


def check_command(
    namespace: str, spec: AgentRunSpec, sandbox: ReadySandbox, asking: gating.Asking
) -> Wait | Ending | Asked | None:
    """The exec gate: a ``command`` run's command must pass its sandbox's policy, or be
    approved by a person. (An agent's own commands are sent by its harness's gate, and
    answered by ``judge_gate``.)"""
    policy = command_policy(namespace, sandbox)
    if spec.command is None:  # an agent: its gate answers from the policy, which must be had
        return decide.gated(policy, None, asking) if isinstance(policy, str) else None
    judged = None
    if not isinstance(policy, str):
        judged = judge_command(policy, spec.command, workspace_scripts(namespace, sandbox))
        if not asking.approvals:  # counted once, not on each step of a wait for approval
            metrics.policy_decided([judged.decision], "command")
    return decide.gated(policy, judged, asking)


def command_policy(namespace: str, sandbox: ReadySandbox) -> SandboxPolicySpec | str | None:
    """The policy a run's command is checked against: None when the sandbox has none, a
    message when it cannot be had (deleted or made invalid since the sandbox was Ready)."""
    choice = sandbox.policy
    if choice.inline is not None or choice.name is None:
        return choice.inline
    found = CACHE.get("SandboxPolicy", choice.namespace or namespace, choice.name)
    if found is None:
        return f"SandboxPolicy {choice.label} of Sandbox {sandbox.name} is not found"
    try:
        return SandboxPolicySpec.model_validate(found.get("spec") or {})
    except ValidationError as exc:
        return f"SandboxPolicy {choice.label} is invalid: " + "; ".join(describe(exc))


def workspace_scripts(namespace: str, sandbox: ReadySandbox) -> dict[str, str]:
    """The sandbox's Workspace's scripts: the aliases its policy may name."""
    return workspace_of(namespace, sandbox).scripts


def workspace_of(namespace: str, sandbox: ReadySandbox) -> WorkspaceSpec:
    """The sandbox's Workspace (empty when gone or invalid: the Sandbox reports that)."""
    found = CACHE.get("Workspace", namespace, sandbox.workspace)
    with contextlib.suppress(ValidationError):
        if found is not None:
            return WorkspaceSpec.model_validate(found.get("spec") or {})
    return WorkspaceSpec()


def secrets_for(
    namespace: str, spec: AgentRunSpec, sandbox: ReadySandbox
) -> tuple[dict[str, str], Scrubber]:
    """The run's secret env (for the harness), and a scrubber of every secret value the run
    could see: its own, its Secret prompt's, its Workspace's, both as they are now and as the
    sandbox's pod started with them (a rotated Secret reaches the pod's env at its next start,
    so its processes may still hold the old value)."""
    workspace_refs = workspace_of(namespace, sandbox).secret_refs()
    values = kube.secret_values(namespace, spec.secret_refs() + workspace_refs)
    started = started_secret_values(namespace, sandbox) if workspace_refs else []
    wanted = {s.name: s.secret_key_ref.pair for s in spec.secrets}
    env = {name: values[ref] for name, ref in wanted.items() if ref in values}
    return env, Scrubber([*values.values(), *started])


def started_secret_values(namespace: str, sandbox: ReadySandbox) -> list[str]:
    """The values of the sandbox container's secret env as it started (one exec); none where
    it cannot be asked."""
    argv = run_scripts.started_secrets_argv()
    with contextlib.suppress(KubeError):
        done = kube_exec.run(namespace, sandbox.pod, SANDBOX_CONTAINER, argv)
        if done.exit_code == 0:
            return run_scripts.parse_started_secrets(done.stdout)
    return []


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
    """Delete the sandbox a ``reuse: none`` run made (or took from a pool), if it is still the
    one it controls."""
    if spec.sandbox_ref is not None or spec.effective_reuse != Reuse.NONE or not name:
        return
    meta = run["metadata"]
    found = CACHE.get("Sandbox", meta["namespace"], name)
    if found is not None and controlled_by(found, meta["uid"]):
        kube.delete("Sandbox", meta["namespace"], name, found["metadata"]["uid"])


def ended_in(run: Obj, name: str | None) -> None:
    """Mark the end of the run on its sandbox, when that is snapshotted after each run: the
    sandbox's reconcile takes the snapshot."""
    namespace = run["metadata"]["namespace"]
    found = CACHE.get("Sandbox", namespace, name) if name else None
    if found is None or found["metadata"].get("deletionTimestamp"):
        return
    if ((found.get("spec") or {}).get("lifecycle") or {}).get("snapshot") != "after-run":
        return
    annotations = {LAST_RUN_ANNOTATION: run["metadata"]["uid"][:8]}
    kube.patch("Sandbox", namespace, str(name), {"metadata": {"annotations": annotations}})


def kill(namespace: str, run_uid: str, pod: str) -> None:
    """Kill a running harness's process group (the run is being deleted)."""
    kube_exec.run(namespace, pod, SANDBOX_CONTAINER, run_scripts.signal_argv(run_uid, "KILL"))


def invocation(
    namespace: str, spec: AgentRunSpec, sandbox: ReadySandbox, model_url: str | None = None
) -> Invocation:
    """How the run's harness starts: through Paddock's gate when the sandbox has a policy
    and the harness has a gate; ``model_url``: the gateway's model route, which holds its key."""
    harness = HARNESSES[spec.harness]
    policy = command_policy(namespace, sandbox)
    workspace = workspace_context(workspace_of(namespace, sandbox), str(spec.harness))
    workspace = replace(workspace, model_url=model_url)
    if harness.gate is not None and isinstance(policy, SandboxPolicySpec):
        return harness.gate.invocation(spec, policy, workspace)
    return harness.invocation(spec, workspace)


def is_gated(spec: AgentRunSpec, sandbox: ReadySandbox) -> bool:
    """Whether the run's harness goes through the gate (its sidecar runs a server for it)."""
    return HARNESSES[spec.harness].gate is not None and sandbox.policy.label is not None


def prepare(namespace: str, sandbox: ReadySandbox, run_id: str, invocation: Invocation) -> str:
    """Write the run's control files (its harness script among them) in the sandbox's
    sidecar, and start the gate's server for a gated run; what went wrong, or ''."""
    files = {**invocation.files, "harness": invocation.script}
    argv = gate_scripts.prepare_argv(run_id, gated=invocation.gated)
    payload = gate_scripts.prepare_payload(files, gated=invocation.gated)
    try:
        result = kube_exec.run(namespace, sandbox.pod, GATE_CONTAINER, argv, stdin=payload)
    except KubeError as exc:
        return (
            f"its sidecar {GATE_CONTAINER} cannot be reached ({exc.message}); a sandbox pod "
            "made by an operator older than the sidecar has none: pause and resume the Sandbox"
        )
    if result.exit_code == 0:
        return ""
    return f"its sidecar could not prepare it (exit {result.exit_code}): {result.stderr[-500:]}"


def poll(namespace: str, pod: str, run_id: str, cursor: dict[str, int]) -> run_scripts.Poll:
    """What the run's journals hold past ``cursor``, and whether its harness is done."""
    argv = run_scripts.poll_argv(
        run_id, cursor.get("stdout", 0), cursor.get("files", 0), journal.POLL_BYTES
    )
    result = kube_exec.run(namespace, pod, SANDBOX_CONTAINER, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"poll exited {result.exit_code}: {result.stderr.strip()[-500:]}")
    return run_scripts.parse_poll(result.stdout)


def poll_gate(namespace: str, sandbox: ReadySandbox, run_id: str, after: str) -> GatePoll:
    """The gate's server's state and the requests waiting, from the sandbox's sidecar."""
    argv = gate_scripts.poll_argv(run_id, after)
    result = kube_exec.run(namespace, sandbox.pod, GATE_CONTAINER, argv)
    if result.exit_code != 0:
        raise RuntimeError(f"gate poll exited {result.exit_code}: {result.stderr[-500:]}")
    return gate_scripts.parse_poll(result.stdout)


def close_gate(namespace: str, sandbox: ReadySandbox, run_id: str) -> None:
    """Stop the run's gate server and remove its control files (the run ended)."""
    with contextlib.suppress(KubeError):
        kube_exec.run(namespace, sandbox.pod, GATE_CONTAINER, gate_scripts.close_argv(run_id))


def workspace_context(spec: WorkspaceSpec, harness: str) -> WorkspaceContext:
    """What the Workspace gives the agent, for a harness that does not read it from the
    workspace's files."""
    return WorkspaceContext(
        instructions=render_agents_md(spec),
        skills=agent_skills(spec),
        mcp=mcp_servers(spec).get(harness, {}),
    )


def judge_gate(
    namespace: str,
    spec: AgentRunSpec,
    sandbox: ReadySandbox,
    requests: dict[str, bytes],
    asking: gating.Asking,
    hosts: set[str] = frozenset(),  # type: ignore[assignment]
) -> gating.Answered | None:
    """Judge the requests the harness's gate sent (through the sidecar), the hosts the egress
    gateway asked about that are not approvals yet, and the approvals pending; None when there
    is nothing to judge."""
    gate = HARNESSES[spec.harness].gate
    pending = any(a.state == ApprovalState.PENDING for a in asking.approvals)
    new_hosts = hosts - {a.target for a in asking.approvals if a.kind == "network"}
    if not ((requests and gate is not None) or pending or new_hosts):
        return None
    policy = command_policy(namespace, sandbox)
    if policy is None:
        return None
    if isinstance(policy, str):  # gone or invalid since the launch: nothing is allowed
        policy = SandboxPolicySpec.model_validate({"commands": {"default": "deny"}})
    scripts = workspace_scripts(namespace, sandbox) if requests else {}
    request_of = gate.request_of if gate is not None else _no_request
    return gating.answer(requests, policy, scripts, request_of, asking, hosts)


def _no_request(_: dict[str, Any]) -> None:
    return None


def send_answers(
    namespace: str, sandbox: ReadySandbox, run_id: str, answered: gating.Answered
) -> None:
    """Give the gate its answers, through the sandbox's sidecar."""
    if not answered.answers:
        return
    payload = gate_scripts.answer_payload(answered.answers)
    result = kube_exec.run(
        namespace, sandbox.pod, GATE_CONTAINER, gate_scripts.answer_argv(run_id), stdin=payload
    )
    if result.exit_code != 0:  # the step is retried, and the requests come again
        raise RuntimeError(f"answering the gate exited {result.exit_code}: {result.stderr}")
    metrics.policy_decided(answered.decisions, "harness")
