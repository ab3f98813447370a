"""The gateway's model route, served for real (uvicorn) in front of a real model API (the
scripted model server): a request with a run's token from the run's sandbox reaches the API with
the real key and streams back; anything else is refused and nothing reaches the API. The
sandbox is told apart by the request's address, here the loopback's."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from paddock.api.budget import Budget
from paddock.gateway import model
from paddock.gateway.meter import Meter
from paddock.gateway.prices import PriceTable
from paddock.gateway.routes import Routes
from paddock.policy.budgets import Spent
from paddock.render.model_routes import Route, route_secret, token_digest
from paddock.times import utcnow
from support.model_server import ScriptedModel
from support.ports import free_port
from support.waiting import wait_for

TOKEN = "paddock-run-token"
PRICES = PriceTable.model_validate({"models": {"m": {"inputPerMTok": 3, "outputPerMTok": 15}}})
KEY = "sk-real-key-of-the-run"


@pytest.fixture
def upstream() -> Iterator[ScriptedModel]:
    with ScriptedModel([]) as server:
        yield server


class Told(list[tuple[str, Spent]]):
    """What the meter told the operator (the usage Event's totals), in order."""

    def __call__(self, route: Route, spent: Spent, replica: str) -> None:
        self.append((route.uid, spent))


@pytest.fixture
def told() -> Told:
    return Told()


@pytest.fixture
def route_url(upstream: ScriptedModel, told: Told) -> Iterator[tuple[str, Routes]]:
    routes = Routes()
    route = Route(token_digest(TOKEN), KEY, upstream.url, "anthropic", "team/r1", "team/box",
                  utcnow() + timedelta(hours=1), harness="claude-code")  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-1", route)])
    boxes = {"127.0.0.1": "team/box"}
    app = model.model_app(routes, boxes.get, lambda: True, PRICES, Meter(told, "gw", 3600))
    port = free_port()
    server = model.serve(app, "127.0.0.1", port)
    wait_for(lambda: server.started, timeout=10, what="the model route to listen")
    try:
        yield f"http://127.0.0.1:{port}", routes
    finally:
        server.should_exit = True


def _counted(direction: str) -> float:
    labels = {"namespace": "team", "harness": "claude-code", "direction": direction}
    return REGISTRY.get_sample_value("paddock_model_tokens_total", labels) or 0.0


def _waiting() -> float:
    return REGISTRY.get_sample_value("paddock_gateway_model_requests_waiting") or 0.0


def _cost() -> float:
    return REGISTRY.get_sample_value("paddock_model_cost_usd_total", {"namespace": "team"}) or 0.0


def _messages(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    body = json.dumps({"model": "m", "max_tokens": 10, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()  # fmt: skip
    request = urllib.request.Request(  # noqa: S310  (the test's own http:// URL)
        f"{url}/v1/messages?beta=true", body, headers | {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_a_runs_token_reaches_its_model_with_the_key_and_streams_back(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    before = (_counted("input"), _counted("output"), _cost())
    status, body = _messages(route_url[0], {"x-api-key": TOKEN, "anthropic-version": "2023-06-01"})
    assert status == 200
    assert b"event: message_start" in body
    assert b"event: message_stop" in body
    (seen,) = upstream.requests
    headers = {k.lower(): v for k, v in seen["headers"].items()}
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert TOKEN not in json.dumps(seen)
    assert seen["path"] == "/v1/messages?beta=true"
    assert headers["accept-encoding"] == "identity"
    # Counted as it passed, from the model's own usage fields (100 in, 20 out), and priced.
    after = (_counted("input"), _counted("output"), _cost())
    assert (after[0] - before[0], after[1] - before[1]) == (100, 20)
    assert after[2] - before[2] == pytest.approx((100 * 3 + 20 * 15) / 1e6)


@pytest.mark.parametrize(
    "headers",
    [{}, {"x-api-key": "paddock-other"}, {"authorization": "Bearer sk-guess"}],
)
def test_no_token_of_a_run_reaches_nothing(
    upstream: ScriptedModel, route_url: tuple[str, Routes], headers: dict[str, Any]
) -> None:
    status, body = _messages(route_url[0], headers)
    assert status == 403
    assert json.loads(body)["error"]["message"].startswith("Paddock's model route: ")
    assert upstream.requests == []


def test_a_deleted_route_is_refused_at_once(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    url, routes = route_url
    routes.relisted("Secret", [])
    status, _ = _messages(url, {"x-api-key": TOKEN})
    assert status == 403
    assert upstream.requests == []


def test_a_request_at_its_runs_budget_is_refused_as_the_provider_would_and_told_first(
    upstream: ScriptedModel, route_url: tuple[str, Routes], told: Told
) -> None:
    url, routes = route_url
    budgeted = Route(token_digest(TOKEN), KEY, upstream.url, "anthropic", "team/r1", "team/box",
                     utcnow() + timedelta(hours=1), "claude-code",
                     budget=Budget(tokens=100))  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-2", budgeted)])
    headers = {"x-api-key": TOKEN, "anthropic-version": "2023-06-01"}
    assert _messages(url, headers)[0] == 200  # 120 tokens: the ceiling is passed by this one
    status, body = _messages(url, headers)
    assert status == 403
    error = json.loads(body)
    assert error["type"] == "error"
    assert error["error"]["type"] == "permission_error"
    assert error["error"]["message"] == (
        "Paddock's model route: the run's budget is exhausted (tokens 120 of 100)"
    )
    assert len(upstream.requests) == 1  # the refused one never reached the model
    # Told before the refusal was answered: the operator hears of it before the harness does.
    assert told[-1] == ("uid-2", Spent(100, 20, pytest.approx(0.0006), 1, 0, 1))


def test_an_unreachable_model_api_is_a_502_that_names_it(route_url: tuple[str, Routes]) -> None:
    url, routes = route_url
    port = free_port()  # nothing listens there
    dead = Route(token_digest(TOKEN), KEY, f"http://127.0.0.1:{port}", "anthropic", "team/r1",
                 "team/box", utcnow() + timedelta(hours=1))  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-1", dead)])
    status, body = _messages(url, {"x-api-key": TOKEN})
    assert status == 502
    assert f"127.0.0.1:{port} cannot be reached" in json.loads(body)["error"]["message"]


def test_a_starting_route_answers_nothing(upstream: ScriptedModel) -> None:
    app = model.model_app(Routes(), {"127.0.0.1": "team/box"}.get, threading.Event().is_set)
    port = free_port()
    server = model.serve(app, "127.0.0.1", port)
    wait_for(lambda: server.started, timeout=10, what="the model route to listen")
    try:
        status, _ = _messages(f"http://127.0.0.1:{port}", {"x-api-key": TOKEN})
        assert status == 503
    finally:
        server.should_exit = True
    assert upstream.requests == []


def test_a_runs_token_reaches_nothing_of_the_api_but_its_model_endpoints(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    request = urllib.request.Request(  # noqa: S310  (the test's own http:// URL)
        f"{route_url[0]}/v1/files", b"{}", {"x-api-key": TOKEN, "content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310
    assert refused.value.code == 403
    assert "not an endpoint of the model API" in refused.value.read().decode()
    assert upstream.requests == []


def _send(
    url: str, method: str, path: str, headers: dict[str, str], body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A request with its path sent exactly as written (no client normalises it)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "GET"])
def test_only_an_endpoints_own_method_reaches_the_api(
    upstream: ScriptedModel, route_url: tuple[str, Routes], method: str
) -> None:
    """Deleting a fine-tuned model (OpenAI's DELETE /v1/models/ID), or any write on a listing,
    never reaches the API with the key; nor does a GET of an inference endpoint."""
    path = "/v1/messages" if method == "GET" else "/v1/models/ft:claude:org::abc"
    status, _, body = _send(route_url[0], method, path, {"x-api-key": TOKEN}, b"{}")
    assert status == 403
    assert "not an endpoint of the model API" in json.loads(body)["error"]["message"]
    assert upstream.requests == []
    assert upstream.others == []


@pytest.mark.parametrize(
    "path",
    ["/v1/models/..", "/v1/models/%2e%2e", "/v1/models/%2E%2e/files", "/v1/messages/../files",
     "/v1/models/x%2f..%2f..%2ffiles", "/v1/models%3fkey=x", "/v1/models/x%5c..",
     "/v1/models\\..\\files", "/v1//models", "/v1/models/%252e%252e"],
)  # fmt: skip
def test_a_path_that_is_not_plain_reaches_nothing(
    upstream: ScriptedModel, route_url: tuple[str, Routes], path: str
) -> None:
    status, _, body = _send(route_url[0], "GET", path, {"x-api-key": TOKEN})
    assert status == 403
    assert "not a plain one" in json.loads(body)["error"]["message"]
    assert upstream.others == []


def test_a_plain_path_reaches_the_api_as_it_was_checked(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    path = "/v1/models/claude-%73onnet?beta=true&x=1"
    status, _, _ = _send(route_url[0], "GET", path, {"x-api-key": TOKEN})
    assert status == 404  # (the scripted model lists none)
    (seen,) = upstream.others
    assert seen["path"] == "/v1/models/claude-sonnet?beta=true"  # (a query no CLI sends: gone)
    assert seen["headers"]["x-api-key"] == KEY


def test_the_token_elsewhere_in_the_request_reaches_nothing(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    status, _, _ = _send(route_url[0], "GET", f"/v1/models?q={TOKEN}", {"x-api-key": TOKEN})
    assert status == 403
    status, _, _ = _send(route_url[0], "GET", "/v1/models", {"x-api-key": TOKEN, "x-q": TOKEN})
    assert status == 403
    assert upstream.others == []


def test_an_answer_that_echoes_the_key_comes_back_without_it(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    upstream.refuse_with, upstream.echo_headers = 400, True
    status, body = _messages(route_url[0], {"x-api-key": TOKEN, "anthropic-version": "x"})
    assert status == 400
    (seen,) = upstream.requests
    assert seen["headers"]["x-api-key"] == KEY  # it did reach the API, and was echoed
    assert KEY not in body.decode()
    status, headers, raw = _send(route_url[0], "POST", "/v1/messages", {"x-api-key": TOKEN},
                                 json.dumps({"model": "m", "max_tokens": 5}).encode())  # fmt: skip
    assert status == 400
    assert KEY not in raw.decode()
    assert "[redacted]" in json.loads(raw)["error"]["message"]
    assert KEY not in json.dumps(headers)
    assert headers["x-echo-x-api-key"] == "[redacted]"


def test_parallel_requests_pass_a_budget_by_one_requests_worth_at_most(
    upstream: ScriptedModel, route_url: tuple[str, Routes], told: Told
) -> None:
    """24 requests at once under tokens: 150 (each answer is 120): one goes alone, the next
    alone once it ended, and the rest are refused."""
    url, routes = route_url
    budgeted = Route(token_digest(TOKEN), KEY, upstream.url, "anthropic", "team/r1", "team/box",
                     utcnow() + timedelta(hours=1), "claude-code",
                     budget=Budget(tokens=150))  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-3", budgeted)])
    headers = {"x-api-key": TOKEN, "anthropic-version": "2023-06-01"}
    with ThreadPoolExecutor(24) as pool:
        statuses = sorted(pool.map(lambda _: _messages(url, headers)[0], range(24)))
    assert statuses == [200] * 2 + [403] * 22
    assert len(upstream.requests) == 2
    wait_for(lambda: told and told[-1][1].tokens == 240, timeout=10, what="the usage told")
    assert told[-1][1].refused == 22


def test_a_model_without_a_price_is_refused_under_a_cost_ceiling(
    upstream: ScriptedModel, route_url: tuple[str, Routes], told: Told
) -> None:
    url, routes = route_url
    day = Budget(costUSD=50)  # the namespace's day, not the run's own
    budgeted = Route(token_digest(TOKEN), KEY, upstream.url, "anthropic", "team/r1", "team/box",
                     utcnow() + timedelta(hours=1), "claude-code", daily=day)  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-4", budgeted)])
    asked = json.dumps({"model": "unpriced-model", "max_tokens": 5}).encode()
    status, _, body = _send(url, "POST", "/v1/messages", {"x-api-key": TOKEN}, asked)
    assert status == 403
    assert "does not price model 'unpriced-model'" in json.loads(body)["error"]["message"]
    assert upstream.requests == []
    assert told[-1] == ("uid-4", Spent(refused=1, unpriced=1))  # told before the refusal


def test_a_streamed_chat_completion_is_asked_for_its_usage(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    url, routes = route_url
    openai = Route(token_digest(TOKEN), KEY, upstream.url, "openai", "team/r1", "team/box",
                   utcnow() + timedelta(hours=1), "codex")  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-5", openai)])
    body = json.dumps({"model": "m", "stream": True, "messages": []}).encode()
    _send(url, "POST", "/v1/chat/completions", {"authorization": f"Bearer {TOKEN}"}, body)
    (seen,) = upstream.requests
    assert seen["body"]["stream_options"] == {"include_usage": True}
    assert seen["headers"]["authorization"] == f"Bearer {KEY}"


def test_a_request_that_would_pass_the_budget_with_one_in_flight_waits_for_it(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    """Each request holds about 700 tokens of a 1000 ceiling: the second waits, unforwarded,
    while the first streams, and goes once it ended."""
    url, routes = route_url
    budgeted = Route(token_digest(TOKEN), KEY, upstream.url, "anthropic", "team/r1", "team/box",
                     utcnow() + timedelta(hours=1), "claude-code",
                     budget=Budget(tokens=1000))  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-6", budgeted)])
    upstream.hold_step = 0  # the first answer holds after its first event
    asked = json.dumps({"model": "m", "max_tokens": 600, "stream": True, "messages": [],
                        "tools": [{"name": "Bash"}]}).encode()  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_send, url, "POST", "/v1/messages", {"x-api-key": TOKEN}, asked)
        wait_for(upstream.holding.is_set, timeout=10, what="the first answer to be held")
        upstream.hold_step = None
        waiting = _waiting()
        second = pool.submit(_send, url, "POST", "/v1/messages", {"x-api-key": TOKEN}, asked)
        wait_for(lambda: _waiting() == waiting + 1, timeout=10, what="the second to wait")
        assert len(upstream.requests) == 1
        assert not second.done()
        upstream.release.set()
        assert first.result(timeout=10)[0] == 200
        assert second.result(timeout=10)[0] == 200
    assert len(upstream.requests) == 2


def test_a_request_waiting_on_the_budget_is_not_forwarded_once_its_route_is_gone(
    upstream: ScriptedModel, route_url: tuple[str, Routes]
) -> None:
    url, routes = route_url
    budgeted = Route(token_digest(TOKEN), KEY, upstream.url, "anthropic", "team/r1", "team/box",
                     utcnow() + timedelta(hours=1), "claude-code",
                     budget=Budget(tokens=1000))  # fmt: skip
    routes.relisted("Secret", [route_secret("gw", "uid-7", budgeted)])
    upstream.hold_step = 0
    asked = json.dumps({"model": "m", "max_tokens": 600, "stream": True, "messages": [],
                        "tools": [{"name": "Bash"}]}).encode()  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_send, url, "POST", "/v1/messages", {"x-api-key": TOKEN}, asked)
        wait_for(upstream.holding.is_set, timeout=10, what="the first answer to be held")
        upstream.hold_step = None
        waiting = _waiting()
        second = pool.submit(_send, url, "POST", "/v1/messages", {"x-api-key": TOKEN}, asked)
        wait_for(lambda: _waiting() == waiting + 1, timeout=10, what="the second to wait")
        routes.relisted("Secret", [])  # the run ended
        upstream.release.set()
        assert first.result(timeout=10)[0] == 200
        status, _, body = second.result(timeout=10)
    assert status == 403
    assert "route ended while it waited" in json.loads(body)["error"]["message"]
    assert len(upstream.requests) == 1
