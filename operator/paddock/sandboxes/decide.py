"""Deciding a Sandbox: from what was observed (its spec, Workspace, policy, Secrets, and the
objects it owns) to a plan. Pure, and safe to run at any time: a second decision on the same
world plans nothing new.

The order of the checks is the lifecycle: deletion, then what the sandbox is made from (spec,
Workspace, policy, Secrets, size), then its owned objects, pause, and the pod's progress.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from paddock.api.common import (
    ConditionStatus,
    stored_status,
)
from paddock.api.conditions import get_condition, is_true
from paddock.api.fields import (
    parse_duration,
)
from paddock.api.policy import Decision, SandboxPolicySpec
from paddock.api.reasons import ConditionType as C
from paddock.api.reasons import SandboxReason as R
from paddock.api.sandbox import SandboxPhase, SandboxSpec, SandboxStatus, SandboxTimings
from paddock.policy.gate import Judged, blocking, judge_setup
from paddock.render.files import CONFIGMAP_LIMIT, configmap_size, render_files_configmap
from paddock.render.network_policy import Gateway, through_gateway
from paddock.render.projections import Projection, render_projection
from paddock.render.sandbox import SandboxInputs, render_sandbox_pod
from paddock.render.snapshot import archive_restored, restored_from
from paddock.sandboxes.draft import StatusDraft
from paddock.sandboxes.inputs import Blocked, SandboxWorld, resolve_inputs
from paddock.sandboxes.observe import observe, serving
from paddock.sandboxes.owned import (
    RETRY_CONFLICT,
    name_conflict,
    owned_objects,
    relabelled,
    retired,
    stranded,
    workspace_owner,
)
from paddock.sandboxes.plan import Create, Delete, Plan, Write
from paddock.sandboxes.volume import plan_volume, take_snapshots, unpack_step, volume_hash
from paddock.times import parse_time
from paddock.vocab import names
from paddock.vocab.ownership import owned_by

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


def _new_status(old: SandboxStatus, generation: int | None) -> SandboxStatus:
    """The status a reconcile starts from: the stored one's conditions, and whether a run
    ever held the sandbox (a run wrote it; kept for good)."""
    return SandboxStatus(
        observed_generation=generation, conditions=old.conditions, ever_held=old.ever_held
    )


def decide_sandbox(world: SandboxWorld, default_image: str, now: datetime) -> Plan:
    meta = world.sandbox["metadata"]
    old = stored_status(SandboxStatus, world.sandbox)
    generation = meta.get("generation")
    draft = StatusDraft(old, generation, now, _new_status(old, generation))
    if meta.get("deletionTimestamp"):
        return draft.finish(SandboxPhase.TERMINATING, R.DELETING, "The sandbox is being deleted.")
    inputs = resolve_inputs(world, default_image)
    if isinstance(inputs, Blocked):
        draft.condition(C.READY, False, inputs.reason, inputs.message)
        return draft.finish(inputs.phase, inputs.reason, inputs.message, None, inputs.retry_after)
    sandbox_inputs, policy = inputs
    projection = render_projection(sandbox_inputs.workspace)
    configmap = _files(world, sandbox_inputs, projection)
    conflict = name_conflict(world, configmap["metadata"]["name"])
    if conflict is not None:
        draft.condition(C.READY, False, R.NAME_CONFLICT, conflict)
        return draft.finish(SandboxPhase.PENDING, R.NAME_CONFLICT, conflict, None, RETRY_CONFLICT)
    draft.status.policy = world.policy_choice.label
    _egress_condition(draft, policy, world.network.gateway)
    prepared = is_true(draft.status.conditions, C.SETUP_COMPLETE)
    judged = [] if prepared else judge_setup(policy, sandbox_inputs.workspace)
    gated = _gate(draft, world, judged)
    if gated is not None:
        return gated
    if configmap_size(configmap) > CONFIGMAP_LIMIT:
        message = (
            "The Workspace's instructions, skills and setup add up to more than 900 KiB; move "
            "large files into the repository or a git skill."
        )
        draft.condition(C.READY, False, R.WORKSPACE_TOO_LARGE, message)
        return draft.finish(SandboxPhase.FAILED, R.WORKSPACE_TOO_LARGE, message)
    pvc = plan_volume(draft, world, sandbox_inputs)
    if isinstance(pvc, Plan):
        return pvc
    writes = owned_objects(world, sandbox_inputs, policy, configmap, pvc)
    draft.status.pvc_name = names.pvc_name(sandbox_inputs.name)
    draft.status.pod_name = names.pod_name(sandbox_inputs.name)
    current_hash = sandbox_inputs.workspace_hash
    _record_preparation(draft, volume_hash(pvc, draft, current_hash), current_hash)
    pause = _pause_reason(sandbox_inputs.sandbox, meta, world.pod, draft)
    expired = _idle_thread(world, sandbox_inputs.sandbox, draft)
    if expired is not None:
        return expired
    if pause is not None:
        plan = _paused(draft, world, sandbox_inputs.sandbox, pause, writes)
        plan.writes += retired(world)
        return plan
    draft.condition(C.PAUSED, False, R.RUNNING, "The sandbox is not paused.")
    files = str(configmap["metadata"]["name"])
    plan = _progress(draft, world, sandbox_inputs, (projection, files), pvc, writes)
    plan.writes += retired(world)  # after the pod is relabelled
    if any(isinstance(w, Create) and w.obj["kind"] == "Pod" for w in plan.writes):
        plan.policy_decisions = [item.decision for item in judged]  # setup runs in this pod
    return plan


def _files(world: SandboxWorld, inputs: SandboxInputs, projection: Projection) -> Obj:
    """The files ConfigMap the sandbox's pod mounts: its Workspace's, as it renders now."""
    workspace = inputs.sandbox.workspace_ref.name
    files = render_files_configmap(inputs.namespace, workspace, inputs.workspace, projection)
    return owned_by(files, workspace_owner(world))


def _gate(draft: StatusDraft, world: SandboxWorld, judged: list[Judged]) -> Plan | None:
    """Setup runs only when the policy allows every command of it: a denied command fails
    the sandbox, one that needs approval keeps it waiting. Either way no pod runs setup (one
    already setting up is deleted), and a policy that changes to allow it lets it go on."""
    block = blocking(judged)
    if block is None:
        return None
    if block.decision == Decision.DENY:
        phase, reason = SandboxPhase.FAILED, R.POLICY_DENIED
    else:
        phase, reason = SandboxPhase.PENDING, R.APPROVAL_REQUIRED
    message = block.message(f"Setup step {block.where}")
    draft.condition(C.READY, False, reason, message)
    writes: list[Write] = [] if world.pod is None else [Delete.of(world.pod)]
    plan = draft.finish(phase, reason, message, writes)
    if plan.notices:
        plan.policy_decisions = [block.decision]
    return plan


def _egress_condition(
    draft: StatusDraft, policy: SandboxPolicySpec | None, gateway: Gateway | None
) -> None:
    """For a policy that names hosts: whether the sandbox reaches the web through the gateway,
    or, without one, not at all (but what network.egress names by address)."""
    if policy is None or policy.network.hosts is None:
        draft.status.conditions = [c for c in draft.status.conditions if c.type != C.EGRESS_GATEWAY]
    elif through_gateway(policy, gateway):
        message = "The sandbox reaches the web only through the egress gateway, by network.hosts."
        draft.condition(C.EGRESS_GATEWAY, True, R.THROUGH_GATEWAY, message)  # as meant: no Event
    elif gateway is None:
        message = (
            "The policy names network.hosts, but the operator runs without an egress gateway "
            "(gateway.enabled in the chart) to let them through: the sandbox reaches no host "
            "by name, only what network.egress names by address."
        )
        draft.noted(C.EGRESS_GATEWAY, False, R.NO_GATEWAY, message)


def _record_preparation(draft: StatusDraft, prepared_hash: str, current_hash: str) -> None:
    """The hash the volume was prepared from (or restored at), and whether that is the
    current Workspace's."""
    draft.status.workspace_hash = prepared_hash
    if prepared_hash != current_hash:
        message = (
            f"The volume holds workspace hash {prepared_hash} (as prepared, or as restored from "
            f"its snapshot); the Workspace's is now {current_hash}. The volume keeps its result: "
            "delete and recreate the Sandbox to prepare it again."
        )
        draft.condition(C.UP_TO_DATE, False, R.WORKSPACE_CHANGED, message)
    else:
        draft.condition(C.UP_TO_DATE, True, R.UP_TO_DATE, "Prepared from the current Workspace.")


