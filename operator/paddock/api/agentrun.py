"""AgentRun: one agent (or command) run in a sandbox, with a replayable event log."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from paddock.api.approvals import Approval
from paddock.api.budget import Budget, Usage
from paddock.api.common import (
    ApiModel,
    Conditions,
    ConfigMapKeySelector,
    ContainerEnvVar,
    ContainerSecretEnvVar,
    KindInfo,
    LocalObjectReference,
    PrinterColumn,
    Resource,
    SecretKeySelector,
    SecretRef,
    cel,
    validations,
)
from paddock.api.delivery import Deliver, Delivery
from paddock.api.fields import (
    Duration,
)
from paddock.api.sandbox import SandboxSpec

# A session id as the CLIs make them: never an option or a shell word.
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"


class Harness(StrEnum):
    """The agent CLI that runs, or command for a plain shell command."""

    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    OPENCODE = "opencode"
    GEMINI = "gemini"
    COMMAND = "command"


class Reuse(StrEnum):
    """Whether a sandboxTemplate run shares its sandbox with later runs of its thread."""

    THREAD = "thread"
    NONE = "none"


class PromptSource(ApiModel):
    """A prompt kept in a ConfigMap or a Secret."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "has(self.configMapKeyRef) != has(self.secretKeyRef)",
                "promptFrom names a configMapKeyRef or a secretKeyRef, not both",
            )
        )
    )

    config_map_key_ref: ConfigMapKeySelector | None = Field(
        default=None, description="ConfigMap key holding the prompt."
    )
    secret_key_ref: SecretKeySelector | None = Field(
        default=None, description="Secret key holding the prompt."
    )

    @model_validator(mode="after")
    def _one_source(self) -> PromptSource:
        if (self.config_map_key_ref is None) == (self.secret_key_ref is None):
            raise ValueError("promptFrom names a configMapKeyRef or a secretKeyRef, not both")
        return self


class ModelKey(ApiModel):
    """The model API key of the run, held by the egress gateway's model route rather than put
    in the sandbox (where there is a gateway)."""

    secret_key_ref: SecretKeySelector = Field(description="The Secret key holding the API key.")
    base_url: str | None = Field(
        default=None,
        max_length=2048,
        pattern=r"^https?://[^\s/?#@]+(/[^\s?#]*)?$",
        description="The model API the gateway forwards the harness's requests to, without "
        "the API's own path (e.g. https://api.anthropic.com). Default: the public API of the "
        "harness's provider (Anthropic for claude-code, OpenAI for codex, Google for gemini; "
        "for opencode, the provider its model names: anthropic/... or openai/...).",
    )


ONE_SANDBOX_MESSAGE = "set exactly one of sandboxRef, sandboxTemplate or poolRef"
COMMAND_MESSAGE = "command is required when harness is command, and only then"
PROMPT_MESSAGE = "an agent harness needs a prompt or promptFrom (not both)"
THREAD_MESSAGE = "reuse: thread needs a threadId"
REUSE_MESSAGE = "threadId and reuse apply only with a sandboxTemplate"
MODEL_KEY_MESSAGE = "modelKey applies to an agent harness, not to command"


