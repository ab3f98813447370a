"""The local cluster's object store: Versity's S3 gateway over a directory (its POSIX backend),
with one bucket, for run logs. Its credentials are made at start, given to the gateway in its
environment (never in its argv, which ``ps`` shows), and kept in a Secret of the cluster, which
is how the operator and the tests learn them, as they would on a real cluster."""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from paddock_dev.binaries import Binaries
from paddock_dev.processes import ClusterState, spawn, terminate, wait_until

COMPONENT = "object-store"
BUCKET = "paddock"
REGION = "us-east-1"
NAMESPACE = "paddock-system"
SECRET = "paddock-object-store"  # noqa: S105 (a name)
ACCESS_KEY = "AWS_ACCESS_KEY_ID"
SECRET_KEY = "AWS_SECRET_ACCESS_KEY"  # noqa: S105 (a key name)

Kubectl = Callable[..., str]


def root(state: ClusterState) -> Path:
    return state.directory / "object-store"


def endpoint(state: ClusterState) -> str:
    return f"http://127.0.0.1:{state.ports[COMPONENT]}"


def _credentials_file(state: ClusterState) -> Path:
    return root(state) / "credentials.json"


def start(binaries: Binaries, state: ClusterState, kubectl: Kubectl) -> None:
    """Start the gateway (making its bucket and credentials the first time) and publish the
    credentials as the Secret ``paddock-system/paddock-object-store``."""
    first = not _credentials_file(state).is_file()
    if first:
        (root(state) / "data" / BUCKET).mkdir(parents=True)  # a directory is a bucket
        _credentials_file(state).touch(mode=0o600)
        _credentials_file(state).write_text(
            json.dumps({ACCESS_KEY: secrets.token_hex(10), SECRET_KEY: secrets.token_hex(20)})
        )
    restart(binaries, state)
    kubectl("apply", "-f", "-", stdin=json.dumps(_namespace()))
    kubectl("apply", "-f", "-", stdin=json.dumps(_secret(state)))


def restart(binaries: Binaries, state: ClusterState) -> None:
    """Start the gateway on its port, with the data and credentials it had."""
    keys = json.loads(_credentials_file(state).read_text())
    argv = [
        str(binaries.versitygw),
        "--port", f"127.0.0.1:{state.ports[COMPONENT]}",
        "--region", REGION,
        "--quiet",
        "posix", "--sidecar", str(root(state) / "meta"), str(root(state) / "data"),
    ]  # fmt: skip
    (root(state) / "meta").mkdir(exist_ok=True)
    env = {"ROOT_ACCESS_KEY_ID": keys[ACCESS_KEY], "ROOT_SECRET_ACCESS_KEY": keys[SECRET_KEY]}
    process = spawn(state, COMPONENT, argv, env=env)
    wait_until(state, COMPONENT, process, lambda: _answers(endpoint(state)), "serving S3")


def stop(state: ClusterState) -> None:
    """Stop the gateway, keeping its data (``restart`` serves it again)."""
    pid = state.pids.get(COMPONENT)
    if pid is not None:
        terminate([pid])


def _answers(url: str) -> bool:
    """An S3 endpoint answers an unsigned request with an HTTP error (403): it is serving."""
    try:
        urllib.request.urlopen(url, timeout=2)  # noqa: S310 (a loopback URL of our own)
    except urllib.error.HTTPError:
        return True
    except OSError:  # URLError, a refused connection, a timeout
        return False
    return True


def _namespace() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def _secret(state: ClusterState) -> dict[str, object]:
    keys = json.loads(_credentials_file(state).read_text())
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NAMESPACE},
        "type": "Opaque",
        "stringData": {
            **keys,
            "endpoint": endpoint(state),
            "bucket": BUCKET,
            "region": REGION,
        },
    }
