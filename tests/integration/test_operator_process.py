"""``paddock operator`` as a process, the way the image runs it: JSON logs on request, every
line of them JSON, and no secret value in them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.kube import Cluster
from support.sandboxes import (
    assert_never_shown,
    sandbox,
    secret,
    wait_for_phase,
    workspace,
)

pytestmark = pytest.mark.integration

SECRET_VALUE = "json-log-secret-5e2d-never-printed"


def test_json_logs_are_json_and_hold_no_secret(
    cluster: Cluster, namespace: str, as_operator: str, tmp_path: Path
) -> None:
    log_file = tmp_path / "operator.log"
    cluster.apply(secret("creds", token=SECRET_VALUE), namespace)
    secrets = [{"name": "API_TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}}]
    process = subprocess.Popen(
        [sys.executable, "-m", "paddock.cli", "operator", "-n", namespace, "--liveness", "",
         "--log-format", "json", "--verbose"],
        env={**os.environ, "KUBECONFIG": as_operator},
        stdout=log_file.open("w"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        cluster.apply(workspace("app", secrets=secrets), namespace)
        cluster.apply(sandbox("box", "app"), namespace)
        wait_for_phase(cluster, namespace, "box", "Ready")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    output = log_file.read_text()
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) > 10, output
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all("message" in record for record in records)
    assert any("sandbox_changed" in record["message"] for record in records)
    assert_never_shown(SECRET_VALUE, {"operator log": output})
