"""Which sandbox a run uses: the one it names, or one made from its template. Pure: the
service reads the objects and makes the writes a verdict asks for.

``reuse: thread`` finds the thread's sandbox again by a key hashed from the namespace, the
thread, the Workspace's hash and the whole template (image, policy, runtime class, resources,
storage, placement, lifecycle), so a changed Workspace or template moves the thread to a fresh
sandbox instead of leaving it in a stale one; the run that makes it says what changed.
``reuse: none`` makes a sandbox owned by the run, removed when the run ends.

One run at a time uses a sandbox, and one at a time runs of a thread: a run whose sandbox (or
thread) another run holds waits, and runs waiting for the same sandbox start in the order
they were created.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from paddock import GROUP, VERSION
from paddock.api.agentrun import TERMINAL_PHASES, AgentRunSpec, Reuse, RunPhase
from paddock.api.common import stored_status
from paddock.api.errors import describe
from paddock.api.reasons import RunReason as R
from paddock.api.sandbox import Sandbox, SandboxPhase
from paddock.api.workspace import WorkspaceStatus
from paddock.policy.choice import PolicyChoice, choose_policy, from_label
from paddock.vocab.names import (
    MANAGED_BY,
    RUN_LABEL,
    THREAD_KEY_LABEL,
    THREAD_LABEL,
)
from paddock.vocab.ownership import controlled_by, owned_by

Obj = dict[str, Any]


@dataclass(frozen=True)
class ReadySandbox:
    name: str
    pod: str
    workspace: str
    uid: str = ""  # the Sandbox's: its pod must be controlled by it
    policy: PolicyChoice = field(default_factory=PolicyChoice)  # what its commands must pass
    restored_from: str | None = None  # the VolumeSnapshot its volume started from, if any
    pool: str | None = None  # the SandboxPool the run named, if it named one
    claimed: bool = False  # taken from that pool (else made from its template)


@dataclass(frozen=True)
class Waiting:
    name: str | None
    reason: R
    message: str


@dataclass(frozen=True)
class Unusable:
    name: str
    reason: R
    message: str


@dataclass(frozen=True)
class Verdict:
    """Where the run's sandbox stands, and what to do about it: create it from the template,
    or mark it active (which resumes a sandbox paused for being idle)."""

    state: ReadySandbox | Waiting | Unusable
    create: Obj | None = None
    touch: bool = False


def thread_key(namespace: str, spec: AgentRunSpec, workspace_hash: str) -> str:
    """The thread's sandbox's key: everything it is made from. Every field of the template is
    in it, so that no change to how a sandbox is made leaves the thread in the old one."""
    template = spec.sandbox_template
    assert template is not None
    material = [namespace, spec.thread_id, workspace_hash, template.to_api()]
    return _digest(material)


def thread_label(namespace: str, thread_id: str | None) -> str:
    """The thread alone (its sandboxes whatever they were made from)."""
    return _digest([namespace, thread_id])


def _digest(material: list[Any]) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def moved_from(namespace: str, spec: AgentRunSpec, name: str, sandboxes: list[Obj]) -> Obj | None:
    """The sandbox the thread was in before its template or Workspace changed: the newest of
    the thread's others in ``sandboxes`` (the namespace's), if any."""
    label = thread_label(namespace, spec.thread_id)
    before = [
        sandbox
        for sandbox in sandboxes
        if (sandbox["metadata"].get("labels") or {}).get(THREAD_LABEL) == label
        and sandbox["metadata"]["name"] != name
        and not sandbox["metadata"].get("deletionTimestamp")
    ]
    return max(before, key=lambda s: str(s["metadata"].get("creationTimestamp", "")), default=None)


def moved_message(before: Obj, spec: AgentRunSpec, name: str, workspace_hash: str) -> str:
    """What the run says when it moves its thread from the sandbox ``before`` to ``name``."""
    assert spec.sandbox_template is not None
    was, now = before.get("spec") or {}, spec.sandbox_template.to_api()
    changed = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
    if (before.get("status") or {}).get("workspaceHash", workspace_hash) != workspace_hash:
        changed.append("the Workspace")
    what = ", ".join(changed) or "what its sandbox is made from"
    return (
        f"the thread's sandbox template changed ({what}): the thread moves from Sandbox "
        f"{before['metadata']['name']} (left as it is) to a new Sandbox {name}; waiting for Ready"
    )


def workspace_hash_of(workspace: Obj | None) -> str:
    """The hash a Workspace's status gives (empty: not found, or not validated yet)."""
    if workspace is None:
        return ""
    return stored_status(WorkspaceStatus, workspace).hash or ""


