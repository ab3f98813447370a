"""Run logs in the local cluster's real S3 server (versitygw): written as numbered objects,
replayed and followed by ``paddock logs``, gap-free through an operator SIGKILLed mid-run and
through the server stopped mid-run, a clear condition for wrong credentials, deleted with the
run (or kept), and the chart's S3 configuration accepted by the server."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from paddock.agentruns import logstore
from paddock.objectstore import client as objectstore_client
from paddock.runs import objectlog
from paddock.settings import OperatorSettings
from paddock_dev import object_store
from paddock_dev.binaries import ensure_binaries
from paddock_dev.cluster import ClusterState, default_state_dir
from support.helm import CHART, KUBE_VERSION, run_helm
from support.kube import Cluster, object_store_in_use
from support.objects import ObjectStore
from support.runs import command_run, log_events, of_type, run_through_kills, wait_for_run
from support.sandboxes import assert_never_shown, condition, get, posted, ready_sandbox, status_of
from support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _store_in_use(request: pytest.FixtureRequest) -> Iterator[None]:
    """Shared with other workers' users of the store; alone for the test that stops it."""
    alone = request.function is test_the_server_stopped_mid_run_is_caught_up_with_nothing_lost
    with object_store_in_use(alone=alone):
        yield


@pytest.fixture(scope="session")
def store(cluster: Cluster) -> ObjectStore:
    return ObjectStore.of(cluster)