def _pause_reason(spec: SandboxSpec, meta: Obj, pod: Obj | None, draft: StatusDraft) -> R | None:
    """Paused by the spec, paused for idleness (until activity after the pause), or not;
    records the last activity."""
    annotated = parse_time((meta.get("annotations") or {}).get(names.ACTIVITY_ANNOTATION))
    ready_at = draft.old.timings.ready_at if draft.old.timings else None
    activity = max((t for t in (annotated, ready_at) if t is not None), default=None)
    if activity is not None:
        draft.status.last_activity_time = activity
    if spec.lifecycle.paused:
        return R.PAUSED
    paused = get_condition(draft.old.conditions, C.PAUSED)
    if paused and paused.status == ConditionStatus.TRUE and paused.reason == R.IDLE_TIMEOUT:
        since = paused.last_transition_time
        # Activity after the idle pause (a run, an exec, the annotation) resumes it.
        resumed = activity is not None and since is not None and activity > since
        return None if resumed else R.IDLE_TIMEOUT
    # The idle clock runs only while the pod serves, from the later of the last activity and
    # the pod's Ready: a resume slower than the timeout is not paused again before it serves.
    serves = serving(pod)
    idle_timeout = spec.lifecycle.idle_timeout
    if not idle_timeout or serves is None:
        return None
    since = max((t for t in (activity, serves.ready_at) if t is not None), default=None)
    too_long = since is not None and draft.now - since > parse_duration(idle_timeout)
    return R.IDLE_TIMEOUT if too_long else None


