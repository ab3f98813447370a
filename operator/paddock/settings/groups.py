"""The operator's settings that go together, each group a model of its own: a service is
given only the group it uses. Each setting keeps its flat name (``FLAT``), which is its
``PADDOCK_*`` variable's."""

from __future__ import annotations

import ipaddress
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from paddock.vocab.networks import PRIVATE_V4, PRIVATE_V6


def comma_separated(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def labels(value: Any) -> Any:
    if isinstance(value, str):
        pairs = [item.strip() for item in value.split(",") if item.strip()]
        if not all("=" in pair for pair in pairs):
            raise ValueError("expected KEY=VALUE[,KEY=VALUE]")
        return dict(pair.split("=", 1) for pair in pairs)
    return value


def networks(value: list[str]) -> list[str]:
    for item in value:
        ipaddress.ip_network(item)  # ValueError names the item
    return value


class Group(BaseModel):
    """Settings that go together. ``FLAT``: each one's flat name (its variable's, without the
    prefix) and its field."""

    FLAT: ClassVar[dict[str, str]] = {}


class S3Settings(Group):
    """The bucket of run logs and archives (``PADDOCK_S3_*``)."""

    FLAT: ClassVar[dict[str, str]] = {
        "s3_endpoint": "endpoint",
        "s3_bucket": "bucket",
        "s3_prefix": "prefix",
        "s3_region": "region",
        "s3_path_style": "path_style",
        "s3_access_key_id": "access_key_id",
        "s3_secret_access_key": "secret_access_key",
        "s3_ca_file": "ca_file",
    }

    endpoint: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="URL of the S3-compatible server; unset: AWS S3 of s3_region.",
    )
    bucket: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="Bucket of run logs (it must exist).",
    )
    prefix: str = Field(
        default="paddock",
        pattern=r"^[A-Za-z0-9!_.*'()/-]*$",
        description="Key prefix of everything Paddock stores; run logs are under "
        "PREFIX/runs/NAMESPACE/RUN/UID/.",
    )
    region: str = Field(default="us-east-1", description="Region of the bucket.")
    path_style: bool = Field(
        default=False,
        description="Address the bucket by path (ENDPOINT/BUCKET/KEY), as most self-hosted "
        "servers want, not by host name (BUCKET.ENDPOINT).",
    )
    access_key_id: SecretStr | None = Field(
        default=None,
        description="Access key; unset with the secret key: the standard AWS chain (AWS_* "
        "environment, web identity, instance metadata).",
    )
    secret_access_key: SecretStr | None = Field(default=None, description="Secret key.")
    ca_file: str | None = Field(
        default=None,
        description="PEM file of CA certificates the server's certificate is checked "
        "against, besides the system's.",
    )

    def store(self) -> dict[str, Any] | None:
        """The bucket, as ``objectstore.S3Config`` takes it; None when no bucket is set."""
        if not self.bucket:
            return None
        key, secret = self.access_key_id, self.secret_access_key
        return {
            "bucket": self.bucket,
            "endpoint": self.endpoint,
            "region": self.region,
            "path_style": self.path_style,
            "access_key_id": key.get_secret_value() if key else None,
            "secret_access_key": secret.get_secret_value() if secret else None,
            "ca_file": self.ca_file,
        }

    @model_validator(mode="after")
    def _keys_together(self) -> S3Settings:
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError(
                "s3_access_key_id and s3_secret_access_key are given together or not at all"
            )
        return self


class LogSettings(Group):
    """Where runs' event logs go (``PADDOCK_LOG_*``)."""

    FLAT: ClassVar[dict[str, str]] = {
        "log_backend": "backend",
        "log_keep_after_delete": "keep_after_delete",
    }

    backend: Literal["configmap", "s3"] = Field(
        default="configmap",
        description="Where new runs' event logs go: configmap (ConfigMaps owned by each run) "
        "or s3 (objects in the bucket of the s3_* settings). A run keeps the backend it "
        "started with.",
    )
    keep_after_delete: bool = Field(
        default=False,
        description="s3: keep a run's log objects when the run is deleted (for the bucket's "
        "own lifecycle rules to expire); else they are deleted with it.",
    )


class SnapshotSettings(Group):
    """How sandboxes' volumes are snapshotted and restored."""

    FLAT: ClassVar[dict[str, str]] = {
        "snapshots_kept": "kept",
        "snapshot_store": "store",
        "archive_timeout_seconds": "archive_timeout_seconds",
        "restore_timeout_seconds": "restore_timeout_seconds",
    }

    kept: int = Field(
        default=3,
        ge=1,
        le=100,
        description="Most ready snapshots kept per Workspace (the newest); older ones, and "
        "those of a superseded workspace hash or past their snapshotMaxAge, are deleted once no "
        "sandbox is being restored from them.",
    )
    store: Literal["auto", "volume", "object"] = Field(
        default="auto",
        description="Where a sandbox's snapshots go: volume (VolumeSnapshots only), object "
        "(archives of the volume's files in the bucket of the s3_* settings), or auto "
        "(a VolumeSnapshot where a VolumeSnapshotClass fits the volume, else an archive when "
        "s3_bucket is set).",
    )
    archive_timeout_seconds: float = Field(
        default=1800,
        gt=0,
        description="How long making an archive of a workspace volume may take before it is "
        "given up (SnapshotFailed); while it is made, the sandbox is not Ready yet.",
    )
    restore_timeout_seconds: float = Field(
        default=300,
        gt=0,
        description="How long a sandbox's volume may take to be restored from a snapshot before "
        "the sandbox gives up on it and is set up from scratch (a cold start).",
    )


