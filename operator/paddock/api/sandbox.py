"""Sandbox: one prepared, isolated environment (a PVC-backed pod)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema, model_validator

from paddock.api.common import (
    DNS_SUBDOMAIN_PATTERN,
    MAX_LIST,
    ApiModel,
    Conditions,
    KindInfo,
    LocalObjectReference,
    PrinterColumn,
    Resource,
    cel,
    validations,
)
from paddock.api.fields import (
    Duration,
)
from paddock.api.policy import SandboxPolicySpec

# A resource quantity ("500m", "2Gi", 4): the API server's own int-or-string quantity shape.
Quantity = Annotated[
    int | str,
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
            r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
        }
    ),
]


class Resources(ApiModel):
    """CPU, memory and ephemeral-storage requests and limits of the sandbox container."""

    requests: dict[str, Quantity] = Field(
        default_factory=dict, description="Minimum resources, e.g. {cpu: 500m, memory: 1Gi}."
    )
    limits: dict[str, Quantity] = Field(
        default_factory=dict, description="Maximum resources, e.g. {cpu: 2, memory: 4Gi}."
    )


class Toleration(ApiModel):
    """A toleration of node taints, as in a Pod spec."""

    key: str | None = Field(default=None, description="Taint key; empty matches every key.")
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists or Equal (default Equal)."
    )
    value: str | None = Field(default=None, description="Taint value for Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to match; empty matches every effect."
    )
    toleration_seconds: int | None = Field(
        default=None, description="How long a NoExecute taint is tolerated."
    )


class Storage(ApiModel):
    """The workspace volume (a PVC) and how it is snapshotted."""

    size: Quantity = Field(default="10Gi", description="Size of the workspace volume.")
    storage_class_name: str | None = Field(
        default=None,
        description="StorageClass of the PVC. Empty: the operator's "
        "(PADDOCK_SANDBOX_STORAGE_CLASS), else the cluster's default.",
    )
    volume_snapshot_class_name: str | None = Field(
        default=None,
        description="VolumeSnapshotClass for snapshots of the volume; when empty, the default "
        "class of the driver that provisions the volume's StorageClass.",
    )


class SnapshotWhen(StrEnum):
    """When the workspace volume is snapshotted for reuse."""

    AFTER_SETUP = "after-setup"
    AFTER_RUN = "after-run"
    NONE = "none"


class Lifecycle(ApiModel):
    """Snapshots, idling and pausing."""

    snapshot: SnapshotWhen = Field(
        default=SnapshotWhen.AFTER_SETUP,
        description="after-setup: snapshot the prepared volume so the next sandbox of the same "
        "workspace hash is restored from it without setup (a VolumeSnapshot where a "
        "VolumeSnapshotClass fits the volume's driver, else an archive of its files in the "
        "operator's object store when it has one); after-run: also after each run that ends in "
        "the sandbox; none: neither take snapshots nor restore from one.",
    )
    snapshot_max_age: Duration = Field(
        default="24h",
        description="Oldest snapshot a new sandbox is restored from, e.g. 90s, 30m, 24h, 7d; the "
        "snapshots this sandbox takes are deleted at that age.",
    )
    idle_timeout: Duration | None = Field(
        default=None,
        description="Pause the sandbox after this long without activity; never when empty.",
    )
    paused: bool = Field(
        default=False,
        description="Delete the pod and keep the volume. Setting it back to false recreates "
        "the pod without running setup again.",
    )


ONE_SOURCE_MESSAGE = "set exactly one of volumeSnapshotName and sandboxName"


class RestoreFrom(ApiModel):
    """Where a forked sandbox's volume comes from: a VolumeSnapshot, or another Sandbox's
    latest ready snapshot. Exactly one of the two."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel("has(self.volumeSnapshotName) != has(self.sandboxName)", ONE_SOURCE_MESSAGE)
        )
    )

    volume_snapshot_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="A VolumeSnapshot in the Sandbox's namespace (one Paddock took, or any "
        "other of a volume the sandbox's StorageClass can restore).",
    )
    sandbox_name: str | None = Field(
        default=None,
        max_length=63,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="A Sandbox in the same namespace: its newest ready snapshot.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> RestoreFrom:
        if (self.volume_snapshot_name is None) == (self.sandbox_name is None):
            raise ValueError(ONE_SOURCE_MESSAGE)
        return self


ONE_POLICY_MESSAGE = "set policyRef or an inline policy, not both"
INLINE_DAILY_MESSAGE = (
    "budget.perNamespaceDaily needs a SandboxPolicy object (policyRef), which keeps the "
    "day's figures: an inline policy cannot"
)


class SandboxSpec(ApiModel):
    """A prepared, isolated environment for agent runs."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel("!(has(self.policyRef) && has(self.policy))", ONE_POLICY_MESSAGE),
            cel(
                "!has(self.policy) || !has(self.policy.budget) || "
                "!has(self.policy.budget.perNamespaceDaily)",
                INLINE_DAILY_MESSAGE,
            ),
        )
    )

    workspace_ref: LocalObjectReference = Field(
        description="The Workspace that says what goes into the sandbox."
    )
    policy_ref: LocalObjectReference | None = Field(
        default=None,
        description="The SandboxPolicy the sandbox's setup and command runs are checked "
        "against. With neither policyRef nor policy, the operator's policy.default applies; "
        "with no default either, commands are not restricted (policy.required refuses that).",
    )
    policy: SandboxPolicySpec | None = Field(
        default=None, description="An inline policy, instead of policyRef."
    )
    image: str | None = Field(
        default=None, max_length=1024, description="Container image; overrides the Workspace's."
    )
    resources: Resources = Field(
        default_factory=Resources, description="Resources of the sandbox container."
    )
    runtime_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="RuntimeClass of the pod, for a stronger isolation boundary (gVisor, Kata).",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Node labels the pod must be scheduled on. With none of nodeSelector, "
        "tolerations and affinity set: the operator's (PADDOCK_SANDBOX_NODE_SELECTOR), if any.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=MAX_LIST,
        description="Tolerations of the pod. With none of nodeSelector, tolerations and affinity "
        "set: the operator's (PADDOCK_SANDBOX_TOLERATIONS), if any.",
    )
    affinity: dict[str, Any] | None = Field(
        default=None,
        description="Affinity of the pod, exactly as in a Pod spec.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    storage: Storage = Field(default_factory=Storage, description="The workspace volume.")
    lifecycle: Lifecycle = Field(
        default_factory=Lifecycle, description="Snapshots, idle timeout and pausing."
    )
    restore_from: RestoreFrom | None = Field(
        default=None,
        description="Fork: start the workspace volume from this snapshot (whatever its age and "
        "workspace hash) instead of from the newest matching one or from setup. Read when the "
        "volume is created.",
    )

    @model_validator(mode="after")
    def _one_policy(self) -> SandboxSpec:
        if self.policy_ref is not None and self.policy is not None:
            raise ValueError(ONE_POLICY_MESSAGE)
        if self.policy and self.policy.budget and self.policy.budget.per_namespace_daily:
            raise ValueError(INLINE_DAILY_MESSAGE)
        return self


class SandboxPhase(StrEnum):
    """Where a sandbox is, for people; conditions carry the detail."""

    PENDING = "Pending"
    PROVISIONING = "Provisioning"
    SETTING_UP = "SettingUp"
    READY = "Ready"
    PAUSED = "Paused"
    FAILED = "Failed"
    TERMINATING = "Terminating"


class SandboxTimings(ApiModel):
    """How long the sandbox took to get ready."""

    ready_at: datetime | None = Field(default=None, description="When it first became Ready.")
    ready_seconds: float | None = Field(default=None, description="Seconds from creation to Ready.")
    setup_seconds: float | None = Field(
        default=None, description="Seconds the setup init containers took."
    )


class SandboxStatus(ApiModel):
    """Observed state of a Sandbox."""

    phase: SandboxPhase | None = Field(default=None, description="Phase, for people.")
    message: str | None = Field(default=None, description="Why the sandbox is in its phase.")
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation this status describes."
    )
    conditions: Conditions
    pod_name: str | None = Field(default=None, description="Name of the sandbox pod.")
    pvc_name: str | None = Field(default=None, description="Name of the workspace PVC.")
    workspace_hash: str | None = Field(
        default=None, description="Hash of the Workspace the volume was prepared from."
    )
    ever_held: bool | None = Field(
        default=None,
        description="True once a run has held the sandbox (set before its first run starts, "
        "never unset): a SandboxPool hands out only members no run has held.",
    )
    policy: str | None = Field(
        default=None,
        description="The SandboxPolicy the sandbox's commands are checked against: its name "
        "(NAMESPACE/NAME for the operator's default policy in another namespace), or "
        "'inline' for spec.policy; unset when none applies and commands are not restricted.",
    )
    restored_from: str | None = Field(
        default=None,
        description="VolumeSnapshot (or object-store archive) the volume was restored from.",
    )
    snapshot: str | None = Field(
        default=None,
        description="The latest snapshot (VolumeSnapshot or object-store archive) taken of this "
        "sandbox's volume (it belongs to the Workspace and outlives the sandbox).",
    )
    timings: SandboxTimings | None = Field(default=None, description="Start-up timings.")
    last_activity_time: datetime | None = Field(
        default=None, description="Last time a run or exec used the sandbox (idle timeout)."
    )


class Sandbox(Resource):
    """One prepared, isolated environment: a PVC-backed pod set up from a Workspace."""

    kind_info = KindInfo(
        kind="Sandbox",
        plural="sandboxes",
        short_name="sbx",
        max_name_length=63,
        columns=(
            PrinterColumn("Phase", ".status.phase", "Phase of the sandbox"),
            PrinterColumn("Workspace", ".spec.workspaceRef.name", "Workspace it was prepared from"),
            PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', "Ready"),
            PrinterColumn("Policy", ".status.policy", "SandboxPolicy in force", priority=1),
            PrinterColumn("Restored", ".status.restoredFrom", "Snapshot restored from", priority=1),
            PrinterColumn("Pod", ".status.podName", "Sandbox pod", priority=1),
            PrinterColumn("Message", ".status.message", "Why it is in its phase", priority=1),
        ),
    )

    api_version: Literal["paddock.dev/v1alpha1"] = "paddock.dev/v1alpha1"
    kind: Literal["Sandbox"] = "Sandbox"
    spec: SandboxSpec
    status: SandboxStatus | None = None