class AgentRunSpec(ApiModel):
    """One run of an agent (or a command) in a sandbox."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(
                "[has(self.sandboxRef), has(self.sandboxTemplate), has(self.poolRef)]"
                ".filter(x, x).size() == 1",
                ONE_SANDBOX_MESSAGE,
            ),
            cel("has(self.command) == (self.harness == 'command')", COMMAND_MESSAGE),
            cel(
                "self.harness == 'command' || (has(self.prompt) != has(self.promptFrom))",
                PROMPT_MESSAGE,
            ),
            cel("!has(self.reuse) || self.reuse != 'thread' || has(self.threadId)", THREAD_MESSAGE),
            cel(
                "has(self.sandboxTemplate) || (!has(self.threadId) && !has(self.reuse))",
                REUSE_MESSAGE,
            ),
            cel("!has(self.modelKey) || self.harness != 'command'", MODEL_KEY_MESSAGE),
        )
    )

    sandbox_ref: LocalObjectReference | None = Field(
        default=None, description="An existing Sandbox to run in."
    )
    sandbox_template: SandboxSpec | None = Field(
        default=None, description="A Sandbox spec; the run finds or creates a sandbox from it."
    )
    pool_ref: LocalObjectReference | None = Field(
        default=None,
        description="A SandboxPool: the run takes one of its Ready sandboxes (which becomes "
        "the run's own, removed when it ends), or, when none is Ready, creates one from the "
        "pool's template.",
    )
    thread_id: str | None = Field(
        default=None,
        max_length=253,
        description="Conversation thread: runs of one thread share one sandbox "
        "(with sandboxTemplate).",
    )
    reuse: Reuse | None = Field(
        default=None,
        description="thread: one sandbox per threadId, kept between runs (one run at a time; "
        "deleted with its volume once idle for the operator's "
        "PADDOCK_THREAD_SANDBOX_IDLE_SECONDS, 7 days by default); none: a fresh sandbox "
        "removed when the run ends. Default: thread when threadId is set, else none.",
    )
    harness: Harness = Field(description="claude-code, codex, opencode, gemini or command.")
    model: str | None = Field(
        default=None, max_length=256, description="Model name passed to the harness."
    )
    prompt: str | None = Field(
        default=None, max_length=1048576, description="The task for the agent."
    )
    prompt_from: PromptSource | None = Field(
        default=None, description="Take the prompt from a ConfigMap or Secret key."
    )
    command: str | None = Field(
        default=None,
        min_length=1,
        max_length=65536,
        description="Shell command, for harness: command. Checked against the policy.",
    )
    session_id: str | None = Field(
        default=None,
        max_length=256,
        pattern=SESSION_ID_PATTERN,
        description=(
            "Harness session to resume: letters, digits, '.', '_', ':' and '-', starting with "
            "a letter or digit (as each CLI makes them)."
        ),
    )
    timeout: Duration = Field(
        default="1h", description="Longest the run may take, e.g. 90s, 30m, 24h."
    )
    env: list[ContainerEnvVar] = Field(
        default_factory=list,
        max_length=256,
        description="Environment of the harness. Credentials go under secrets; variables "
        "that run code on start or find other programs (BASH_ENV, PATH, LD_*, ...) are "
        "refused: the policy judges what runs, not what a variable slips in first.",
    )
    secrets: list[ContainerSecretEnvVar] = Field(
        default_factory=list,
        max_length=256,
        description="Environment variables from Secrets (API keys), by secretKeyRef only.",
    )
    model_key: ModelKey | None = Field(
        default=None,
        description="The model API key. With Paddock's egress gateway it never enters the "
        "sandbox: the harness is pointed at the gateway's model route with a token of this "
        "run, which the gateway swaps for the key (from the sandbox's pod only, until the run "
        "ends). Without a gateway, the harness gets the key in its environment, and the run "
        "says so (condition ModelRoute).",
    )
    budget: Budget | None = Field(
        default=None,
        description="What the run may spend on its model: counted at the egress gateway's "
        "model route (so it needs modelKey and a gateway; a run with a budget, its own or its "
        "policy's, that has neither fails BudgetUnenforceable). The stricter of this and the "
        "policy's budget applies to each figure, fixed when the harness starts.",
    )
    cancel: bool = Field(
        default=False,
        description="Set to true to stop the run: its processes are killed and it ends Cancelled.",
    )
    approval_timeout: Duration = Field(
        default="15m",
        description="How long a command the policy says to ask about waits for a person to "
        "approve or deny it (paddock approve / deny, or the approval.paddock.dev/<id> "
        "annotation); unanswered by then, it is denied.",
    )
    deliver: Deliver | None = Field(
        default=None,
        description="Push the run's work to a new branch and open a pull request, with a "
        "token only the operator reads. The run's Workspace must have a git source.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=31536000,
        description="Seconds after the run finished that the run and its event log are "
        "deleted (0: at once). Unset: the operator's default, "
        "PADDOCK_RUN_TTL_SECONDS_AFTER_FINISHED (7 days unless the platform team set another "
        "or never).",
    )

    @model_validator(mode="after")
    def _cross_field_rules(self) -> AgentRunSpec:
        if [self.sandbox_ref, self.sandbox_template, self.pool_ref].count(None) != 2:
            raise ValueError(ONE_SANDBOX_MESSAGE)
        if (self.command is not None) != (self.harness == Harness.COMMAND):
            raise ValueError(COMMAND_MESSAGE)
        if self.harness != Harness.COMMAND and (self.prompt is None) == (self.prompt_from is None):
            raise ValueError(PROMPT_MESSAGE)
        if self.reuse == Reuse.THREAD and self.thread_id is None:
            raise ValueError(THREAD_MESSAGE)
        if self.sandbox_template is None and (self.thread_id or self.reuse):
            raise ValueError(REUSE_MESSAGE)
        if self.model_key is not None and self.harness == Harness.COMMAND:
            raise ValueError(MODEL_KEY_MESSAGE)
        return self

    def secret_refs(self) -> list[SecretRef]:
        """Every (Secret, key) the run itself names: its secret env, its model key and a Secret
        prompt."""
        refs = [s.secret_key_ref.pair for s in self.secrets]
        if self.model_key is not None:
            refs.append(self.model_key.secret_key_ref.pair)
        if self.prompt_from is not None and self.prompt_from.secret_key_ref is not None:
            refs.append(self.prompt_from.secret_key_ref.pair)
        if self.deliver is not None:
            refs.append(self.deliver.credentials_secret.pair)
        return refs

    @property
    def effective_reuse(self) -> Reuse:
        if self.reuse is not None:
            return Reuse(self.reuse)
        return Reuse.THREAD if self.thread_id else Reuse.NONE


class RunPhase(StrEnum):
    """Where a run is, for people; conditions carry the detail."""

    PENDING = "Pending"
    WAITING_FOR_SANDBOX = "WaitingForSandbox"
    RUNNING = "Running"
    AWAITING_APPROVAL = "AwaitingApproval"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    TIMED_OUT = "TimedOut"


TERMINAL_PHASES = frozenset(
    {RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.CANCELLED, RunPhase.TIMED_OUT}
)


class EventSummary(ApiModel):
    """One recent event, abridged; the full event is in the log."""

    seq: int = Field(description="Position in the run's log, from 0.")
    type: str = Field(description="Event type, e.g. tool.call.")
    time: datetime | None = Field(default=None, description="When it happened.")
    summary: str = Field(default="", description="A line about it.")


class RunResult(ApiModel):
    """How the run ended."""

    summary: str | None = Field(default=None, description="The final result, abridged.")
    exit_code: int | None = Field(default=None, description="Exit code of the harness.")
    is_error: bool = Field(default=False, description="Whether the harness reported an error.")


class LogBackend(StrEnum):
    CONFIGMAP = "configmap"
    S3 = "s3"


class LogLocation(ApiModel):
    """Where the run's full event log is kept."""

    backend: LogBackend = Field(description="configmap or s3.")
    location: str = Field(
        description="ConfigMap name prefix (chunks PREFIX-00000, -00001, ...), or "
        "s3://BUCKET/KEY-PREFIX/ (one object a write, named by its first seq)."
    )
    endpoint: str | None = Field(
        default=None, description="s3: the object store's endpoint; unset: AWS S3."
    )
    region: str | None = Field(default=None, description="s3: the bucket's region.")
    path_style: bool | None = Field(
        default=None, description="s3: whether the bucket is addressed by path, not host name."
    )


