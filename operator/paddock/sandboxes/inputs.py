"""What a Sandbox is made from: everything its reconcile reads, and its spec, Workspace and
policy resolved from that, or why they cannot be had. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import BaseModel

from paddock.api.policy import SandboxPolicySpec, SecretsInSandbox
from paddock.api.reasons import SandboxReason as R
from paddock.api.sandbox import SandboxPhase, SandboxSpec
from paddock.api.workspace import WorkspaceSpec
from paddock.policy import secrets_in_sandbox
from paddock.policy.choice import PolicyChoice
from paddock.render.network_policy import ClusterNetwork, through_gateway
from paddock.render.sandbox import SandboxInputs
from paddock.render.workspace_hash import workspace_hash
from paddock.runs.scrubbing import Scrubber
from paddock.sandboxes.fence import fence_name
from paddock.sandboxes.plan import Loaded, TransferState
from paddock.sandboxes.snapshots import SnapshotCluster
from paddock.sandboxes.workspace import RETRY_MISSING, missing_secrets_message
from paddock.settings import OperatorSettings
from paddock.vocab import names

Obj = dict[str, Any]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class SandboxWorld:
    """Everything a Sandbox's reconcile reads: the Sandbox as stored, what it refers to, and
    the objects it owns (None where they do not exist)."""

    sandbox: Obj
    spec: Loaded[SandboxSpec]
    workspace: Loaded[WorkspaceSpec] | None = None  # None: the spec is invalid, nothing read
    policy: Loaded[SandboxPolicySpec] | None = None  # None: no SandboxPolicy to read
    policy_choice: PolicyChoice = field(default_factory=PolicyChoice)
    policy_required: bool = False  # the operator refuses sandboxes with no policy
    missing_secrets: list[str] = field(default_factory=list)
    scrubber: Scrubber = field(default_factory=Scrubber)  # the Workspace's secret values
    pod: Obj | None = None
    pvc: Obj | None = None
    files: tuple[Obj, ...] = ()  # its Workspace's files ConfigMaps
    network_policy: Obj | None = None  # its fence (see ``fence.py``): shared, or its own
    baseline: Obj | None = None  # the namespace's baseline NetworkPolicy
    own_network_policy: Obj | None = None  # its own fence, when it is under a shared one
    namespace_uid: str = ""
    network: ClusterNetwork = field(default_factory=ClusterNetwork)  # what the fence leaves out
    snapshots: SnapshotCluster = field(default_factory=SnapshotCluster)
    forked: Obj | None = None  # the VolumeSnapshot spec.restoreFrom names, if any
    restore_timeout: float = 300.0  # seconds a restore may take before a cold start
    thread_idle_limit: int | None = None  # seconds a thread's sandbox is kept without activity
    transfer: TransferState | None = None  # its last archive made or unpacked, if any
    secrets_refused: bool = False  # the operator refuses secret values in sandboxes

    def workspace_uid(self) -> str | None:
        return None if self.workspace is None else self.workspace.uid

    def files_named(self, name: str) -> Obj | None:
        return next((f for f in self.files if f["metadata"]["name"] == name), None)


@dataclass(frozen=True)
class Blocked:
    """Why the sandbox's inputs cannot be had, and what that means for its phase."""

    phase: SandboxPhase
    reason: R
    message: str
    retry_after: float | None = None


def placed(loaded: Loaded[SandboxSpec], config: OperatorSettings) -> Loaded[SandboxSpec]:
    """The spec with the operator's placement where it names none of its own: its node
    selector and tolerations together, for a sandbox that names no node selector, tolerations
    or affinity (one that names any placed itself: half of the operator's would leave it
    selecting nodes it does not tolerate); its StorageClass, for a volume that names none."""
    spec = loaded.spec
    if spec is None:
        return loaded
    update: dict[str, Any] = {}
    if not (spec.node_selector or spec.tolerations or spec.affinity):
        if config.sandbox_node_selector:
            update["node_selector"] = dict(config.sandbox_node_selector)
        if config.sandbox_tolerations:
            update["tolerations"] = list(config.sandbox_tolerations)
    if not spec.storage.storage_class_name and config.sandbox_storage_class:
        storage = {"storage_class_name": config.sandbox_storage_class}
        update["storage"] = spec.storage.model_copy(update=storage)
    return replace(loaded, spec=spec.model_copy(update=update)) if update else loaded


