"""Condition types and reasons of the four kinds, each reason with the kind of Kubernetes Event
it is reported as. A reason a user must act on is a Warning; the rest are Normal. Kept next to
the status models so that a new reason cannot be added without saying which it is."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    """The type of the Kubernetes Event that reports a reason."""

    NORMAL = "Normal"
    WARNING = "Warning"


class Reason(StrEnum):
    """A CamelCase condition reason that knows its severity; members are declared as
    ``NAME = "Value"`` (Normal) or ``NAME = "Value", Severity.WARNING``."""

    severity: Severity

    def __new__(cls, value: str, severity: Severity = Severity.NORMAL) -> Reason:
        member = str.__new__(cls, value)
        member._value_ = value
        member.severity = severity
        return member


W = Severity.WARNING


class ConditionType(StrEnum):
    READY = "Ready"
    # Every kind: for GitOps tools (api/health.py)
    RECONCILING = "Reconciling"
    STALLED = "Stalled"
    # Workspace
    ALL_HARNESSES_SUPPORTED = "AllHarnessesSupported"
    # Sandbox
    SETUP_COMPLETE = "SetupComplete"
    VOLUME_BOUND = "VolumeBound"
    PAUSED = "Paused"
    UP_TO_DATE = "UpToDate"
    SNAPSHOT_READY = "SnapshotReady"
    RESTORED = "Restored"
    EGRESS_GATEWAY = "EgressGateway"
    # AgentRun
    SECRETS_FOUND = "SecretsFound"
    PROMPT_FOUND = "PromptFound"
    SANDBOX_READY = "SandboxReady"
    PROGRESSING = "Progressing"
    COMPLETE = "Complete"
    AWAITING_APPROVAL = "AwaitingApproval"
    MODEL_ROUTE = "ModelRoute"
    CREDENTIAL_ROUTES = "CredentialRoutes"
    WITHIN_BUDGET = "WithinBudget"
    DELIVERED = "Delivered"
    # SandboxPolicy
    VALID = "Valid"


class WorkspaceReason(Reason):
    VALID = "Valid"
    INVALID_SPEC = "InvalidSpec", W
    SECRET_NOT_FOUND = "SecretNotFound", W
    SUPPORTED = "Supported"
    HARNESS_LIMITS = "HarnessLimits"
    SNAPSHOT_DELETED = "SnapshotDeleted"
    SNAPSHOT_DELETE_REFUSED = "SnapshotDeleteRefused", W


class SandboxReason(Reason):
    # Phase and Ready reasons
    DELETING = "Deleting"
    INVALID_SPEC = "InvalidSpec", W
    WORKSPACE_NOT_FOUND = "WorkspaceNotFound", W
    SECRETS_REFUSED = "SecretsInSandboxRefused", W
    WORKSPACE_INVALID = "WorkspaceInvalid", W
    POLICY_NOT_FOUND = "PolicyNotFound", W
    POLICY_INVALID = "PolicyInvalid", W
    POLICY_REQUIRED = "PolicyRequired", W
    POLICY_DENIED = "PolicyDenied", W
    APPROVAL_REQUIRED = "ApprovalRequired", W
    SECRET_NOT_FOUND = "SecretNotFound", W
    WORKSPACE_TOO_LARGE = "WorkspaceTooLarge", W
    NAME_CONFLICT = "NameConflict", W
    POD_REFUSED = "PodRefused", W
    VOLUME_REFUSED = "VolumeRefused", W
    FILES_REFUSED = "FilesRefused", W
    NETWORK_POLICY_REFUSED = "NetworkPolicyRefused", W
    RECONCILE_FAILED = "ReconcileFailed", W
    PAUSED = "Paused"
    IDLE_TIMEOUT = "IdleTimeout"
    IDLE_EXPIRED = "IdleExpired"
    STARTING = "Starting"
    SETTING_UP = "SettingUp"
    READY = "Ready"
    CLONE_FAILED = "CloneFailed", W
    PROJECTION_FAILED = "ProjectionFailed", W
    SETUP_FAILED = "SetupFailed", W
    INIT_FAILED = "InitFailed", W
    IMAGE_PULL_FAILED = "ImagePullFailed", W
    POD_EVICTED = "PodEvicted", W
    POD_FAILED = "PodFailed", W
    VOLUME_NOT_BOUND = "VolumeNotBound", W
    UNSCHEDULABLE = "Unschedulable", W
    # Other conditions
    RUNNING = "Running"
    PREPARED = "Prepared"
    BOUND = "Bound"
    VOLUME_PENDING = "Pending"
    UP_TO_DATE = "UpToDate"
    WORKSPACE_CHANGED = "WorkspaceChanged"
    # Snapshots and restores
    SNAPSHOT_TAKING = "SnapshotTaking"
    SNAPSHOT_TAKEN = "SnapshotTaken"
    SNAPSHOT_FAILED = "SnapshotFailed", W
    SNAPSHOT_GONE = "SnapshotDeleted"
    SNAPSHOTS_UNSUPPORTED = "SnapshotsUnsupported"
    SNAPSHOT_CLASS_NOT_FOUND = "SnapshotClassNotFound", W
    RESTORING = "Restoring"
    RESTORED = "Restored"
    NO_SNAPSHOT = "NoSnapshot"
    # Egress by host name
    THROUGH_GATEWAY = "ThroughGateway"
    NO_GATEWAY = "NoGateway", W
    RESTORE_FAILED = "RestoreFailed", W
    SNAPSHOT_NOT_READY = "SnapshotNotReady"


class RunReason(Reason):
    # Phases, as the reason of the Event that reports a change of phase
    PENDING = "Pending"
    WAITING_FOR_SANDBOX = "WaitingForSandbox"
    # Waiting
    SECRET_NOT_FOUND = "SecretNotFound", W
    SECRETS_FOUND = "SecretsFound"
    SANDBOX_NOT_FOUND = "SandboxNotFound"
    POOL_NOT_FOUND = "PoolNotFound", W
    SANDBOX_IN_POOL = "SandboxInPool", W
    POOL_INVALID = "PoolInvalid", W
    SANDBOX_INVALID = "SandboxInvalid", W
    SANDBOX_CREATED = "SandboxCreated"
    THREAD_MOVED = "ThreadMoved"
    SANDBOX_NOT_READY = "SandboxNotReady"
    SANDBOX_PAUSED = "SandboxPaused"
    SANDBOX_RESUMING = "SandboxResuming"
    SANDBOX_BUSY = "SandboxBusy"
    WORKSPACE_NOT_READY = "WorkspaceNotReady"
    SANDBOX_READY = "Ready"
    RUNNING = "Running"
    # Ends
    SUCCEEDED = "Succeeded"
    FAILED = "Failed", W
    CANCELLED = "Cancelled"
    TIMED_OUT = "TimedOut", W
    SANDBOX_FAILED = "SandboxFailed", W
    NAME_CONFLICT = "NameConflict", W
    LOG_NAME_CONFLICT = "LogNameConflict", W
    LOG_STORE_DENIED = "LogStoreDenied", W
    LOG_STORE_NOT_FOUND = "LogStoreNotFound", W
    LOG_STORE_UNAVAILABLE = "LogStoreUnavailable", W
    API_REFUSED = "ApiRefused", W
    STEP_FAILED = "StepFailed", W
    PROMPT_NOT_FOUND = "PromptNotFound", W
    PROMPT_FOUND = "PromptFound"
    SANDBOX_LOST = "SandboxLost", W
    LAUNCH_FAILED = "LaunchFailed", W
    WRAPPER_LOST = "WrapperLost", W
    GATE_LOST = "GateLost", W
    POLICY_DENIED = "PolicyDenied", W
    POLICY_NOT_FOUND = "PolicyNotFound", W
    # The model key
    THROUGH_GATEWAY = "ThroughGateway"
    KEY_IN_SANDBOX = "KeyInSandbox", W
    KEY_IN_SANDBOX_REFUSED = "KeyInSandboxRefused", W
    MODEL_UNROUTABLE = "ModelUnroutable", W
    SECRETS_REFUSED = "SecretsInSandboxRefused", W
    # The Workspace's credential routes
    ROUTES_UNSERVED = "NoGateway", W
    # Budgets
    WITHIN_BUDGET = "WithinBudget"
    BUDGET_EXHAUSTED = "BudgetExhausted", W
    BUDGET_EXCEEDED = "BudgetExceeded", W
    BUDGET_UNENFORCEABLE = "BudgetUnenforceable", W
    # Approvals
    AWAITING_APPROVAL = "AwaitingApproval"
    APPROVAL_REQUESTED = "ApprovalRequested"
    APPROVED = "Approved"
    APPROVAL_DENIED = "ApprovalDenied", W
    APPROVAL_EXPIRED = "ApprovalExpired", W
    NO_APPROVAL_PENDING = "NoApprovalPending"
    # Lifetime
    EXPIRY_REFUSED = "ExpiryRefused", W
    # Delivery
    DELIVERED = "Delivered"
    NOTHING_TO_DELIVER = "NothingToDeliver"
    NOT_DELIVERED = "NotDelivered"
    DELIVERY_UNDELIVERABLE = "Undeliverable", W
    DELIVERY_REFUSED = "DeliveryRefused", W
    DELIVERY_FAILED = "DeliveryFailed", W


class PoolReason(Reason):
    READY = "Ready"
    FILLING = "Filling"
    INVALID_SPEC = "InvalidSpec", W
    WORKSPACE_NOT_FOUND = "WorkspaceNotFound", W
    WORKSPACE_NOT_READY = "WorkspaceNotReady"


class PolicyReason(Reason):
    VALID = "Valid"
    INVALID_SPEC = "InvalidSpec", W
    RULES_INEFFECTIVE = "RulesIneffective", W
    RUNS_WRITABLE_FILES = "RunsWritableFiles", W