def sandbox_name(run: Obj, spec: AgentRunSpec, workspace_hash: str | None) -> str | Waiting:
    """The name of the run's sandbox, or why it cannot be known yet. ``workspace_hash`` is the
    template Workspace's (None: not found or not validated yet)."""
    if spec.sandbox_ref is not None:
        return spec.sandbox_ref.name
    assert spec.sandbox_template is not None
    meta = run["metadata"]
    if spec.effective_reuse == Reuse.THREAD:
        if not workspace_hash:
            return Waiting(
                None,
                R.WORKSPACE_NOT_READY,
                f"waiting for Workspace {spec.sandbox_template.workspace_ref.name} to be "
                "validated (its hash names the thread's sandbox)",
            )
        return f"thread-{thread_key(meta['namespace'], spec, workspace_hash)}"
    # One per run; the uid keeps names unique when a run is deleted and created again.
    return f"{meta['name'][:40].rstrip('-.')}-{meta['uid'][:8]}"


def template_sandbox(run: Obj, spec: AgentRunSpec, name: str, workspace_hash: str) -> Obj:
    """The Sandbox a template run creates, labelled with the run that made it: a thread's is
    labelled with its key too and outlives the run; a run's own is owned by the run."""
    meta = run["metadata"]
    assert spec.sandbox_template is not None
    sandbox: Obj = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Sandbox",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": {**MANAGED_BY}},
        "spec": spec.sandbox_template.to_api(),
    }
    labels = sandbox["metadata"]["labels"]
    labels[RUN_LABEL] = meta["uid"]  # the run that made it
    if spec.effective_reuse == Reuse.THREAD:
        labels[THREAD_KEY_LABEL] = thread_key(meta["namespace"], spec, workspace_hash)
        labels[THREAD_LABEL] = thread_label(meta["namespace"], spec.thread_id)
        return sandbox
    return owned_by(sandbox, run)


def judge(
    run: Obj,
    spec: AgentRunSpec,
    name: str,
    found: Obj | None,
    workspace_hash: str,
    before: Obj | None = None,
) -> Verdict:
    """The verdict on the Sandbox ``name`` as found (None: it does not exist). ``before``: the
    thread's sandbox before its template changed, which a new one replaces."""
    namespace = run["metadata"]["namespace"]
    if found is None:
        if spec.sandbox_ref is not None:
            message = f"Sandbox {name} not found in namespace {namespace}"
            return Verdict(Waiting(name, R.SANDBOX_NOT_FOUND, message))
        created = template_sandbox(run, spec, name, workspace_hash)
        if before is not None:
            message = moved_message(before, spec, name, workspace_hash)
            return Verdict(Waiting(name, R.THREAD_MOVED, message), create=created)
        message = f"created Sandbox {name}; waiting for Ready"
        return Verdict(Waiting(name, R.SANDBOX_CREATED, message), create=created)
    pool = _pool_controlling(found)
    if spec.sandbox_ref is not None and pool is not None:
        message = (
            f"Sandbox {name} is a member of SandboxPool {pool}, not yet taken: a run takes a "
            f"member through its pool (poolRef: {{name: {pool}}}), never by its name"
        )
        return Verdict(Unusable(name, R.SANDBOX_IN_POOL, message))
    foreign = _not_the_runs(run, spec, found, workspace_hash)
    if foreign is not None:
        return Verdict(Unusable(name, R.NAME_CONFLICT, foreign))
    try:
        sandbox = Sandbox.model_validate(found)
    except ValidationError as exc:
        message = f"Sandbox {name} is invalid: " + "; ".join(describe(exc))
        return Verdict(Waiting(name, R.SANDBOX_INVALID, message))
    return _by_phase(name, sandbox)