def _idle_thread(world: SandboxWorld, spec: SandboxSpec, draft: StatusDraft) -> Plan | None:
    """A thread's sandbox, which its runs made, is deleted with its volume once it has gone
    without activity longer than the operator's limit (one a person paused is kept); until
    then it is looked at again when the limit would pass."""
    limit, activity = world.thread_idle_limit, draft.status.last_activity_time
    labels = world.sandbox["metadata"].get("labels") or {}
    made_by_runs = names.THREAD_KEY_LABEL in labels and names.MANAGED_BY.items() <= labels.items()
    if limit is None or activity is None or not made_by_runs or spec.lifecycle.paused:
        return None
    left = (activity + timedelta(seconds=limit) - draft.now).total_seconds()
    if left > 0:
        draft.wake_after = min(left, draft.wake_after or left)
        return None
    message = (
        f"Deleted, with its volume, after {timedelta(seconds=limit)} without activity (the "
        "operator's thread_sandbox_idle_seconds); the thread's next run makes a new sandbox."
    )
    draft.condition(C.READY, False, R.IDLE_EXPIRED, message)
    return draft.finish(
        SandboxPhase.TERMINATING, R.IDLE_EXPIRED, message, [Delete.of(world.sandbox)]
    )


def _paused(
    draft: StatusDraft, world: SandboxWorld, spec: SandboxSpec, reason: R, writes: list[Write]
) -> Plan:
    if world.pod is not None:
        writes.append(Delete.of(world.pod))
    if reason == R.PAUSED:
        message = (
            "Paused: the pod is deleted and the workspace volume kept. Set "
            "spec.lifecycle.paused to false to resume."
        )
    else:
        message = (
            f"Paused after {spec.lifecycle.idle_timeout} without activity; annotate "
            f"{names.ACTIVITY_ANNOTATION} with the current time, or start a run, to resume."
        )
    draft.condition(C.PAUSED, True, reason, message)
    draft.condition(C.READY, False, reason, message)
    return draft.finish(SandboxPhase.PAUSED, reason, message, writes)


