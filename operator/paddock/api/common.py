"""Building blocks shared by the four kinds: the base model, durations, refs, conditions.

Every model here is also a CRD schema (see ``api/crd.py``): a field's ``description`` is what
``kubectl explain`` shows, and a rule given in ``cel`` becomes an ``x-kubernetes-validations``
entry so that the API server rejects the same input the model rejects, with the same message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

MAX_NAME = 253
MAX_LIST = 64


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One CEL validation rule for the generated CRD, with the message a person reads."""
    validation = {"rule": rule, "message": message}
    if field_path:
        validation["fieldPath"] = field_path
    return validation


def validations(*rules: dict[str, str]) -> dict[str, Any]:
    """``json_schema_extra`` that attaches CEL rules to a model or field."""
    return {"x-kubernetes-validations": list(rules)}


class ApiModel(BaseModel):
    """Base of every API model: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=True,
        validate_default=True,  # defaults become plain values too, like parsed input
    )

    def to_api(self) -> dict[str, Any]:
        """The object as the Kubernetes API carries it: camelCase keys, unset fields left out."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# --- names and references ----------------------------------------------------------------------

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"

# A DNS subdomain, as the names of Secrets, ConfigMaps and Paddock's own kinds are: no "/",
# no "..", lowercase (a reference the API server could never resolve is refused up front).
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

ObjectName = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NAME,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="An object's name: lowercase letters, digits, '-' and '.' (a DNS subdomain).",
    ),
]
EnvName = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=ENV_NAME_PATTERN)]


class LocalObjectReference(ApiModel):
    """A reference to an object of a known kind in the same namespace."""

    name: ObjectName = Field(description="Name of the object, in the same namespace.")


SecretRef = tuple[str, str]  # (Secret name, key): hashable, for sets and lookups


class SecretKeySelector(ApiModel):
    """One key of a Secret in the same namespace."""

    name: ObjectName = Field(description="Name of the Secret, in the same namespace.")
    key: str = Field(min_length=1, max_length=MAX_NAME, description="Key within the Secret.")

    @property
    def pair(self) -> SecretRef:
        return (self.name, self.key)


class ConfigMapKeySelector(ApiModel):
    """One key of a ConfigMap in the same namespace."""

    name: ObjectName = Field(description="Name of the ConfigMap, in the same namespace.")
    key: str = Field(min_length=1, max_length=MAX_NAME, description="Key within the ConfigMap.")


# Names that almost always hold a credential. Such a variable must come from a Secret: a value
# written into a spec is readable by everyone who can `get` the object and lives in etcd in clear.
# PAT, AUTH and PASS count as whole parts of a name only (GH_PAT, BASIC_AUTH, DB_PASS; not
# PATH, AUTHOR or PASSTHROUGH).
CREDENTIAL_NAME_REGEX = (
    r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)(PAT|AUTH|PASS)($|_))"
)
CREDENTIAL_ENV_MESSAGE = (
    "a variable whose name looks like a credential (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, "
    "PAT, AUTH, PASS) must not carry a value in the spec; list it under secrets with a "
    "secretKeyRef"
)


# Variables that make a shell or a tool run code on start (before the command the policy
# judged), or change which program a command name finds: bash's start-up files and options,
# the dynamic loader, git's configuration and helpers, language runtimes' start-up options,
# the agent CLIs' shell and config locations. Set in a spec they would act before any
# judgement; exported by a setup step, the policy judges them. Exact names and prefixes rather
# than one regex: the API server's estimated cost of a long regex over 256 items is too high.
STARTUP_ENV_NAMES = (
    "ENV", "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS", "IFS", "CDPATH", "GLOBIGNORE",
    "EXECIGNORE", "PATH", "HOME", "SHELL", "PAGER", "EDITOR", "VISUAL", "GCONV_PATH",
    "GIT_ASKPASS", "GIT_EXEC_PATH", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER",
    "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_DIR", "GIT_WORK_TREE", "GIT_TEMPLATE_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_INDEX_FILE", "NODE_OPTIONS", "NODE_PATH",
    "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE", "PERL5OPT",
    "PERL5LIB", "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS", "SSH_ASKPASS", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_HOME",
    "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_SHELL", "CLAUDE_CODE_SHELL_PREFIX", "CODEX_HOME",
    "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_PERMISSION",
    "OPENCODE_DISABLE_PROJECT_CONFIG",
)  # fmt: skip
STARTUP_ENV_PREFIXES = ("BASH_", "LD_", "GIT_CONFIG", "GIT_SSH", "GEMINI_CLI_")
STARTUP_ENV_MESSAGE = (
    "this variable makes a shell or a tool run code on start or find other programs (BASH_ENV, "
    "ENV, PROMPT_COMMAND, SHELLOPTS, PATH, HOME, LD_*, GIT_CONFIG*, GIT_SSH*, NODE_OPTIONS, "
    "PYTHONSTARTUP, the agent CLIs' shell and config locations, ...) before any policy judges "
    "it: it cannot be set here; export it in a setup step, which the policy judges"
)