def _pool_controlling(sandbox: Obj) -> str | None:
    """The name of the SandboxPool that controls the Sandbox (one of its members, untaken)."""
    for ref in sandbox["metadata"].get("ownerReferences") or []:
        if (
            ref.get("controller")
            and ref.get("kind") == "SandboxPool"
            and str(ref.get("apiVersion", "")).startswith(f"{GROUP}/")
        ):
            return str(ref.get("name"))
    return None


def _not_the_runs(run: Obj, spec: AgentRunSpec, found: Obj, workspace_hash: str) -> str | None:
    """Why a Sandbox found under a template run's name is not the one the run would have made
    (None: it is): a run's own is controlled by the run, a thread's carries the thread's key."""
    if spec.sandbox_ref is not None:
        return None  # named by the run's author: theirs to choose (but a pool's member)
    meta = run["metadata"]
    name = found["metadata"]["name"]
    if spec.effective_reuse == Reuse.THREAD:
        key = thread_key(meta["namespace"], spec, workspace_hash)
        labels = found["metadata"].get("labels") or {}
        if labels.get(THREAD_KEY_LABEL) != key:
            return (
                f"Sandbox {name} exists but is not this thread's (its {THREAD_KEY_LABEL} differs)"
            )
        return _not_the_template(found, spec)
    if controlled_by(found, meta["uid"]):
        return None
    return f"Sandbox {name} exists but was not created by this run; the run does not use it"


def _not_the_template(found: Obj, spec: AgentRunSpec) -> str | None:
    """Why a thread's sandbox is not what its template makes (None: it is), judged by its spec,
    never by its labels, which anyone who may create a Sandbox can write: one made by someone
    else under the thread's name, or changed since (a looser policy, another image). Only
    ``lifecycle.paused`` is a person's to set. (An invalid spec is judged invalid after.)"""
    template = spec.sandbox_template
    assert template is not None
    try:
        found_spec = Sandbox.model_validate(found).spec
    except ValidationError:
        return None
    lifecycle = found_spec.lifecycle.model_copy(update={"paused": template.lifecycle.paused})
    if found_spec.model_copy(update={"lifecycle": lifecycle}).to_api() == template.to_api():
        return None
    name = found["metadata"]["name"]
    return (
        f"Sandbox {name} carries this thread's labels but its spec is not the run's "
        "sandboxTemplate (made by someone else, or changed since): the run does not use it. "
        "Delete it, and the thread's next run makes it anew"
    )


def check_pod(state: ReadySandbox, pod: Obj | None) -> ReadySandbox | Waiting | Unusable:
    """A Ready sandbox is used only through its own pod: one its Sandbox controls."""
    if pod is None:
        message = f"waiting for Sandbox {state.name} to be Ready (its pod {state.pod} is gone)"
        return Waiting(state.name, R.SANDBOX_NOT_READY, message)
    if pod["metadata"].get("deletionTimestamp"):
        message = f"waiting for Sandbox {state.name} to be Ready (its pod {state.pod} is ending)"
        return Waiting(state.name, R.SANDBOX_NOT_READY, message)
    if not controlled_by(pod, state.uid):
        message = (
            f"pod {state.pod} does not belong to Sandbox {state.name}; the run does not exec "
            "into it"
        )
        return Unusable(state.name, R.NAME_CONFLICT, message)
    return state


def policy_of(sandbox: Sandbox) -> PolicyChoice:
    """The policy a Sandbox runs under: the one its spec names, its inline one, or the
    operator's default its status records (none when it records none)."""
    spec, namespace = sandbox.spec, str(sandbox.metadata.get("namespace") or "")
    if spec.policy_ref is not None or spec.policy is not None:
        return choose_policy(spec, namespace, None)
    return from_label(sandbox.status.policy if sandbox.status else None, None)