def resolve_inputs(
    world: SandboxWorld, default_image: str
) -> tuple[SandboxInputs, SandboxPolicySpec | None] | Blocked:
    """The sandbox's spec, Workspace and policy, or why they cannot be had."""
    meta = world.sandbox["metadata"]
    namespace = meta["namespace"]
    spec = world.spec.spec
    if spec is None:
        message = f"The spec is invalid: {world.spec.error}"
        return Blocked(SandboxPhase.FAILED, R.INVALID_SPEC, message)
    assert world.workspace is not None
    workspace = _referenced(
        "Workspace",
        world.workspace,
        namespace,
        "spec.workspaceRef.name",
        R.WORKSPACE_NOT_FOUND,
        R.WORKSPACE_INVALID,
    )
    if isinstance(workspace, Blocked):
        return workspace
    policy = _policy(world)
    if isinstance(policy, Blocked):
        return policy
    refusing = policy is not None and policy.secrets.in_sandbox == SecretsInSandbox.REFUSE
    label = str(world.policy_choice.label) if refusing else None
    gateway = world.network.gateway
    held = gateway is not None and gateway.holds_mcp_secrets
    found = secrets_in_sandbox.of_workspace(workspace, held)
    refused = secrets_in_sandbox.refusal(found, label, world.secrets_refused)
    if refused is not None:
        return Blocked(SandboxPhase.FAILED, R.SECRETS_REFUSED, refused)
    if world.missing_secrets:
        message = missing_secrets_message(world.missing_secrets, namespace)
        return Blocked(SandboxPhase.PENDING, R.SECRET_NOT_FOUND, message, RETRY_MISSING)
    image = spec.image or workspace.image or default_image
    inputs = SandboxInputs(
        name=meta["name"],
        namespace=namespace,
        sandbox=spec,
        workspace=workspace,
        image=image,
        workspace_hash=workspace_hash(workspace, image),
        proxy=gateway.proxy if gateway and through_gateway(policy, gateway) else None,
        model_host=gateway.model_host if gateway else None,
        mcp_held=held,
        fence=names.label_value(fence_name(world.policy_choice, meta["name"])),
    )
    return inputs, policy


def _policy(world: SandboxWorld) -> SandboxPolicySpec | Blocked | None:
    """The policy the sandbox runs under (None: none, commands unrestricted)."""
    choice = world.policy_choice
    if choice.inline is not None:
        return choice.inline
    if world.policy is not None:
        namespace = choice.namespace or world.sandbox["metadata"]["namespace"]
        return _referenced(
            "SandboxPolicy",
            world.policy,
            namespace,
            choice.field,
            R.POLICY_NOT_FOUND,
            R.POLICY_INVALID,
        )
    if world.policy_required:
        message = (
            "The operator requires a SandboxPolicy (policy.required) and this sandbox names "
            "none: set spec.policyRef or spec.policy."
        )
        return Blocked(SandboxPhase.FAILED, R.POLICY_REQUIRED, message)
    return None


def _referenced(
    kind: str, loaded: Loaded[M], namespace: str, field_name: str, missing: R, invalid: R
) -> M | Blocked:
    if loaded.spec is not None:
        return loaded.spec
    if loaded.error is None:
        message = (
            f"{kind} {loaded.name} not found in namespace {namespace}. Create it, or fix "
            f"{field_name}."
        )
        return Blocked(SandboxPhase.PENDING, missing, message, RETRY_MISSING)
    message = f"{kind} {loaded.name} is invalid: {loaded.error}"
    return Blocked(SandboxPhase.PENDING, invalid, message, RETRY_MISSING)
