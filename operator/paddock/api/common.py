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

ObjectName = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
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

    @property
    def name_message(self) -> str:
        return (
            f"a {self.kind} name is at most {self.max_name_length} characters: it becomes a "
            "label value and the pod's host name"
        )


class Resource(ApiModel):
    """Base of the four root kinds."""

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
