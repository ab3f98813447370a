"""The Workspace and Sandbox service: gather what a reconcile needs (from the API), decide
(``decide.py``, ``workspace.py``: pure), apply the plan. Level-based and idempotent: safe to run
at any time, as often as the handlers like; a second run creates nothing twice."""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from paddock import metrics
from paddock.api.agentrun import AgentRunSpec
from paddock.api.errors import describe
from paddock.api.policy import SandboxPolicySpec
from paddock.api.sandbox import SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.kube import client as kube
from paddock.kube.cache import CACHE
from paddock.kube.errors import ConflictError, InvalidError, KubeError
from paddock.objectstore.client import Bucket, configured_store
from paddock.policy.choice import choose_policy
from paddock.render.cluster_addresses import ClusterAddresses, cluster_network
from paddock.render.snapshot import restored_from
from paddock.runs.scrubbing import Scrubber
from paddock.sandboxes import observe
from paddock.sandboxes.archives import Notify
from paddock.sandboxes.decide import decide_sandbox
from paddock.sandboxes.fence import fence_name
from paddock.sandboxes.inputs import SandboxWorld, placed
from paddock.sandboxes.plan import Loaded, scrubbed
from paddock.sandboxes.policy import decide_policy
from paddock.sandboxes.refusals import refused, taken
from paddock.sandboxes.snapshots import SnapshotCluster
from paddock.sandboxes.workspace import decide_workspace, load_spec
from paddock.sandboxes.writes import ARCHIVES, NameTakenError, Outcome, make_write, report_status
from paddock.settings import OperatorSettings
from paddock.times import utcnow
from paddock.vocab import names

Obj = dict[str, Any]
RETRY_REFUSED = 10.0  # seconds before the first retry of a refused write, doubling after
MAX_RETRY_REFUSED = 600.0
NAMESPACE_WAIT = 1.0  # seconds before looking again at a sandbox whose Namespace is unseen
ADDRESSES = ClusterAddresses()
log = logging.getLogger("paddock.sandboxes")


def watched(event_type: str | None, obj: Obj) -> Obj | None:
    """A watch event of an object reconciles read: kept, so that they read nothing. The
    version seen before this one, if any."""
    meta = obj["metadata"]
    before = CACHE.peek(str(obj["kind"]), meta.get("namespace") or "", meta["name"])
    CACHE.seen(event_type, obj)
    return before


def forget_watched() -> None:
    """At start-up: the watches fill the cache again from their first listing, which keeps of
    each pod only what a reconcile reads."""
    CACHE.clear()
    CACHE.keep("Pod", observe.pod_view)
    ADDRESSES.clear()


def configure_archives(config: OperatorSettings, notify: Notify) -> None:
    """At start-up: snapshots may be archives when the settings allow them and name a bucket
    (``notify`` asks for a reconcile when a transfer ends)."""
    store = configured_store(config.s3.store())
    if config.snapshots.store == "volume" or store is None:
        ARCHIVES.configure(None)
        return
    prefix = config.s3.prefix.strip("/")
    timeout = config.snapshots.archive_timeout_seconds
    ARCHIVES.configure(Bucket(store), prefix, timeout, notify, archived_secrets)


def archived_secrets(namespace: str, sandbox: str) -> list[str]:
    """The secret values a sandbox's files may hold, masked in its archives: its Workspace's
    and those of the runs in the namespace that ran in it."""
    refs: list[tuple[str, str]] = []
    found = CACHE.get("Sandbox", namespace, sandbox)
    with contextlib.suppress(ValidationError):
        if found is not None:
            workspace_name = SandboxSpec.model_validate(found.get("spec") or {}).workspace_ref.name
            workspace = CACHE.get("Workspace", namespace, workspace_name)
            refs += WorkspaceSpec.model_validate((workspace or {}).get("spec") or {}).secret_refs()
    for run in CACHE.listed("AgentRun", namespace):
        if (run.get("status") or {}).get("sandboxName") == sandbox:
            with contextlib.suppress(ValidationError):
                refs += AgentRunSpec.model_validate(run.get("spec") or {}).secret_refs()
    return list(kube.secret_values(namespace, refs).values())


def stop_archives() -> None:
    ARCHIVES.stop()


def sandbox_deleted(obj: Obj) -> None:
    ARCHIVES.forget(obj["metadata"]["uid"])


