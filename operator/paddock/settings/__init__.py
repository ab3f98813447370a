"""Operator settings: defaults a platform team overrides with PADDOCK_* environment variables
(an empty variable is the same as an unset one). They come in groups (``s3``, ``logs``,
``snapshots``, ``network``, ``gateway``, ``tuning``), and each service is given only the group
it uses; every variable keeps its flat name: ``PADDOCK_S3_BUCKET`` is ``s3.bucket``, and an
error names the variable."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from paddock import __version__
from paddock.api.sandbox import Toleration
from paddock.settings.groups import (
    GatewaySettings,
    Group,
    LogSettings,
    NetworkSettings,
    S3Settings,
    SnapshotSettings,
    Tuning,
    labels,
)

ENV_PREFIX = "PADDOCK_"


GROUPS: dict[str, type[Group]] = {
    "s3": S3Settings, "logs": LogSettings, "snapshots": SnapshotSettings,
    "network": NetworkSettings, "gateway": GatewaySettings, "tuning": Tuning,
}  # fmt: skip
# Each group setting's flat name, and where it is: (group, field).
FLAT = {flat: (name, field) for name, group in GROUPS.items() for flat, field in group.FLAT.items()}


class OperatorSettings(BaseModel):
    """How this operator instance behaves. Each setting reads ``PADDOCK_<FLAT_NAME>``."""

    sandbox_image: str = Field(
        default=f"ghcr.io/paddock-dev/paddock-sandbox:{__version__}",
        description="Image of sandboxes whose Workspace and Sandbox name none: by default "
        "Paddock's sandbox image of this version (images/sandbox/Dockerfile).",
    )
    sandbox_node_selector: dict[str, str] = Field(
        default={},
        description="Node labels of sandboxes that place themselves in no way (no node "
        "selector, tolerations or affinity of their own), as KEY=VALUE[,KEY=VALUE]: e.g. the "
        "node pool kept for agents.",
    )
    sandbox_tolerations: list[Toleration] = Field(
        default=[],
        description="Tolerations of the same sandboxes as sandbox_node_selector, as a JSON list "
        'as in a Pod spec, e.g. [{"key": "agents", "operator": "Exists", "effect": "NoSchedule"}].',
    )
    sandbox_storage_class: str | None = Field(
        default=None,
        description="StorageClass of workspace volumes whose Sandbox names none; unset: the "
        "cluster's default.",
    )
    thread_sandbox_idle_seconds: Annotated[int, Field(ge=1)] | Literal["never"] = Field(
        default=604800,
        description="Seconds a thread's sandbox (made by runs with a threadId) is kept without "
        "activity (no run, no new paddock.dev/last-activity) before it is deleted with its "
        "volume; the thread's next "
        "run makes a new one. never: kept.",
    )
    run_ttl_seconds_after_finished: Annotated[int, Field(ge=0)] | Literal["never"] = Field(
        default=604800,
        description="Seconds after a run finished that it and its event log are deleted, for "
        "runs that set no spec.ttlSecondsAfterFinished; never: they are kept.",
    )
    metrics_port: int = Field(
        default=8081, ge=0, le=65535, description="Port of the Prometheus metrics; 0: off."
    )
    policy_default: str | None = Field(
        default=None,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="SandboxPolicy of sandboxes that name none: NAME (in the sandbox's "
        "namespace) or NAMESPACE/NAME. Unset: such sandboxes run commands unrestricted.",
    )
    policy_required: bool = Field(
        default=False,
        description="Refuse sandboxes that name no policy when no default is set (the "
        "Sandbox reports PolicyRequired and no pod is made).",
    )
    run_start_grace_seconds: int = Field(
        default=300,
        ge=1,
        description="How long a run may wait for a sandbox, pool, Secret or prompt that does "
        "not exist before it reads Stalled (GitOps tools: Failed); it starts when they come.",
    )
    secrets_in_sandbox: Literal["allow", "refuse"] = Field(
        default="allow",
        description="refuse: no secret value goes into any sandbox's environment, whatever "
        "its SandboxPolicy says (as a policy's secrets.inSandbox: refuse does for its own).",
    )
    model_key_in_sandbox: Literal["allow", "refuse"] = Field(
        default="allow",
        description="refuse: every run whose model key would be in its sandbox (a modelKey "
        "without gateway_model_url, or a secret under a name an agent CLI reads its key "
        "from) fails KeyInSandboxRefused, whatever its SandboxPolicy says.",
    )

    s3: S3Settings = Field(default_factory=S3Settings)
    logs: LogSettings = Field(default_factory=LogSettings)
    snapshots: SnapshotSettings = Field(default_factory=SnapshotSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    tuning: Tuning = Field(default_factory=Tuning)

    @property
    def refusals(self) -> tuple[bool, bool]:
        """Whether the operator refuses model keys, and secret values, in every sandbox."""
        return self.model_key_in_sandbox == "refuse", self.secrets_in_sandbox == "refuse"

    @property
    def thread_sandbox_idle_limit(self) -> int | None:
        """Seconds a thread's sandbox is kept without activity (None: for ever)."""
        idle = self.thread_sandbox_idle_seconds
        return None if idle == "never" else idle

    @property
    def run_ttl_limit(self) -> int | None:
        """Seconds a finished run is kept when its spec sets none (None: for ever)."""
        ttl = self.run_ttl_seconds_after_finished
        return None if ttl == "never" else ttl

    @model_validator(mode="before")
    @classmethod
    def _grouped(cls, values: Any) -> Any:
        """Settings given by their flat names (``s3_bucket``), each put in its group."""
        if not isinstance(values, dict):
            return values
        nested: dict[str, Any] = {}
        for key, value in values.items():
            if key in FLAT:
                group, field = FLAT[key]
                nested.setdefault(group, {})[field] = value
            else:
                nested[key] = value
        return nested

    @model_validator(mode="after")
    def _bucket_where_needed(self) -> OperatorSettings:
        if self.logs.backend == "s3" and not self.s3.bucket:
            raise ValueError("log_backend s3 needs s3_bucket (PADDOCK_S3_BUCKET)")
        if self.snapshots.store == "object" and not self.s3.bucket:
            raise ValueError("snapshot_store object needs s3_bucket (PADDOCK_S3_BUCKET)")
        return self

    @field_validator("sandbox_tolerations", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    _labelled = field_validator("sandbox_node_selector", mode="before")(labels)

    @classmethod
    def variables(cls) -> list[str]:
        """The names, without ``PADDOCK_``, of every variable the settings read: each setting's
        flat name, upper-cased."""
        return [name.upper() for name in (*(n for n in cls.model_fields if n not in GROUPS), *FLAT)]

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> OperatorSettings:
        """The settings the ``PADDOCK_*`` variables give; a refusal names the variable."""
        environ = dict(os.environ if environ is None else environ)
        values = {name.lower(): environ[ENV_PREFIX + name] for name in cls.variables()
                  if environ.get(ENV_PREFIX + name)}  # fmt: skip
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise _flat(exc) from None


def _flat(exc: ValidationError) -> ValidationError:
    """The same errors, each located by the flat name a person sets (``s3_bucket``), not by
    its place in a group (``s3.bucket``), and never showing a secret setting's value."""
    by_place = {(group, field): flat for flat, (group, field) in FLAT.items()}
    errors = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        flat = by_place.get((str(loc[0]), str(loc[1]))) if len(loc) >= 2 else None
        where = (flat, *loc[2:]) if flat else loc
        shown = MASK if SECRET & {str(part) for part in loc} else _masked(error["input"])
        errors.append({"type": error["type"], "loc": where, "input": shown,
                       **({"ctx": error["ctx"]} if "ctx" in error else {})})  # fmt: skip
    return ValidationError.from_exception_data(exc.title, errors)  # type: ignore[arg-type]


MASK = "**********"
# The secret settings, by their fields' and their flat names.
SECRET = {"access_key_id", "secret_access_key", "s3_access_key_id", "s3_secret_access_key"}


def _masked(value: Any) -> Any:
    """``value`` with every secret setting in it masked (an error's input may be a whole
    group, or every setting given)."""
    if isinstance(value, dict):
        return {k: MASK if k in SECRET else _masked(v) for k, v in value.items()}
    return value
