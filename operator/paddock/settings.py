"""Operator settings: defaults a platform team overrides with PADDOCK_* environment variables
(an empty variable is the same as an unset one)."""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from paddock.render.network_policy import PRIVATE_V4, PRIVATE_V6

ENV_PREFIX = "PADDOCK_"


class OperatorSettings(BaseModel):
    """How this operator instance behaves. Each field reads ``PADDOCK_<FIELD_NAME>``."""

    sandbox_image: str = Field(
        default="localhost/paddock-sandbox:latest",
        description="Image of sandboxes whose Workspace and Sandbox name none.",
    )
    worker_limit: int = Field(
        default=20, ge=1, description="Most resources reconciled at once (kopf queueing)."
    )
    coalesce_seconds: float = Field(
        default=0.5,
        ge=0,
        le=10,
        description="How long a Sandbox waits after a change of one of its parts (pod, PVC, "
        "files, NetworkPolicy, Workspace, policy) before it is reconciled: the changes within "
        "it become one reconcile (and at most one status write).",
    )
    request_timeout_seconds: float = Field(
        default=60, gt=0, description="Longest one Kubernetes API request may take."
    )
    watch_server_timeout_seconds: int = Field(
        default=300, gt=0, description="Server-side timeout of each watch; watches reconnect."
    )
    log_backend: Literal["configmap"] = Field(
        default="configmap",
        description="Where run event logs go: configmap (ConfigMaps owned by each run). An "
        "object-store backend is planned; naming it now is an error, not a silent fallback.",
    )
    metrics_port: int = Field(
        default=8081, ge=0, le=65535, description="Port of the Prometheus metrics; 0: off."
    )
    resync_seconds: float = Field(
        default=60,
        gt=0,
        description="How often a Sandbox with an idle timeout is looked at without a change "
        "(it reads from the watches, and writes only when it pauses). Changes to a Sandbox, "
        "its pod, PVC, files, NetworkPolicy, Workspace or SandboxPolicy act at once.",
    )

    snapshots_kept: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Most ready snapshots kept per Workspace (the newest); older ones, and "
        "those of a superseded workspace hash or past their snapshotMaxAge, are deleted once no "
        "sandbox is being restored from them.",
    )
    restore_timeout_seconds: float = Field(
        default=300,
        gt=0,
        description="How long a sandbox's volume may take to be restored from a snapshot before "
        "the sandbox gives up on it and is set up from scratch (a cold start).",
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

    network_internal_cidrs: list[str] = Field(
        default=[*PRIVATE_V4, *PRIVATE_V6],
        description="Ranges a sandbox with capabilities.network: allow never reaches (unless its "
        "policy's network.egress names them): the cluster's pod, service and node ranges and "
        "the link-local range of the metadata address. Comma-separated. The nodes' and the API "
        "server's own addresses are left out as well, as the operator learns them from the API.",
    )
    dns_servers: list[str] = Field(
        default=[],
        description="Addresses, besides the cluster's DNS pods, that sandboxes may send DNS "
        "queries to (port 53) when their policy allows DNS: a node-local DNS cache, or the "
        "resolver of pods that do not use the cluster's DNS. Comma-separated.",
    )
    dns_namespace: str = Field(
        default="kube-system", description="Namespace of the cluster's DNS pods."
    )
    dns_pod_labels: dict[str, str] = Field(
        default={"k8s-app": "kube-dns"},
        description="Labels of the cluster's DNS pods, as KEY=VALUE[,KEY=VALUE].",
    )

    @field_validator("network_internal_cidrs", "dns_servers", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("dns_pod_labels", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        if isinstance(value, str):
            pairs = [item.strip() for item in value.split(",") if item.strip()]
            if not all("=" in pair for pair in pairs):
                raise ValueError("expected KEY=VALUE[,KEY=VALUE]")
            return dict(pair.split("=", 1) for pair in pairs)
        return value

    @field_validator("network_internal_cidrs", "dns_servers")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            ipaddress.ip_network(item)  # ValueError names the item
        return value

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> OperatorSettings:
        environ = dict(os.environ if environ is None else environ)
        values: dict[str, Any] = {
            name: environ[ENV_PREFIX + name.upper()]
            for name in cls.model_fields
            if environ.get(ENV_PREFIX + name.upper())  # empty is the same as unset
        }
        return cls.model_validate(values)