def cluster_address_seen(event_type: str | None, obj: Obj) -> bool:
    """A watch event of a Node or of the API server's EndpointSlice: whether the cluster's own
    addresses, which every sandbox's fence leaves out, changed."""
    return ADDRESSES.seen(event_type, obj)


def reconcile_workspace(body: Obj, default_image: str) -> Outcome:
    meta = body["metadata"]
    spec = load_spec(body)
    missing = (
        kube.missing_secret_keys(meta["namespace"], spec.spec.secret_refs()) if spec.spec else []
    )
    plan = decide_workspace(body, spec, missing, default_image, utcnow())
    return report_status("Workspace", body, plan)


def reconcile_policy(body: Obj) -> Outcome:
    return report_status("SandboxPolicy", body, decide_policy(body, utcnow()))


def reconcile_sandbox(body: Obj, config: OperatorSettings, retry: int = 0) -> Outcome:
    """Reconcile one Sandbox; ``retry`` counts the attempts in a row that were refused. One
    at a time per Sandbox: its own handler and its parts' events come from several threads,
    and two decisions from the same world would both create what is missing."""
    meta = body["metadata"]
    with _one_at_a_time(meta["namespace"], meta["name"]):
        body = CACHE.freshest(body)
        # A Sandbox not reported on yet (its status only the schema's default) has had
        # nothing made for it (or nothing that reported): its parts are taken to be missing,
        # unless the watches showed them, and are not read. A create whose name is taken says
        # otherwise; then the Sandbox is decided again from what the API server has.
        reported = (body.get("status") or {}).get("observedGeneration")
        return _reconcile_sandbox(body, config, retry, new=not reported)


def _reconcile_sandbox(
    body: Obj, config: OperatorSettings, retry: int, new: bool, again: bool = True
) -> Outcome:
    world = gather_sandbox(body, config.policy_default, config.policy_required, new=new)
    world = replace(world, secrets_refused=config.secrets_in_sandbox == "refuse")
    namespace = body["metadata"]["namespace"]
    workspace = world.spec.spec.workspace_ref.name if world.spec.spec else ""
    world = replace(
        world,
        spec=placed(world.spec, config),
        network=cluster_network(config.network, config.gateway, ADDRESSES.all()),
        snapshots=snapshot_cluster(namespace, workspace, config),
        restore_timeout=config.snapshots.restore_timeout_seconds,
        thread_idle_limit=config.thread_sandbox_idle_limit,
        transfer=ARCHIVES.state(body["metadata"]["uid"]),
    )
    if not world.namespace_uid and world.spec.spec is not None:
        # The Namespace's watch has not listed it yet (the operator just started): the
        # baseline it controls cannot be made before.
        return Outcome(retry_after=NAMESPACE_WAIT)
    plan = decide_sandbox(world, config.sandbox_image, utcnow())
    for write in plan.writes:
        try:
            made = make_write(body, write)
            if not made and again:  # a name taken since the world was read: decide again
                return _reconcile_sandbox(body, config, retry, new=False, again=False)
        except NameTakenError as exc:
            plan = taken(world, plan, exc.kind, exc.name, utcnow())
            break
        except ConflictError:
            # Changed since it was read, so a watch event brings the next look: decide again
            # then (a retry now would be a second reconcile of the same change).
            break
        except KubeError as exc:
            delay = min(RETRY_REFUSED * 2**retry, MAX_RETRY_REFUSED)
            invalid = isinstance(exc, InvalidError)
            plan = refused(
                world, plan, write, exc.message, invalid=invalid, now=utcnow(), retry_after=delay
            )
            break
    else:
        metrics.policy_decided(plan.policy_decisions, "setup")
    return report_status("Sandbox", body, scrubbed(plan, world.scrubber))


# Striped: a bounded set of locks, one per Sandbox name's hash; two sandboxes that share one
# wait for each other now and then, which costs little next to a reconcile's API calls.
_LOCKS = tuple(threading.Lock() for _ in range(256))


def _one_at_a_time(namespace: str, name: str) -> threading.Lock:
    return _LOCKS[hash((namespace, name)) % len(_LOCKS)]


def known_sandbox(namespace: str, name: str) -> Obj | None:
    """The Sandbox as the watch last showed it (no read)."""
    return CACHE.peek("Sandbox", namespace, name)