class AgentRunStatus(ApiModel):
    """Observed state of an AgentRun."""

    phase: RunPhase | None = Field(default=None, description="Phase, for people.")
    message: str | None = Field(default=None, description="Why the run is in its phase.")
    observed_generation: int | None = Field(
        default=None, description="The .metadata.generation this status describes."
    )
    conditions: Conditions
    sandbox_name: str | None = Field(default=None, description="Sandbox the run uses.")
    session_id: str | None = Field(default=None, description="Harness session id, to resume.")
    event_count: int = Field(default=0, description="Events in the log.")
    last_events: list[EventSummary] = Field(
        default_factory=list, description="The last few events."
    )
    result: RunResult | None = Field(default=None, description="How the run ended.")
    usage: Usage | None = Field(default=None, description="Tokens and cost, where reported.")
    changed_files: list[str] = Field(
        default_factory=list, description="Files the run changed (git diff after the run)."
    )
    log: LogLocation | None = Field(default=None, description="Where the full log is.")
    delivery: Delivery | None = Field(
        default=None, description="Where the run's work was delivered (spec.deliver)."
    )
    completion_digest: str | None = Field(
        default=None,
        description="SHA-256 of the run's completion nonce: a completion record is accepted "
        "only with the nonce whose digest this is.",
    )
    approvals: list[Approval] = Field(
        default_factory=list,
        description="Requests the policy says to ask about: every pending one and the last "
        "resolved ones.",
    )
    pending_approvals: int | None = Field(
        default=None, description="How many approvals are pending."
    )
    started_at: datetime | None = Field(default=None, description="When the harness started.")
    completed_at: datetime | None = Field(default=None, description="When the run ended.")


class AgentRun(Resource):
    """One agent or command run in a sandbox; its events are normalised and kept in a log."""

    kind_info = KindInfo(
        kind="AgentRun",
        plural="agentruns",
        short_name="run",
        columns=(
            PrinterColumn("Phase", ".status.phase", "Phase of the run"),
            PrinterColumn("Harness", ".spec.harness", "Agent CLI or command"),
            PrinterColumn("Sandbox", ".status.sandboxName", "Sandbox it runs in"),
            PrinterColumn("Events", ".status.eventCount", "Events in the log", type="integer"),
            PrinterColumn(
                "Approvals", ".status.pendingApprovals", "Pending approvals", type="integer"
            ),
            PrinterColumn("Tokens", ".status.usage.tokens", "Model tokens used", type="integer"),
            PrinterColumn("Cost", ".status.usage.costUsd", "Model cost, US dollars", type="number"),
            PrinterColumn("Session", ".status.sessionId", "Harness session id", priority=1),
            PrinterColumn("Message", ".status.message", "Why it is in its phase", priority=1),
        ),
    )

    api_version: Literal["paddock.dev/v1alpha1"] = "paddock.dev/v1alpha1"
    kind: Literal["AgentRun"] = "AgentRun"
    spec: AgentRunSpec
    status: AgentRunStatus | None = None