def _cel_strings(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{value}'" for value in values) + "]"


_STARTUP_ENV_RULE = cel(
    f"!(self.name in {_cel_strings(STARTUP_ENV_NAMES)} || "
    f"{_cel_strings(STARTUP_ENV_PREFIXES)}.exists(p, self.name.startsWith(p)))",
    STARTUP_ENV_MESSAGE,
)


def is_startup_env(name: str) -> bool:
    """Whether a variable of this name acts before the policy judges anything."""
    return name in STARTUP_ENV_NAMES or name.startswith(STARTUP_ENV_PREFIXES)


class EnvVar(ApiModel):
    """A plain environment variable. Credentials go under ``secrets`` instead."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(f"!self.name.matches('{CREDENTIAL_NAME_REGEX}')", CREDENTIAL_ENV_MESSAGE)
        )
    )

    name: EnvName = Field(description="Name of the environment variable.")
    value: str = Field(default="", max_length=32768, description="Value of the variable.")

    @model_validator(mode="after")
    def _no_inline_credential(self) -> EnvVar:
        if re.search(CREDENTIAL_NAME_REGEX, self.name):
            raise ValueError(CREDENTIAL_ENV_MESSAGE)
        return self


class SecretEnvVar(ApiModel):
    """An environment variable whose value comes from a Secret, never from the spec."""

    name: EnvName = Field(description="Name of the environment variable.")
    secret_key_ref: SecretKeySelector = Field(
        description="The Secret key that holds the value. The value itself never enters a spec, "
        "a status, an Event, a log line or the run's event log."
    )


class ContainerEnvVar(EnvVar):
    """A variable of processes in a sandbox (the container's own environment, which setup
    starts with, or a run's): none of the start-up variables."""

    model_config = ConfigDict(
        json_schema_extra=validations(
            cel(f"!self.name.matches('{CREDENTIAL_NAME_REGEX}')", CREDENTIAL_ENV_MESSAGE),
            _STARTUP_ENV_RULE,
        )
    )

    @model_validator(mode="after")
    def _no_startup_name(self) -> ContainerEnvVar:
        if is_startup_env(self.name):
            raise ValueError(STARTUP_ENV_MESSAGE)
        return self


class ContainerSecretEnvVar(SecretEnvVar):
    """A variable of processes in a sandbox from a Secret: none of the start-up variables."""

    model_config = ConfigDict(json_schema_extra=validations(_STARTUP_ENV_RULE))

    @model_validator(mode="after")
    def _no_startup_name(self) -> ContainerSecretEnvVar:
        if is_startup_env(self.name):
            raise ValueError(STARTUP_ENV_MESSAGE)
        return self


# --- status ------------------------------------------------------------------------------------


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """One aspect of the object's state, in the shape of metav1.Condition."""

    type: str = Field(max_length=316, description="Type of condition in CamelCase, e.g. Ready.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        default="", max_length=1024, description="Why the condition last changed, in CamelCase."
    )
    message: str = Field(default="", max_length=32768, description="What a person needs to know.")
    last_transition_time: datetime | None = Field(
        default=None, description="When the status last changed."
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation the condition was set for."
    )


S = TypeVar("S", bound=BaseModel)


def stored_status(model: type[S], obj: dict[str, Any]) -> S:
    """The object's status as ``model``; an empty one when what is stored does not validate
    (written by hand, or by another version of Paddock), so the reconcile starts afresh."""
    try:
        return model.model_validate(obj.get("status") or {})
    except ValidationError:
        return model()


Conditions = Annotated[
    list[Condition],
    Field(
        default_factory=list,
        description="Conditions of the object (Ready, ...), keyed on type.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    ),
]


# --- kinds -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get``; priority 1 shows only with ``-o wide``."""

    name: str
    json_path: str
    description: str
    type: str = "string"
    priority: int = 0


@dataclass(frozen=True)
class KindInfo:
    """What the CRD of a kind says besides its schema."""

    kind: str
    plural: str
    short_name: str
    columns: tuple[PrinterColumn, ...]
    max_name_length: int | None = None  # where the name becomes a label value or a host name
    name_becomes: str = "a label value and the pod's host name"  # why the name is limited
    scale: bool = False  # a /scale subresource on spec.replicas (kubectl scale, an HPA)

    @property
    def name_message(self) -> str:
        return (
            f"a {self.kind} name is at most {self.max_name_length} characters: it becomes "
            f"{self.name_becomes}"
        )


class Resource(ApiModel):
    """Base of the root kinds."""

    kind_info: ClassVar[KindInfo]

    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("metadata")
    @classmethod
    def _usable_name(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        info = cls.kind_info
        name = str(metadata.get("name") or "")
        if info.max_name_length is not None and len(name) > info.max_name_length:
            raise ValueError(info.name_message)
        return metadata
