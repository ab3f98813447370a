"""A gateway of a test's own, beside the local cluster's (which every real-node test shares):
``paddock gateway`` run as ``paddock_dev.gateway`` runs the cluster's, on ports of this worker's
share, to SIGKILL and start again as a crashed gateway pod would be, without touching the
gateway other tests use meanwhile."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from paddock.gateway.run import forget_shared_memory
from paddock_dev import gateway
from support import identity
from support.kube import Cluster
from support.ports import free_ports
from support.real_node import local_cluster_plan
from support.waiting import wait_for


class OwnGateway:
    def __init__(self, cluster: Cluster, name: str) -> None:
        state, plan = local_cluster_plan()
        ports = free_ports("listen", "model", "metrics")
        self.host, self.listen, self.model = plan.gateway, ports["listen"], ports["model"]
        self.argv, self.env = gateway.prepare(
            state, plan, cluster.kubectl, name, self.listen, self.model, ports["metrics"]
        )
        self.log = state.log(name)
        self.service = gateway.service_name(plan, name)
        self.process: subprocess.Popen[bytes] | None = None

    def settings(self) -> dict[str, str]:
        """The operator's settings that send runs' model routes (and hosts) through it."""
        return {
            "PADDOCK_GATEWAY_PROXY": f"http://{self.host}:{self.listen}",
            "PADDOCK_GATEWAY_CIDRS": f"{self.host}/32",
            "PADDOCK_GATEWAY_PORT": str(self.listen),
            "PADDOCK_GATEWAY_NAMESPACE": gateway.NAMESPACE,
            "PADDOCK_GATEWAY_MODEL_URL": f"http://{self.host}:{self.model}",
            "PADDOCK_GATEWAY_MODEL_PORT": str(self.model),
        }

    def _serving(self) -> bool:
        return gateway.listens(self.host, self.listen) and gateway.listens(self.host, self.model)

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            wait_for(self._serving, 60, what=f"the test's gateway listening on {self.listen}")
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL, Squid and all: nothing finishes an answer or tells what it counted."""
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process = None
        wait_for(lambda: not gateway.listens(self.host, self.model), 30, what="the gateway gone")
        forget_shared_memory(self.service)  # what a killed Squid leaves in /dev/shm

    def __enter__(self) -> OwnGateway:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()


class HeldDownload:
    """An HTTP server on ``address`` (the node's bridge, which a gateway reaches) answering
    ``SIZE`` bytes a request; ``/held`` stops after its first ``PART`` until ``release`` (or
    two minutes), ``holding`` set meanwhile."""

    SIZE = 1 << 20
    PART = 1 << 16

    def __init__(self, address: str) -> None:
        self.holding, self.release = threading.Event(), threading.Event()
        held = self

        class Answer(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(held.SIZE))
                self.end_headers()
                with contextlib.suppress(OSError):  # a reader gone before the end
                    rest = held.SIZE
                    if self.path == "/held":
                        self.wfile.write(b"x" * held.PART)
                        self.wfile.flush()
                        rest -= held.PART
                        held.holding.set()
                        held.release.wait(120)
                    self.wfile.write(b"x" * rest)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Answer)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> HeldDownload:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def use_local_gateway(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's settings for the local cluster's gateway and its model route (in this
    process's environment, which operators started here read), and the Role the chart gives
    it in the gateway's namespace (the runs' model and credential routes' Secrets: create,
    patch, delete)."""
    state, plan = local_cluster_plan()
    host, port = gateway.address(state, plan)
    model_host, model_port = gateway.model_address(state, plan)
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "paddock-model-routes", "namespace": gateway.NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["secrets"],
                   "verbs": ["create", "patch", "delete"]}],
    }  # fmt: skip
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"paddock-model-routes-{identity.ACCOUNT}",
                     "namespace": gateway.NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "paddock-model-routes"},
        "subjects": [{"kind": "ServiceAccount", "name": identity.ACCOUNT,
                      "namespace": identity.NAMESPACE}],
    }  # fmt: skip
    for obj in (role, binding):
        cluster.apply(obj, gateway.NAMESPACE)
    settings = {
        "PADDOCK_GATEWAY_PROXY": f"http://{host}:{port}",
        "PADDOCK_GATEWAY_CIDRS": f"{host}/32",
        "PADDOCK_GATEWAY_PORT": str(port),
        "PADDOCK_GATEWAY_NAMESPACE": gateway.NAMESPACE,
        "PADDOCK_GATEWAY_MODEL_URL": f"http://{model_host}:{model_port}",
        "PADDOCK_GATEWAY_MODEL_PORT": str(model_port),
    }
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