def _pod_ending(draft: StatusDraft, pod: Obj, writes: list[Write]) -> Plan:
    """A pod being deleted (paused, replaced) still says Ready until its containers stop: no
    run may take it. Its deletion's event brings the next reconcile, which makes it anew."""
    message = f"Waiting for the sandbox's earlier pod {pod['metadata']['name']} to end."
    draft.condition(C.READY, False, R.STARTING, message)
    return draft.finish(SandboxPhase.PROVISIONING, R.STARTING, message, writes)


def _progress(
    draft: StatusDraft,
    world: SandboxWorld,
    inputs: SandboxInputs,
    rendered: tuple[Projection, str],
    pvc: Obj,
    writes: list[Write],
) -> Plan:
    """The pod's progress: create or replace it (``rendered``: what it projects, and the
    files ConfigMap it mounts), and say where setup stands."""
    projection, files = rendered
    prepared = is_true(draft.status.conditions, C.SETUP_COMPLETE)
    restored = restored_from(pvc)
    pod = world.pod
    writes += relabelled(world, inputs)
    if pod is not None and pod["metadata"].get("deletionTimestamp"):
        return _pod_ending(draft, pod, writes)
    if pod is None:
        # A restored volume holds the prepared workspace: no clone, projection or setup.
        ready_made = prepared or restored is not None
        rendered_pod = render_sandbox_pod(inputs, projection, prepared=ready_made, files=files)
        pod = owned_by(rendered_pod, world.sandbox)
        writes.append(Create(pod))
    # A pod created by this plan is observed as created (starting): the status is written
    # after the create, and the pod's next event would only say that.
    seen = observe(pod, pvc)
    unpack_writes, seen = unpack_step(draft, world, pvc, pod, seen)
    writes += unpack_writes
    if (seen.recreate_pod or stranded(world, files)) and world.pod is not None:
        writes.append(Delete.of(world.pod))
    pvc_name = names.pvc_name(inputs.name)
    if seen.volume_bound is not None:
        bound = R.BOUND if seen.volume_bound else R.VOLUME_PENDING
        draft.condition(
            C.VOLUME_BOUND, seen.volume_bound, bound, f"PersistentVolumeClaim {pvc_name}"
        )
    if seen.setup_complete is not None and not prepared:
        reason = R.PREPARED if seen.setup_complete else seen.reason
        message = "The workspace is cloned and set up." if seen.setup_complete else seen.message
        if seen.setup_complete and restored is not None:
            reason = R.RESTORED
            kind = "archive" if archive_restored(pvc) else "VolumeSnapshot"
            message = f"Restored from {kind} {restored}: setup did not run."
        draft.condition(C.SETUP_COMPLETE, seen.setup_complete, reason, message)
    snapshot_writes, seen = take_snapshots(draft, world, inputs, pvc, seen)
    writes += snapshot_writes
    draft.condition(C.READY, seen.ready, seen.reason, seen.message)
    timings = draft.old.timings
    if seen.ready and (timings is None or timings.ready_at is None):
        ready_at = seen.ready_at or draft.now
        created = parse_time(world.sandbox["metadata"].get("creationTimestamp"))
        timings = SandboxTimings(
            ready_at=ready_at,
            ready_seconds=max((ready_at - created).total_seconds(), 0.0) if created else None,
            setup_seconds=seen.setup_seconds,
        )
    draft.status.timings = timings
    if draft.status.last_activity_time is None and timings is not None:
        draft.status.last_activity_time = timings.ready_at  # being ready is the first activity
    return draft.finish(seen.phase, seen.reason, seen.message, writes)
