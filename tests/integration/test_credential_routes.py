"""The gateway's credential routes, served for real (uvicorn, on the model route's listener) in
front of a real HTTP API (a local server that keeps what it was sent): a request with a run's
token from the run's sandbox, that a rule of the route lets through, reaches the API with the
route's secret header and streams both ways; its answer comes back without the secret or the
token. Anything else is refused, and nothing of it reaches the API. The sandbox is told apart
by the request's address, here the loopback's; what the proxy would judge of the host is the
test's (``decide``), as is which addresses are internal (``reachable``)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from paddock.gateway import model
from paddock.gateway.credentials import CredentialForwarding, CredentialRoutes
from paddock.gateway.directory import Decided
from paddock.gateway.routes import Routes
from paddock.render.credential_routes import (
    MCP_METHODS,
    CredentialRoute,
    Rule,
    RunRoutes,
    route_url,
    routes_secret,
)
from paddock.render.model_routes import token_digest
from paddock.times import utcnow
from support.ports import free_port
from support.waiting import wait_for

TOKEN = "paddock-run-routes-token"
SECRET = "api-secret-of-the-workspace-0123"


@dataclass
class Api:
    """A local HTTP API: what it was sent (method, path, headers, body), and what it answers
    (the headers it was sent, as JSON, so that an echoed secret shows)."""

    url: str = ""
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[Api]:
    kept = Api()

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(size) if size else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            kept.seen.append((self.command, self.path, headers, body))
            answer = json.dumps({"headers": headers, "size": len(body)}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("x-echo", headers.get("x-api-key", ""))
            self.send_header("set-cookie", "session=of-the-route")
            if self.path.endswith("/zipped"):
                self.send_header("content-encoding", "gzip")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_DELETE(self) -> None:
            self._answer()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kept.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield kept
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Served:
    url: str  # the route's URL, as the run gets it
    routes: CredentialRoutes
    allowed: dict[str, bool]  # what the proxy would judge of the host: allowed or not
    internal: set[str]  # addresses the gateway counts as internal


@pytest.fixture
def served(api: Api) -> Iterator[Served]:
    routes = CredentialRoutes()
    rules = (Rule(("GET",), ("/v1/things/*",)), Rule(("POST",), ("/v1/uploads/**",)))
    route = CredentialRoute("api", f"{api.url}/base", (("X-Api-Key", SECRET),), rules, (SECRET,))
    # An MCP server's: its one path and query (the server's URL .../base/mcp?team=blue).
    mcp = CredentialRoute(
        "mcp.docs",
        f"{api.url}/base",
        (("X-Api-Key", SECRET),),
        (Rule(MCP_METHODS, ("/mcp",)),),
        (SECRET,),
        ("/mcp", "team=blue"),
    )
    held = RunRoutes(token_digest(TOKEN), "team/r1", "team/box", utcnow() + timedelta(hours=1),
                     (route, mcp), uid="uid-1")  # fmt: skip
    routes.relisted("Secret", [routes_secret("gw", "uid-1", held)])
    boxes = {"127.0.0.1": "team/box"}
    allowed = {"allowed": True}
    internal: set[str] = set()

    def decide(address: str, host: str, port: int) -> Decided:
        return Decided(allowed["allowed"], boxes.get(address, "-"), "by the test's policy")

    forwarding = CredentialForwarding(
        routes, boxes.get, decide, lambda address: address not in internal, lambda: True
    )
    app = model.model_app(Routes(), boxes.get, lambda: True, credentials=forwarding)
    port = free_port()
    server = model.serve(app, "127.0.0.1", port)
    wait_for(lambda: server.started, timeout=10, what="the gateway's routes to listen")
    try:
        yield Served(route_url(f"http://127.0.0.1:{port}", TOKEN, "api"), routes, allowed, internal)
    finally:
        server.should_exit = True


def _call(
    url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers.items()), error.read()


def test_a_runs_request_reaches_the_api_with_the_secret_and_comes_back_without_it(
    served: Served, api: Api
) -> None:
    overrides = {"X-HTTP-Method-Override": "DELETE", "X-Original-URL": "/admin", "Range": "0-3"}
    status, headers, body = _call(
        f"{served.url}/v1/things/7?page=2",
        headers={"Authorization": "Bearer the-agents-own", "X-Api-Key": "forged", **overrides},
    )
    assert status == 200
    [(method, path, sent, _)] = api.seen
    assert (method, path) == ("GET", "/base/v1/things/7?page=2")
    assert sent["x-api-key"] == SECRET
    assert "authorization" not in sent  # the run's own credentials are not forwarded
    assert not {name.lower() for name in overrides} & set(sent)  # nor what makes it another
    assert "set-cookie" not in {name.lower() for name in headers}  # no session to act as it
    assert SECRET not in body.decode()
    assert "[redacted]" in body.decode()
    assert headers["x-echo"] == "[redacted]"
    assert TOKEN not in json.dumps(sent)


def test_an_mcp_servers_route_reaches_its_one_path_and_query_only(served: Served, api: Api) -> None:
    mcp = served.url.removesuffix("/api") + "/mcp.docs"
    status, _, _ = _call(f"{mcp}/mcp?team=blue", "POST", b"{}")
    assert status == 200
    [(method, path, sent, _)] = api.seen
    assert (method, path, sent["x-api-key"]) == ("POST", "/base/mcp?team=blue", SECRET)
    for url in (f"{mcp}/mcp?team=red", f"{mcp}/mcp", f"{mcp}/mcp/more?team=blue", f"{mcp}/x"):
        status, _, body = _call(url, "POST", b"{}")
        assert status == 403, (url, body)
    assert len(api.seen) == 1


def test_a_large_body_streams_through(served: Served, api: Api) -> None:
    data = bytes(range(256)) * 40_000  # 10 MB
    status, _, body = _call(f"{served.url}/v1/uploads/a/b", "POST", data)
    assert status == 200
    assert json.loads(body)["size"] == len(data)
    assert api.seen[0][3] == data


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/things/7/more"),  # * is one segment
        ("DELETE", "/v1/things/7"),  # a method no rule allows
        ("GET", "/v1/other"),
        ("GET", "/v1/things/%2e%2e/secrets"),  # not a plain path
        ("GET", "/v1/things/../../admin"),
    ],
)
def test_what_no_rule_allows_reaches_nothing(
    served: Served, api: Api, method: str, path: str
) -> None:
    status, _, body = _call(served.url + path, method)
    assert status in (403, 404), body
    assert "credential route" in body.decode()
    assert api.seen == []


def test_another_token_or_route_reaches_nothing(served: Served, api: Api) -> None:
    for url in (
        served.url.replace(TOKEN, "paddock-another") + "/v1/things/1",
        served.url.removesuffix("/api") + "/other/v1/things/1",
        served.url.removesuffix(f"/{TOKEN}/api") + "/v1/things/1",
    ):
        status, _, _ = _call(url)
        assert status in (403, 404), url
    assert api.seen == []


def test_a_host_the_policy_refuses_or_an_internal_address_reaches_nothing(
    served: Served, api: Api
) -> None:
    served.allowed["allowed"] = False
    status, _, body = _call(f"{served.url}/v1/things/1")
    assert status == 403
    assert "by the test's policy" in body.decode()
    served.allowed["allowed"] = True
    served.internal.add("127.0.0.1")
    status, _, body = _call(f"{served.url}/v1/things/1")
    assert status == 403
    assert "internal address" in body.decode()
    assert api.seen == []


def test_a_compressed_answer_or_a_long_path_comes_to_nothing(served: Served, api: Api) -> None:
    status, _, body = _call(f"{served.url}/v1/things/zipped")
    assert status == 502
    assert "compressed" in body.decode()
    assert SECRET not in body.decode()
    status, _, body = _call(f"{served.url}/v1/things/{'a' * 3000}")
    assert status == 403
    assert "longer than" in body.decode()
    assert len(api.seen) == 1  # (the compressed answer's request only)


def test_deleted_routes_are_refused_at_once(served: Served, api: Api) -> None:
    assert _call(f"{served.url}/v1/things/1")[0] == 200
    served.routes.relisted("Secret", [])
    status, _, body = _call(f"{served.url}/v1/things/1")
    assert status == 403
    assert "no running run's" in body.decode()
    assert len(api.seen) == 1