@pytest.fixture
def s3_logs(store: ObjectStore, namespace: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Operators started by the test write run logs to the bucket, under a prefix of the
    test's own; ``paddock logs`` reads them with the store's credentials."""
    prefix = f"tests/{namespace}"
    for name, value in {**store.operator_env(prefix), **store.reader_env()}.items():
        monkeypatch.setenv(name, value)
    return prefix


def run_prefix(cluster: Cluster, prefix: str, namespace: str, name: str) -> str:
    run = get(cluster, namespace, "agentrun", name)
    assert run is not None
    return objectlog.run_prefix(f"{prefix}/runs", run)


def lines(count: int, pause: float) -> str:
    return f"for i in $(seq 0 {count - 1}); do echo line $i; sleep {pause}; done"


def assert_whole(events: list[dict[str, Any]], count: int) -> None:
    """Every seq once, in order, and every line the command printed, once."""
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [e["data"]["text"] for e in of_type(events, "output")] == [
        f"line {i}" for i in range(count)
    ]
    assert [e["type"] for e in events].count("run.started") == 1


def test_a_run_log_in_the_bucket_is_replayed_and_followed(
    cluster: Cluster, namespace: str, s3_logs: str, operator: Any, store: ObjectStore
) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("chatty", "box", lines(40, 0.05)), namespace)
    follower = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "logs", "chatty", "-n", namespace, "--follow",
         "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
    )  # fmt: skip
    try:
        status = wait_for_run(cluster, namespace, "chatty")
        followed, errors = follower.communicate(timeout=60)
    finally:
        follower.kill()
    assert follower.returncode == 0, errors
    assert status["phase"] == "Succeeded", status

    events = log_events(cluster, namespace, "chatty")
    assert_whole(events, 40)
    assert [json.loads(line) for line in followed.splitlines()] == events
    assert status["eventCount"] == len(events)

    prefix = run_prefix(cluster, s3_logs, namespace, "chatty")
    assert status["log"] == {
        "backend": "s3",
        "location": f"s3://{store.bucket}/{prefix}",
        "endpoint": store.endpoint,
        "region": store.region,
        "pathStyle": True,
    }
    keys = store.keys(prefix)
    assert len(keys) > 1, keys  # batches as the run printed, one object a write
    assert objectlog.first_seq(keys[0]) == 0
    uid = get(cluster, namespace, "agentrun", "chatty")["metadata"]["uid"]  # type: ignore[index]
    chunks = cluster.kubectl(
        "get", "configmaps", "-n", namespace, "-l", f"paddock.dev/run-uid={uid}", "-o", "name"
    ).stdout
    assert chunks == ""  # nothing of the log in etcd

    later = cluster.paddock("logs", "chatty", "-n", namespace, "--from-seq", "7", "-o", "json")
    assert [json.loads(line) for line in later.stdout.splitlines()] == events[7:]


def test_a_run_whose_first_poll_brings_no_output_ends_with_its_late_output(
    cluster: Cluster, namespace: str, s3_logs: str, operator: Any
) -> None:
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("late", "box", "sleep 3; echo late"), namespace)
    status = wait_for_run(cluster, namespace, "late")
    assert status["phase"] == "Succeeded", status
    events = log_events(cluster, namespace, "late")
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [e["data"]["text"] for e in of_type(events, "output")] == ["late"]


def test_operator_killed_mid_run_leaves_a_gap_free_s3_log_without_duplicates(
    cluster: Cluster, namespace: str, s3_logs: str, as_operator: str
) -> None:
    count = 300
    run = command_run("steady", "box", lines(count, 0.02))
    status = run_through_kills(cluster, namespace, as_operator, run, (20, 150))
    assert status["phase"] == "Succeeded"
    assert status["log"]["backend"] == "s3"
    events = log_events(cluster, namespace, "steady")
    assert_whole(events, count)
    assert status["eventCount"] == len(events)


@pytest.fixture
def local_state() -> ClusterState:
    state = ClusterState.load(default_state_dir())
    assert state is not None
    return state


def test_the_server_stopped_mid_run_is_caught_up_with_nothing_lost(
    cluster: Cluster, namespace: str, s3_logs: str, operator: Any, local_state: ClusterState
) -> None:
    count = 200
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("patient", "box", lines(count, 0.05)), namespace)
    wait_for(
        lambda: (
            int(status_of(cluster, namespace, "agentrun", "patient").get("eventCount") or 0) >= 10
        ),
        60,
        what="the first events",
    )
    object_store.stop(local_state)
    try:
        stalled = wait_for(
            lambda: (c := condition(status_of(cluster, namespace, "agentrun", "patient"),
                                    "Progressing")).get("status") == "False" and c,
            60, what="the run to say its log store is down",
        )  # fmt: skip
    finally:
        object_store.restart(ensure_binaries(), local_state)
    assert stalled["reason"] == "LogStoreUnavailable", stalled
    assert "object store" in stalled["message"]

    status = wait_for_run(cluster, namespace, "patient", timeout=120)
    assert status["phase"] == "Succeeded", status
    assert_whole(log_events(cluster, namespace, "patient"), count)
    assert condition(status, "Progressing")["status"] == "True"


def test_wrong_credentials_are_a_clear_condition_and_never_shown(
    cluster: Cluster,
    namespace: str,
    s3_logs: str,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    wrong = "wrong-secret-7f3a9c-never-to-be-seen"
    monkeypatch.setenv("PADDOCK_S3_SECRET_ACCESS_KEY", wrong)
    request.getfixturevalue("operator")  # started with the wrong key
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("denied", "box", "echo hello"), namespace)

    refused = wait_for(
        lambda: (c := condition(status_of(cluster, namespace, "agentrun", "denied"),
                                "Progressing")).get("status") == "False" and c,
        60, what="the run to say the store refused it",
    )  # fmt: skip
    assert refused["reason"] == "LogStoreDenied", refused
    assert "SignatureDoesNotMatch" in refused["message"], refused
    assert posted(cluster, namespace, "denied", "LogStoreDenied")[0]["type"] == "Warning"
    assert_never_shown(
        wrong,
        {
            "run": cluster.kubectl(
                "get", "agentrun", "denied", "-n", namespace, "-o", "json"
            ).stdout,
            "events": cluster.kubectl("get", "events", "-n", namespace, "-o", "json").stdout,
        },
    )


@pytest.mark.parametrize("keep", [False, True], ids=["deleted", "kept"])
def test_deleting_a_run_deletes_its_log_objects_unless_kept(
    cluster: Cluster,
    namespace: str,
    s3_logs: str,
    store: ObjectStore,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    keep: bool,
) -> None:
    monkeypatch.setenv("PADDOCK_LOG_KEEP_AFTER_DELETE", str(keep).lower())
    request.getfixturevalue("operator")
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("brief", "box", "echo hello"), namespace)
    assert wait_for_run(cluster, namespace, "brief")["phase"] == "Succeeded"
    prefix = run_prefix(cluster, s3_logs, namespace, "brief")
    assert store.keys(prefix)

    cluster.kubectl("delete", "agentrun", "brief", "-n", namespace, "--timeout=60s")
    assert get(cluster, namespace, "agentrun", "brief") is None
    assert bool(store.keys(prefix)) is keep


@pytest.fixture
def rendered(helm: str, store: ObjectStore) -> list[dict[str, Any]]:
    values = [
        "--set", "operator.logBackend=s3",
        "--set", f"objectStore.endpoint={store.endpoint}",
        "--set", f"objectStore.bucket={store.bucket}",
        "--set", "objectStore.pathStyle=true",
        "--set", "objectStore.prefix=tests/chart",
        "--set", f"objectStore.credentialsSecret={object_store.SECRET}",
    ]  # fmt: skip
    text = run_helm(
        helm, "template", KUBE_VERSION, "paddock", str(CHART), "-n", object_store.NAMESPACE, *values
    )
    return [doc for doc in yaml.safe_load_all(text) if doc]


def test_the_charts_s3_configuration_is_accepted_by_the_server(
    cluster: Cluster, rendered: list[dict[str, Any]], store: ObjectStore
) -> None:
    """The operator's environment as the chart's Deployment gives it (its settings ConfigMap,
    and the credentials from the Secret it names, resolved as the kubelet would) is a
    configuration the server takes a log write and read with."""
    settings_map = next(d for d in rendered if d["kind"] == "ConfigMap")
    deployment = next(d for d in rendered if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = dict(settings_map["data"])
    secret = json.loads(
        cluster.kubectl(
            "get", "secret", object_store.SECRET, "-n", object_store.NAMESPACE, "-o", "json"
        ).stdout
    )
    for item in container["env"]:
        ref = item["valueFrom"]["secretKeyRef"]
        assert ref["name"] == object_store.SECRET
        env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()

    settings = OperatorSettings.from_env(env)
    run = {"metadata": {"namespace": "chart", "name": "probe", "uid": "0000-probe"}}
    prefix = logstore.logs_prefix(settings)
    assert prefix == "tests/chart/runs"
    log = objectlog.ObjectLog(
        run, objectstore_client.bucket(logstore.s3_config(settings.s3)), prefix
    )
    log.load()
    log.append([{"seq": 0, "type": "output", "summary": "hi", "data": {}}], {"stdout": 3})
    events, cursor = objectlog.ObjectLog(run, log.bucket, prefix).load()
    assert [e["seq"] for e in events] == [0]
    assert cursor == {"stdout": 3}
    log.bucket.delete(store.keys("tests/chart/"))
