"""The shared API client against a real HTTP server on loopback that answers as an API server
under load does: a 429 is sent again after the Retry-After it gives, nothing else is."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client

from paddock.kube import client as kube
from paddock.kube.errors import KubeError

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "t"}}


class Server:
    """Answers each request with the next of ``answers`` (status code), then 200/201 always."""

    def __init__(self) -> None:
        self.answers: list[int] = []
        self.hanging = False  # answers wait for ``release`` (the test sets it)
        self.release = threading.Event()
        self.requests: list[str] = []
        self.seen: list[tuple[str, str, str, str, Any]] = []  # method, path, type, auth, body
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                sent = self.rfile.read(length)
                outer.requests.append(self.command)
                if outer.hanging:
                    outer.release.wait(10)
                outer.seen.append((
                    self.command, self.path, self.headers.get("Content-Type") or "",
                    self.headers.get("Authorization") or "", json.loads(sent) if sent else None,
                ))  # fmt: skip
                status = outer.answers.pop(0) if outer.answers else 0
                if status == 429:
                    body: dict[str, Any] = {"kind": "Status", "code": 429, "message": "slow down"}
                    self.send_response(429)
                    self.send_header("Retry-After", "0")
                elif status:
                    body = {"kind": "Status", "code": status, "message": "broken"}
                    self.send_response(status)
                elif "?" in self.path:  # a listing
                    body = {"kind": "ConfigMapList", "items": [CONFIGMAP]}
                    self.send_response(200)
                else:
                    body = CONFIGMAP
                    self.send_response(201 if self.command == "POST" else 200)
                data = json.dumps(body).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                # A client that timed out (the timeout's test) has gone: nothing to answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer  # noqa: N815

            def log_message(self, *_: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"


@pytest.fixture
def server() -> Iterator[Server]:
    served = Server()
    thread = threading.Thread(target=served.http.serve_forever, daemon=True)
    thread.start()
    saved = client.Configuration.get_default_copy()
    configuration = client.Configuration()
    configuration.host = served.url
    configuration.api_key = {"authorization": "the-token"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    client.Configuration.set_default(configuration)
    kube._shared = None
    try:
        yield served
    finally:
        client.Configuration.set_default(saved)
        kube._shared = None
        served.http.shutdown()
        served.http.server_close()


def test_a_throttled_read_is_sent_again_until_it_is_served(server: Server) -> None:
    server.answers = [429, 429]
    assert kube.get("ConfigMap", "t", "a") == CONFIGMAP
    assert server.requests == ["GET", "GET", "GET"]


def test_a_throttled_create_is_sent_again(server: Server) -> None:
    server.answers = [429]
    assert kube.create(CONFIGMAP) == CONFIGMAP
    assert server.requests == ["POST", "POST"]


def test_throttling_that_does_not_stop_is_the_callers_to_see(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the real policy's tries, without its 7.75 s of backoff
    monkeypatch.setattr(kube, "THROTTLED_RETRY", kube.THROTTLED_RETRY.new(backoff_factor=0))
    server.answers = [429] * 10
    with pytest.raises(KubeError) as refused:
        kube.get("ConfigMap", "t", "a")
    assert refused.value.status == 429
    assert len(server.requests) == 1 + kube.THROTTLED_RETRY.status  # type: ignore[operator]


def test_a_failed_write_is_not_sent_twice(server: Server) -> None:
    server.answers = [500]
    with pytest.raises(KubeError) as refused:
        kube.create(CONFIGMAP)
    assert refused.value.status == 500
    assert server.requests == ["POST"]


def test_each_call_is_the_request_kubectl_would_make(server: Server) -> None:
    """Method, path, content type (a strategic merge for built-in kinds, a JSON merge for
    Paddock's), the bearer token and the body, as the API server reads them."""
    pod = {"metadata": {"labels": {"a": "b"}}}
    kube.create(CONFIGMAP)
    kube.patch("Pod", "t", "p", pod)
    kube.patch_if_unchanged("Sandbox", "t", "s", {"metadata": {"labels": {"x": None}}}, "7")
    kube.patch_status("AgentRun", "t", "r", {"phase": "Running"})
    kube.delete("NetworkPolicy", "t", "n", uid="u1", version="9")
    assert kube.list_configmaps("t", "paddock.dev/run=a b") == [CONFIGMAP]
    auth = "Bearer the-token"
    assert server.seen == [
        ("POST", "/api/v1/namespaces/t/configmaps", "application/json", auth, CONFIGMAP),
        ("PATCH", "/api/v1/namespaces/t/pods/p", "application/strategic-merge-patch+json",
         auth, pod),
        ("PATCH", "/apis/paddock.dev/v1alpha1/namespaces/t/sandboxes/s",
         "application/merge-patch+json", auth,
         {"metadata": {"labels": {"x": None}, "resourceVersion": "7"}}),
        ("PATCH", "/apis/paddock.dev/v1alpha1/namespaces/t/agentruns/r/status",
         "application/merge-patch+json", auth, {"status": {"phase": "Running"}}),
        ("DELETE", "/apis/networking.k8s.io/v1/namespaces/t/networkpolicies/n",
         "application/json", auth, {"preconditions": {"uid": "u1", "resourceVersion": "9"}}),
        ("GET", "/api/v1/namespaces/t/configmaps?labelSelector=paddock.dev%2Frun%3Da+b", "",
         auth, None),
    ]  # fmt: skip


def test_a_refusal_carries_the_servers_words(server: Server) -> None:
    server.answers = [404]
    assert kube.get("Sandbox", "t", "gone") is None
    server.answers = [409]
    assert kube.create(CONFIGMAP) is None  # a name taken
    server.answers = [422]
    with pytest.raises(KubeError) as refused:
        kube.patch("Sandbox", "t", "s", {"spec": {}})
    assert (refused.value.status, refused.value.message) == (422, "broken")


def test_a_request_that_hangs_is_given_up_after_the_timeout(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection that never answers holds no thread (nor its key's reconcile) for ever."""
    monkeypatch.setattr(kube, "REQUEST_TIMEOUT", (1.0, 0.3))
    server.hanging = True
    try:
        with pytest.raises(Exception, match="timed out"):
            kube.get("ConfigMap", "t", "a")
    finally:
        server.release.set()
    assert server.requests == ["GET"]  # given up, not sent again