def _by_phase(name: str, sandbox: Sandbox) -> Verdict:
    status = sandbox.status
    phase = status.phase if status else None
    message = (status.message if status else None) or ""
    if phase == SandboxPhase.READY and status is not None:
        pod = status.pod_name or name
        uid = str(sandbox.metadata.get("uid") or "")
        policy = policy_of(sandbox)
        workspace = sandbox.spec.workspace_ref.name
        return Verdict(ReadySandbox(name, pod, workspace, uid, policy, status.restored_from))
    if phase == SandboxPhase.FAILED:
        return Verdict(Unusable(name, R.SANDBOX_FAILED, f"Sandbox {name} failed: {message}"))
    if phase == SandboxPhase.PAUSED:
        if sandbox.spec.lifecycle.paused:
            message = f"Sandbox {name} is paused (spec.lifecycle.paused)"
            return Verdict(Waiting(name, R.SANDBOX_PAUSED, message))
        # Paused for being idle: activity resumes it.
        message = f"Sandbox {name} was idle; resuming it"
        return Verdict(Waiting(name, R.SANDBOX_RESUMING, message), touch=True)
    detail = f"phase {phase or 'Pending'}" + (f": {message}" if message else "")
    message = f"waiting for Sandbox {name} to be Ready ({detail})"
    return Verdict(Waiting(name, R.SANDBOX_NOT_READY, message))


def busy(run: Obj, spec: AgentRunSpec, sandbox: str, others: list[Obj]) -> Waiting | None:
    """Whether the run must wait for ``sandbox``: another run of it (or of the run's thread)
    holds it (has launched, or waits for approval), or waits for it and was created before
    this one. A run waiting for its own Secrets or prompt is not in the line."""
    meta = run["metadata"]
    me = (meta.get("creationTimestamp") or "", meta["name"])
    holders, ahead = [], []
    for other in others:
        other_meta, status = other["metadata"], other.get("status") or {}
        phase = status.get("phase")
        if other_meta.get("uid") == meta.get("uid") or phase in TERMINAL_PHASES:
            continue
        if not _shares(spec, sandbox, other):
            continue
        created = (other_meta.get("creationTimestamp") or "", other_meta["name"])
        if status.get("completionDigest") or phase in (
            RunPhase.RUNNING,
            RunPhase.AWAITING_APPROVAL,
        ):
            holders.append(other_meta["name"])
        elif phase == RunPhase.WAITING_FOR_SANDBOX and created < me:
            ahead.append(created)
    if not holders and not ahead:
        return None
    ahead.sort()
    if holders:
        said = f"AgentRun {holders[0]} is running in it"
        line = f", and {len(ahead)} run(s) created earlier wait for it too" if ahead else ""
    else:
        said = f"AgentRun {ahead[0][1]} was created first and waits for it too"
        line = f", with {len(ahead) - 1} more" if len(ahead) > 1 else ""
    message = f"waiting for Sandbox {sandbox}: {said}{line} (one run at a time uses a sandbox)"
    return Waiting(sandbox, R.SANDBOX_BUSY, message)


def queue_view(run: Obj) -> Obj:
    """What ``busy`` reads of a run (all the operator keeps of the runs it watches)."""
    meta, spec, status = run["metadata"], run.get("spec") or {}, run.get("status") or {}
    return {
        "kind": run["kind"],
        "metadata": _picked(
            meta, "name", "namespace", "uid", "creationTimestamp", "resourceVersion"
        ),
        "spec": _picked(spec, "sandboxRef", "sandboxTemplate", "threadId", "reuse"),
        "status": _picked(status, "phase", "sandboxName", "completionDigest"),
    }


def _picked(obj: Obj, *keys: str) -> Obj:
    return {key: obj[key] for key in keys if key in obj}


def _shares(spec: AgentRunSpec, sandbox: str, other: Obj) -> bool:
    """Whether the other run uses the same sandbox, or belongs to the same thread."""
    other_spec = other.get("spec") or {}
    status = other.get("status") or {}
    used = status.get("sandboxName") or (other_spec.get("sandboxRef") or {}).get("name")
    if used == sandbox:
        return True
    return spec.effective_reuse == Reuse.THREAD and same_thread(spec, other)


def same_thread(spec: AgentRunSpec, other: Obj) -> bool:
    """Whether the other run (as ``queue_view`` keeps it) is a ``reuse: thread`` run of the
    run's thread."""
    other_spec = other.get("spec") or {}
    return bool(
        other_spec.get("sandboxTemplate")
        and other_spec.get("threadId") == spec.thread_id
        and other_spec.get("reuse", Reuse.THREAD) == Reuse.THREAD
    )
