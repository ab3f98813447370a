"""Operator settings: defaults a platform team overrides with PADDOCK_* environment variables
(an empty variable is the same as an unset one)."""

from __future__ import annotations

import ipaddress
import json
import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from paddock import __version__
from paddock.api.sandbox import Toleration
from paddock.vocab.networks import PRIVATE_V4, PRIVATE_V6

ENV_PREFIX = "PADDOCK_"


class OperatorSettings(BaseModel):
    """How this operator instance behaves. Each field reads ``PADDOCK_<FIELD_NAME>``."""

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
    worker_limit: int = Field(
        default=20,
        ge=1,
        description="Most resources reconciled at once (kopf queueing); as many threads "
        "reconcile, step runs starting, and, apart, runs running.",
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
    log_backend: Literal["configmap", "s3"] = Field(
        default="configmap",
        description="Where new runs' event logs go: configmap (ConfigMaps owned by each run) "
        "or s3 (objects in the bucket of the s3_* settings). A run keeps the backend it "
        "started with.",
    )
    log_keep_after_delete: bool = Field(
        default=False,
        description="s3: keep a run's log objects when the run is deleted (for the bucket's "
        "own lifecycle rules to expire); else they are deleted with it.",
    )
    s3_endpoint: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/]+(/\S*)?$",
        description="URL of the S3-compatible server; unset: AWS S3 of s3_region.",
    )
    s3_bucket: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
        description="Bucket of run logs (it must exist).",
    )
    s3_prefix: str = Field(
        default="paddock",
        pattern=r"^[A-Za-z0-9!_.*'()/-]*$",
        description="Key prefix of everything Paddock stores; run logs are under "
        "PREFIX/runs/NAMESPACE/RUN/UID/.",
    )
    s3_region: str = Field(default="us-east-1", description="Region of the bucket.")
    s3_path_style: bool = Field(
        default=False,
        description="Address the bucket by path (ENDPOINT/BUCKET/KEY), as most self-hosted "
        "servers want, not by host name (BUCKET.ENDPOINT).",
    )
    s3_access_key_id: SecretStr | None = Field(
        default=None,
        description="Access key; unset with the secret key: the standard AWS chain (AWS_* "
        "environment, web identity, instance metadata).",
    )
    s3_secret_access_key: SecretStr | None = Field(default=None, description="Secret key.")
    s3_ca_file: str | None = Field(
        default=None,
        description="PEM file of CA certificates the server's certificate is checked "
        "against, besides the system's.",
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
    snapshot_store: Literal["auto", "volume", "object"] = Field(
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

    gateway_proxy: str | None = Field(
        default=None,
        pattern=r"^http://[^\s/@]+:[0-9]+/?$",
        description="The egress gateway (paddock gateway), as the URL sandboxes use as their "
        "HTTP(S)_PROXY, e.g. http://paddock-gateway.paddock-system.svc:3128. Unset: no "
        "gateway, and a policy's network.hosts does not apply (its sandboxes say so).",
    )
    gateway_port: int = Field(
        default=3128, ge=1, le=65535, description="The port the gateway's pods listen on."
    )
    gateway_namespace: str | None = Field(
        default=None, description="Namespace of the gateway's pods (with gateway_pod_labels)."
    )
    gateway_pod_labels: dict[str, str] = Field(
        default={},
        description="Labels of the gateway's pods, as KEY=VALUE[,KEY=VALUE]: sandboxes with "
        "network.hosts may connect to these pods and to gateway_cidrs, on gateway_port.",
    )
    gateway_cidrs: list[str] = Field(
        default=[],
        description="Addresses of a gateway outside the pod network (comma-separated), "
        "instead of or besides its pods.",
    )
    gateway_model_url: str | None = Field(
        default=None,
        pattern=r"^http://[^\s/@]+:[0-9]+$",
        description="The gateway's model route, as sandboxes reach it, e.g. "
        "http://paddock-gateway.paddock-system.svc:3130: a run's modelKey is then held there "
        "(a Secret per run in gateway_namespace), never put in the sandbox. Every sandbox may "
        "connect to the gateway on gateway_model_port. Unset: a modelKey is given to the "
        "harness in its environment.",
    )
    gateway_model_port: int = Field(
        default=3130, ge=1, le=65535, description="The port the gateway's model route listens on."
    )
    run_start_grace_seconds: int = Field(
        default=300,
        ge=1,
        description="How long a run may wait for a sandbox, pool, Secret or prompt that does "
        "not exist before it reads Stalled (GitOps tools: Failed); it starts when they come.",
    )
    model_key_in_sandbox: Literal["allow", "refuse"] = Field(
        default="allow",
        description="refuse: every run whose model key would be in its sandbox (a modelKey "
        "without gateway_model_url, or a secret under a name an agent CLI reads its key "
        "from) fails KeyInSandboxRefused, whatever its SandboxPolicy says.",
    )

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

    def s3_store(self) -> dict[str, Any] | None:
        """The bucket of the ``s3_*`` settings, as ``objectstore.S3Config`` takes it; None when
        no bucket is set."""
        if not self.s3_bucket:
            return None
        key, secret = self.s3_access_key_id, self.s3_secret_access_key
        return {
            "bucket": self.s3_bucket,
            "endpoint": self.s3_endpoint,
            "region": self.s3_region,
            "path_style": self.s3_path_style,
            "access_key_id": key.get_secret_value() if key else None,
            "secret_access_key": secret.get_secret_value() if secret else None,
            "ca_file": self.s3_ca_file,
        }

    @model_validator(mode="after")
    def _s3_complete(self) -> OperatorSettings:
        if self.log_backend == "s3" and not self.s3_bucket:
            raise ValueError("log_backend s3 needs s3_bucket (PADDOCK_S3_BUCKET)")
        if self.snapshot_store == "object" and not self.s3_bucket:
            raise ValueError("snapshot_store object needs s3_bucket (PADDOCK_S3_BUCKET)")
        gateway_peers = bool(self.gateway_cidrs) or bool(self.gateway_pod_labels)
        if self.gateway_proxy and not gateway_peers:
            raise ValueError(
                "gateway_proxy needs gateway_pod_labels (with gateway_namespace) or "
                "gateway_cidrs: sandboxes' NetworkPolicies let them reach only those"
            )
        if self.gateway_model_url and not (self.gateway_proxy and self.gateway_namespace):
            raise ValueError(
                "gateway_model_url needs gateway_proxy and gateway_namespace (where the "
                "gateway reads the runs' model routes)"
            )
        if (self.s3_access_key_id is None) != (self.s3_secret_access_key is None):
            raise ValueError(
                "s3_access_key_id and s3_secret_access_key are given together or not at all"
            )
        return self

    @field_validator("network_internal_cidrs", "dns_servers", "gateway_cidrs", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("sandbox_tolerations", mode="before")
    @classmethod
    def _json_list(cls, value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("dns_pod_labels", "gateway_pod_labels", "sandbox_node_selector", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        if isinstance(value, str):
            pairs = [item.strip() for item in value.split(",") if item.strip()]
            if not all("=" in pair for pair in pairs):
                raise ValueError("expected KEY=VALUE[,KEY=VALUE]")
            return dict(pair.split("=", 1) for pair in pairs)
        return value

    @field_validator("network_internal_cidrs", "dns_servers", "gateway_cidrs")
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