def reconcile_sandbox_named(
    namespace: str, name: str, config: OperatorSettings, retry: int = 0
) -> tuple[Obj, Outcome] | None:
    """Reconcile the Sandbox of that name, when it still exists: the Sandbox as read, and
    the outcome."""
    body = CACHE.get("Sandbox", namespace, name)
    return None if body is None else (body, reconcile_sandbox(body, config, retry))


def snapshot_cluster(namespace: str, workspace: str, config: OperatorSettings) -> SnapshotCluster:
    """The StorageClasses, VolumeSnapshotClasses and Paddock's VolumeSnapshots of the
    namespace, as the watches show them, and the Workspace's archives, as the index has them."""
    archives: tuple[Obj, ...] = ()
    if ARCHIVES.configured and workspace:
        stored = ARCHIVES.archives(namespace, workspace)
        archives = tuple(stored + ARCHIVES.being_made(namespace, workspace))
    return SnapshotCluster(
        tuple(CACHE.listed("StorageClass")),
        tuple(CACHE.listed("VolumeSnapshotClass")),
        tuple(CACHE.listed("VolumeSnapshot", namespace)),
        archives,
        config.snapshots.store if ARCHIVES.configured else "volume",
    )


def _load(kind: str, model: type[Any], namespace: str, name: str) -> Loaded[Any]:
    obj = CACHE.get(kind, namespace, name)
    if obj is None:
        return Loaded(name)
    uid = obj["metadata"].get("uid")
    try:
        return Loaded(name, model.model_validate(obj.get("spec") or {}), uid=uid)
    except ValidationError as exc:
        return Loaded(name, error="; ".join(describe(exc)), uid=uid)


def gather_sandbox(
    body: Obj, policy_default: str | None = None, policy_required: bool = False, new: bool = False
) -> SandboxWorld:
    """The Sandbox's references and owned objects, as they are now (``new``: its owned objects
    as the watches showed them, without asking the API server for the ones they did not)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    try:
        spec = SandboxSpec.model_validate(body.get("spec") or {})
    except ValidationError as exc:
        return SandboxWorld(body, Loaded(name, error="; ".join(describe(exc))))
    workspace: Loaded[WorkspaceSpec] = _load(
        "Workspace", WorkspaceSpec, namespace, spec.workspace_ref.name
    )
    choice = choose_policy(spec, namespace, policy_default)
    policy: Loaded[SandboxPolicySpec] | None = None
    if choice.name is not None:
        policy_namespace = choice.namespace or namespace
        policy = _load("SandboxPolicy", SandboxPolicySpec, policy_namespace, choice.name)
    refs = workspace.spec.secret_refs() if workspace.spec else []
    values = kube.secret_values(namespace, refs)
    missing = [f"{name}/{key}" for name, key in refs if (name, key) not in values]
    part = CACHE.peek if new else CACHE.get
    fence, own = fence_name(choice, name), names.network_policy_name(name)
    namespace_uid = _namespace_uid(namespace)
    pvc = part("PersistentVolumeClaim", namespace, names.pvc_name(name))
    fork = spec.restore_from.volume_snapshot_name if spec.restore_from else None
    # A fork's snapshot matters until its volume is made and restored; a user's own snapshot
    # is not watched, so it is read by name, and only then.
    restoring = pvc is None or (
        restored_from(pvc) == fork and (pvc.get("status") or {}).get("phase") != "Bound"
    )
    return SandboxWorld(
        body,
        Loaded(name, spec),
        workspace,
        policy,
        choice,
        policy_required,
        missing,
        Scrubber(values.values()),
        pod=part("Pod", namespace, names.pod_name(name)),
        pvc=pvc,
        files=tuple(
            found
            for found in CACHE.listed("ConfigMap", namespace)
            if (found["metadata"].get("labels") or {}).get(names.WORKSPACE_LABEL)
            == spec.workspace_ref.name
        ),
        network_policy=part("NetworkPolicy", namespace, fence),
        baseline=part("NetworkPolicy", namespace, names.BASELINE_NETWORK_POLICY),
        # Its own fence, when a shared one is its: only the watch's (as it is retired).
        own_network_policy=None if fence == own else CACHE.peek("NetworkPolicy", namespace, own),
        namespace_uid=namespace_uid,
        forked=CACHE.get("VolumeSnapshot", namespace, fork) if fork and restoring else None,
    )


def _namespace_uid(namespace: str) -> str:
    """The uid of the Namespace as the watch shows it ("" before its first listing)."""
    found = CACHE.peek("Namespace", "", namespace)
    return str(found["metadata"].get("uid") or "") if found else ""
