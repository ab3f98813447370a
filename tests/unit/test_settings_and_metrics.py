"""Operator settings from the environment, the in-cluster API address, and the metrics'
bookkeeping (pure parts)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Gauge
from pydantic import ValidationError

from paddock.handlers.startup import in_cluster_server
from paddock.metrics import PhaseTracker
from paddock.settings import OperatorSettings


def test_settings_come_from_paddock_env_vars() -> None:
    settings = OperatorSettings.from_env(
        {"PADDOCK_METRICS_PORT": "9000", "PADDOCK_RESYNC_SECONDS": "5", "HOME": "/root"}
    )
    assert settings.metrics_port == 9000
    assert settings.tuning.resync_seconds == 5
    assert settings.logs.backend == "configmap"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"LOG_BACKEND": "s3"}, "needs s3_bucket"),
        ({"LOG_BACKEND": "s3", "S3_BUCKET": "Not_A_Bucket"}, "s3_bucket"),
        ({"S3_BUCKET": "logs", "S3_ACCESS_KEY_ID": "AKIA123"}, "together"),
        ({"S3_ENDPOINT": "s3.example.com"}, "s3_endpoint"),
        ({"LOG_BACKEND": "gcs"}, "log_backend"),
        ({"SNAPSHOT_STORE": "object"}, "snapshot_store object needs s3_bucket"),
        ({"SNAPSHOT_STORE": "tape"}, "snapshot_store"),
        ({"METRICS_PORT": "70000"}, "metrics_port"),
        ({"WORKER_LIMIT": "0"}, "worker_limit"),
    ],
)
def test_settings_refuse_what_they_cannot_honour(env: dict[str, str], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        OperatorSettings.from_env({f"PADDOCK_{name}": value for name, value in env.items()})


def test_s3_settings_keep_the_secret_key_out_of_their_text() -> None:
    settings = OperatorSettings.from_env(
        {
            "PADDOCK_LOG_BACKEND": "s3",
            "PADDOCK_S3_BUCKET": "team-logs",
            "PADDOCK_S3_ENDPOINT": "https://s3.example.internal:9000",
            "PADDOCK_S3_ACCESS_KEY_ID": "AKIA-visible-id",
            "PADDOCK_S3_SECRET_ACCESS_KEY": "never-printed-secret",
        }
    )
    assert settings.s3.secret_access_key is not None
    assert settings.s3.secret_access_key.get_secret_value() == "never-printed-secret"
    assert "never-printed-secret" not in repr(settings) + str(settings)


def test_phase_tracker_moves_one_object_between_phases_and_out() -> None:
    registry = CollectorRegistry()
    gauge = Gauge("things", "Things by phase.", ["phase"], registry=registry)
    tracker = PhaseTracker(gauge, ("phase",))

    def count(phase: str) -> float:
        return registry.get_sample_value("things", {"phase": phase}) or 0.0

    assert tracker.update("a", ("Pending",)) is None
    tracker.update("b", ("Pending",))
    assert tracker.update("a", ("Ready",)) == ("Pending",)
    assert (count("Pending"), count("Ready")) == (1, 1)
    tracker.update("a", ("Ready",))  # the same phase again: no double count
    assert count("Ready") == 1
    tracker.update("a", None)  # deleted
    assert (count("Pending"), count("Ready")) == (1, 0)


def test_in_cluster_server_comes_from_the_service_env_like_client_go() -> None:
    default = "https://kubernetes.default.svc"
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert in_cluster_server(env, default) == "https://10.0.0.1:443"
    env6 = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    assert in_cluster_server(env6, default) == "https://[fd00::1]:6443"
    assert in_cluster_server({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, default) == default
    assert in_cluster_server({}, default) == default


def test_every_phase_series_exists_from_the_start_and_no_created_series() -> None:
    import prometheus_client

    from paddock import __version__, metrics
    from paddock.api.agentrun import Harness, RunPhase
    from paddock.api.sandbox import SandboxPhase

    assert metrics.SANDBOXES is not None
    text = prometheus_client.generate_latest().decode()
    for phase in SandboxPhase:
        assert f'paddock_sandboxes{{phase="{phase}"}}' in text
    for phase in RunPhase:
        for harness in Harness:
            assert f'paddock_agentruns{{harness="{harness}",phase="{phase}"}}' in text
    assert f'paddock_build_info{{version="{__version__}"}} 1.0' in text
    assert "_created" not in text


def test_network_settings_read_comma_separated_values() -> None:
    settings = OperatorSettings.from_env(
        {
            "PADDOCK_NETWORK_INTERNAL_CIDRS": "10.0.0.0/8, fd00::/8",
            "PADDOCK_DNS_SERVERS": "169.254.20.10",
            "PADDOCK_DNS_POD_LABELS": "app=coredns,tier=dns",
        }
    )
    assert settings.network.internal_cidrs == ["10.0.0.0/8", "fd00::/8"]
    assert settings.network.dns_servers == ["169.254.20.10"]
    assert settings.network.dns_pod_labels == {"app": "coredns", "tier": "dns"}
    # Unset: the private and link-local ranges, and the usual labels of the cluster's DNS.
    default = OperatorSettings.from_env({})
    assert "169.254.0.0/16" in default.network.internal_cidrs
    assert default.network.dns_pod_labels == {"k8s-app": "kube-dns"}


def test_network_settings_refuse_what_is_not_a_network() -> None:
    with pytest.raises(ValidationError, match=r"10\.0\.0\.300"):
        OperatorSettings.from_env({"PADDOCK_DNS_SERVERS": "10.0.0.300"})
    with pytest.raises(ValidationError, match="KEY=VALUE"):
        OperatorSettings.from_env({"PADDOCK_DNS_POD_LABELS": "coredns"})


# Every variable a platform team sets, by the name it always had.
VARIABLES = (
    "SANDBOX_IMAGE", "SANDBOX_NODE_SELECTOR", "SANDBOX_TOLERATIONS", "SANDBOX_STORAGE_CLASS",
    "WORKER_LIMIT", "COALESCE_SECONDS", "REQUEST_TIMEOUT_SECONDS", "WATCH_SERVER_TIMEOUT_SECONDS",
    "LOG_BACKEND", "LOG_KEEP_AFTER_DELETE", "S3_ENDPOINT", "S3_BUCKET", "S3_PREFIX", "S3_REGION",
    "S3_PATH_STYLE", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY", "S3_CA_FILE",
    "THREAD_SANDBOX_IDLE_SECONDS", "RUN_TTL_SECONDS_AFTER_FINISHED", "METRICS_PORT",
    "RESYNC_SECONDS", "SNAPSHOTS_KEPT", "SNAPSHOT_STORE", "ARCHIVE_TIMEOUT_SECONDS",
    "RESTORE_TIMEOUT_SECONDS", "POLICY_DEFAULT", "POLICY_REQUIRED", "NETWORK_INTERNAL_CIDRS",
    "DNS_SERVERS", "DNS_NAMESPACE", "DNS_POD_LABELS", "GATEWAY_PROXY", "GATEWAY_PORT",
    "GATEWAY_NAMESPACE", "GATEWAY_POD_LABELS", "GATEWAY_CIDRS", "GATEWAY_MODEL_URL",
    "GATEWAY_MODEL_PORT", "RUN_START_GRACE_SECONDS", "MODEL_KEY_IN_SANDBOX",
    "SECRETS_IN_SANDBOX",
)  # fmt: skip


def test_settings_in_groups_keep_every_variables_name() -> None:
    assert sorted(OperatorSettings.variables()) == sorted(VARIABLES)
    settings = OperatorSettings.from_env(
        {"PADDOCK_S3_BUCKET": "logs", "PADDOCK_GATEWAY_PORT": "3200", "PADDOCK_SNAPSHOTS_KEPT": "5",
         "PADDOCK_DNS_NAMESPACE": "dns", "PADDOCK_WORKER_LIMIT": "7"}
    )  # fmt: skip
    assert (settings.s3.bucket, settings.gateway.port, settings.snapshots.kept) == ("logs", 3200, 5)
    assert (settings.network.dns_namespace, settings.tuning.worker_limit) == ("dns", 7)


def test_a_refused_setting_is_named_by_its_variable_not_its_place_in_a_group() -> None:
    with pytest.raises(ValidationError) as refused:
        OperatorSettings.from_env({"PADDOCK_GATEWAY_PORT": "0", "PADDOCK_S3_PREFIX": "a b"})
    assert sorted(e["loc"] for e in refused.value.errors()) == [("gateway_port",), ("s3_prefix",)]


@pytest.mark.parametrize(
    "env",
    [
        {"S3_BUCKET": "logs"},  # the key without its id: the group refuses, with all it was given
        {"LOG_BACKEND": "s3", "S3_ACCESS_KEY_ID": "AKIA-id"},  # every setting refused at once
    ],
)
def test_a_refusal_never_shows_the_secret_key(env: dict[str, str]) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    given = {f"PADDOCK_{k}": v for k, v in env.items()} | {"PADDOCK_S3_SECRET_ACCESS_KEY": secret}
    with pytest.raises(ValidationError) as refused:
        OperatorSettings.from_env(given)
    said = str(refused.value) + repr(refused.value.errors())
    assert not any(secret[i : i + 8] in said for i in range(len(secret) - 8))