class NetworkSettings(Group):
    """What a sandbox's fence leaves out, and the DNS it may ask."""

    FLAT: ClassVar[dict[str, str]] = {
        "network_internal_cidrs": "internal_cidrs",
        "dns_servers": "dns_servers",
        "dns_namespace": "dns_namespace",
        "dns_pod_labels": "dns_pod_labels",
    }

    internal_cidrs: list[str] = Field(
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

    _listed = field_validator("internal_cidrs", "dns_servers", mode="before")(comma_separated)
    _labelled = field_validator("dns_pod_labels", mode="before")(labels)
    _checked = field_validator("internal_cidrs", "dns_servers")(networks)


class GatewaySettings(Group):
    """The egress gateway, as sandboxes reach it (``PADDOCK_GATEWAY_*``)."""

    FLAT: ClassVar[dict[str, str]] = {
        "gateway_proxy": "proxy",
        "gateway_port": "port",
        "gateway_namespace": "namespace",
        "gateway_pod_labels": "pod_labels",
        "gateway_cidrs": "cidrs",
        "gateway_model_url": "model_url",
        "gateway_model_port": "model_port",
    }

    proxy: str | None = Field(
        default=None,
        pattern=r"^http://[^\s/@]+:[0-9]+/?$",
        description="The egress gateway (paddock gateway), as the URL sandboxes use as their "
        "HTTP(S)_PROXY, e.g. http://paddock-gateway.paddock-system.svc:3128. Unset: no "
        "gateway, and a policy's network.hosts does not apply (its sandboxes say so).",
    )
    port: int = Field(
        default=3128, ge=1, le=65535, description="The port the gateway's pods listen on."
    )
    namespace: str | None = Field(
        default=None, description="Namespace of the gateway's pods (with gateway_pod_labels)."
    )
    pod_labels: dict[str, str] = Field(
        default={},
        description="Labels of the gateway's pods, as KEY=VALUE[,KEY=VALUE]: sandboxes with "
        "network.hosts may connect to these pods and to gateway_cidrs, on gateway_port.",
    )
    cidrs: list[str] = Field(
        default=[],
        description="Addresses of a gateway outside the pod network (comma-separated), "
        "instead of or besides its pods.",
    )
    model_url: str | None = Field(
        default=None,
        pattern=r"^http://[^\s/@]+:[0-9]+$",
        description="The gateway's model route, as sandboxes reach it, e.g. "
        "http://paddock-gateway.paddock-system.svc:3130: a run's modelKey is then held there "
        "(a Secret per run in gateway_namespace), never put in the sandbox. Every sandbox may "
        "connect to the gateway on gateway_model_port. Unset: a modelKey is given to the "
        "harness in its environment.",
    )
    model_port: int = Field(
        default=3130, ge=1, le=65535, description="The port the gateway's model route listens on."
    )

    _listed = field_validator("cidrs", mode="before")(comma_separated)
    _labelled = field_validator("pod_labels", mode="before")(labels)
    _checked = field_validator("cidrs")(networks)

    @model_validator(mode="after")
    def _reachable(self) -> GatewaySettings:
        if self.proxy and not (self.cidrs or self.pod_labels):
            raise ValueError(
                "gateway_proxy needs gateway_pod_labels (with gateway_namespace) or "
                "gateway_cidrs: sandboxes' NetworkPolicies let them reach only those"
            )
        if self.model_url and not (self.proxy and self.namespace):
            raise ValueError(
                "gateway_model_url needs gateway_proxy and gateway_namespace (where the "
                "gateway reads the runs' model routes)"
            )
        return self


class Tuning(Group):
    """How hard the operator works and how long it waits on the API server."""

    FLAT: ClassVar[dict[str, str]] = {
        "worker_limit": "worker_limit",
        "coalesce_seconds": "coalesce_seconds",
        "request_timeout_seconds": "request_timeout_seconds",
        "watch_server_timeout_seconds": "watch_server_timeout_seconds",
        "resync_seconds": "resync_seconds",
    }

    worker_limit: int = Field(
        default=20,
        ge=1,
        description="Threads of each kind: kopf's handlers, the Sandbox reconciles, a "
        "pool's creates, runs running and, apart, three times as many starting runs (kopf's "
        "per-object asyncio workers are not bounded).",
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
    resync_seconds: float = Field(
        default=60,
        gt=0,
        description="How often a Sandbox with an idle timeout is looked at without a change "
        "(it reads from the watches, and writes only when it pauses). Changes to a Sandbox, "
        "its pod, PVC, files, NetworkPolicy, Workspace or SandboxPolicy act at once.",
    )
