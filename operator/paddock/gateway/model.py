"""The gateway's model route: an HTTP endpoint a harness uses as its model API's base URL,
with its run's token where the API key would be. A request whose token is a running run's,
sent from a pod of that run's sandbox, to one of the provider's endpoints with its method
(``endpoints``), is forwarded to the run's model API with the real key in the provider's own
header; its response is streamed back as it comes, scrubbed of the key and the token
(``relay``). Anything else is refused with an error the CLIs show (the shape of the
providers' own), and nothing is forwarded.

The token is taken from wherever a CLI puts its key (``x-api-key``, ``Authorization: Bearer``,
``x-goog-api-key``, a ``key`` query parameter); every one of those is dropped before the request
goes on, and a request that carries the token anywhere else (another header, the query) is
refused, so the token never leaves the gateway and the key never reaches the sandbox.

Each request is held to its run's budget before it is forwarded (``Meter.admit``): an answer
of the model holds the most it can use (its input's size in bytes, no fewer than its tokens,
and its output limit) until it ends, and waits while the answers in flight and it could
together pass a ceiling. A model the price table does not price is refused where a cost
ceiling applies."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

import httpx2
import uvicorn
from prometheus_client import Counter, Gauge
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route as Path

from paddock.gateway import endpoints
from paddock.gateway.endpoints import Endpoint
from paddock.gateway.meter import Meter
from paddock.gateway.prices import PriceTable
from paddock.gateway.relay import HOP_BY_HOP, Passage, Relayed, say
from paddock.gateway.routes import Refused, Routes
from paddock.gateway.usage import Usage
from paddock.policy import budgets
from paddock.policy.budgets import Spent
from paddock.render.model_routes import Route
from paddock.times import utcnow

# Every method is answered (a method an endpoint does not take is refused by the route).
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
CREDENTIALS = frozenset({"authorization", "x-api-key", "x-goog-api-key"})
# The provider's header for the real key.
KEY_HEADER: dict[str, Callable[[str], tuple[str, str]]] = {
    "anthropic": lambda key: ("x-api-key", key),
    "openai": lambda key: ("authorization", f"Bearer {key}"),
    "google": lambda key: ("x-goog-api-key", key),
}
KEPT_ENDED = 1000
TIMEOUT = httpx2.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)
MODEL_REQUESTS = Counter(
    "paddock_gateway_model_requests",
    "Requests on the gateway's model route, by run (NAMESPACE/NAME; '-' for a token no run "
    "holds) and outcome: forwarded (with the model API's status class, 2xx...5xx), refused "
    "or unreachable. The series of the last 1000 runs that ended are kept.",
    ["run", "outcome"],
)
WAITING = Gauge(
    "paddock_gateway_model_requests_waiting",
    "Requests on the gateway's model route waiting for requests of their run in flight to end, "
    "since all of them together could pass a ceiling of the run's budget.",
)
MAX_LOGGED_PATH = 200


def token_of(headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The run's token, wherever the harness put its key."""
    bearer = headers.get("authorization", "")
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip()
    return headers.get("x-api-key") or headers.get("x-goog-api-key") or query.get("key") or ""


@dataclass(frozen=True)
class Call:
    """A request as it will be forwarded: its endpoint, path and query (without a key)."""

    endpoint: Endpoint
    path: str
    query: list[tuple[str, str]]


def call_of(
    route: Route, method: str, raw_path: bytes, query: str, headers: list[tuple[str, str]],
    token: str,
) -> Call | str:  # fmt: skip
    """The request as it will be forwarded, or why it is refused: a path that is not one
    plain path, no endpoint of the provider's API with that method, or the run's token
    anywhere but where a key goes."""
    path = endpoints.checked_path(raw_path)
    if path is None:
        return "the path is not a plain one (dot segments, encoded separators, backslashes)"
    endpoint = endpoints.endpoint_of(route.provider, method, path)
    if endpoint is None:
        return f"{method} {path} is not an endpoint of the model API"
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "key"]
    elsewhere = [f"{k}={v}" for k, v in kept]
    elsewhere += [f"{k}: {v}" for k, v in headers if k.lower() not in CREDENTIALS]
    if token and any(token in value for value in elsewhere):
        return "the run's token is in the request elsewhere than where its key goes"
    return Call(endpoint, path, kept)


def upstream_request(
    route: Route, call: Call, headers: list[tuple[str, str]]
) -> tuple[str, list[tuple[str, str]]]:
    """The URL and headers of the forwarded request: the run's API, the path as checked, the
    query without a key, the client's headers without credentials or hop-by-hop ones, and
    the real key."""
    url = route.upstream + call.path + (f"?{urlencode(call.query)}" if call.query else "")
    dropped = CREDENTIALS | HOP_BY_HOP | {"accept-encoding", "content-length"}
    forwarded = [(k, v) for k, v in headers if k.lower() not in dropped]
    # Uncompressed, so that the route reads the usage and scrubs the answer as it passes.
    return url, [*forwarded, ("accept-encoding", "identity"), KEY_HEADER[route.provider](route.key)]


def held_by(asked: endpoints.Asked, table: PriceTable) -> Spent:
    """The most an answer can use: its input's size in bytes (no fewer than its tokens) and
    its output limit, and their cost where its model is priced."""
    most = Usage(len(asked.body), asked.max_output, asked.model)
    return Spent(input_tokens=most.input_tokens, output_tokens=most.output_tokens,
                 cost_usd=table.cost(most) or 0.0)  # fmt: skip


def refusal(status: int, message: str) -> JSONResponse:
    """An error each CLI shows, and none retries (a 403): Anthropic's shape (type, error.type,
    error.message), which OpenAI's and Google's readers take too (error.message, error.code,
    error.status)."""
    error = {"type": "permission_error", "message": f"Paddock's model route: {message}",
             "code": status, "status": "PERMISSION_DENIED"}  # fmt: skip
    return JSONResponse({"type": "error", "error": error}, status_code=status)


def model_app(
    routes: Routes,
    sandbox_at: Callable[[str], str | None],
    ready: Callable[[], bool],
    prices: PriceTable | None = None,
    meter: Meter | None = None,
) -> Starlette:
    """The route: ``sandbox_at`` names the sandbox of a pod address; nothing is answered but
    "starting" until ``ready`` (the routes and the sandbox pods are listed). Each request is
    checked against its run's budget by ``meter``, and what each answer used is counted as it
    passes, priced by ``prices``."""
    table = prices or PriceTable()
    spending = meter or Meter()
    client = httpx2.AsyncClient(timeout=TIMEOUT, trust_env=False, follow_redirects=False)
    settled = asyncio.Condition()  # an answer ended: requests waiting on the budget look again

    async def forward(request: Request) -> Response:
        address = request.client.host if request.client else ""
        if not ready():
            return refusal(503, "the gateway is starting")
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        line = f"{request.method} {_printable(raw_path)}"
        token = token_of(request.headers, request.query_params)
        found = routes.find(token, sandbox_at(address), utcnow())
        if isinstance(found, Refused):
            return _refused(found.run or "-", f"from={address} {line}", found.reason)
        call = call_of(found, request.method, raw_path, request.url.query,
                       request.headers.items(), token)  # fmt: skip
        if isinstance(call, str):
            return _refused(found.run, f"from={address} {line}", call)
        prepared = await _prepared(request, found, call, table, spending)
        if isinstance(prepared, Response):
            return prepared
        body, held = prepared
        refused = await _admitted(spending, found, held, settled, line)
        if refused is not None:
            return refused
        url, headers = upstream_request(found, call, request.headers.items())
        outgoing = client.build_request(request.method, url, headers=headers, content=body)
        try:
            response = await client.send(outgoing, stream=True)
        except BaseException as exc:  # (also a client that left: what it held is given back)
            spending.landed(found, held)
            async with settled:
                settled.notify_all()
            if not isinstance(exc, httpx2.HTTPError):
                raise
            MODEL_REQUESTS.labels(found.run, "unreachable").inc()
            say(f"run={found.run} {line} -> {found.upstream} unreachable: {type(exc).__name__}")
            return refusal(502, f"{found.upstream} cannot be reached ({type(exc).__name__})")
        MODEL_REQUESTS.labels(found.run, f"{response.status_code // 100}xx").inc()
        passage = Passage(found, response, token, call.endpoint.inference, held, line)
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            await passage.close(table, spending, settled)
            return refusal(502, "the model API answered compressed, which the route cannot read")
        return Relayed(passage, table, spending, settled)

    return Starlette(routes=[Path("/{path:path}", forward, methods=METHODS)])


async def _admitted(
    meter: Meter, route: Route, held: Spent, settled: asyncio.Condition, line: str
) -> Response | None:
    """None once the request is admitted against its run's budget (after waiting, while the
    answers in flight and it could together pass a ceiling), or its refusal at a ceiling
    (the operator told first)."""
    async with settled:
        while (verdict := meter.admit(route, held)).waits:
            WAITING.inc()
            try:
                await settled.wait()
            finally:
                WAITING.dec()
    if not verdict.refused:
        return None
    MODEL_REQUESTS.labels(route.run, "refused").inc()
    say(f"run={route.run} {line} refused: budget exhausted ({verdict.refused})")
    await asyncio.to_thread(meter.tell, route.uid)
    return refusal(403, f"the run's budget is exhausted ({verdict.refused})")


async def _prepared(
    request: Request, route: Route, call: Call, table: PriceTable, meter: Meter
) -> tuple[bytes | None, Spent] | Response:
    """The body to forward and what the request holds of the budget, or its refusal: a body
    too large, an answer the route cannot read the request of, or a model without a price
    where a cost ceiling applies (counted as refused)."""
    if request.method not in ("POST", "PUT", "PATCH"):
        return None, Spent()
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > endpoints.MAX_REQUEST_BYTES:
            return _refused(route.run, call.path, "the request is larger than 32 MiB", 413)
    if not call.endpoint.inference:
        return body, Spent()
    asked = endpoints.asked(route.provider, call.path, body)
    if isinstance(asked, str):
        return _refused(route.run, call.path, asked, 400)
    priced = table.price_of(asked.model) is not None
    unpriced = budgets.unpriced_refused(route.ceilings, asked.model, priced)
    if unpriced:
        meter.refuse(route, Spent(refused=1, unpriced=1))
        await asyncio.to_thread(meter.tell, route.uid)
        return _refused(route.run, call.path, f"the run's budget refuses it ({unpriced})")
    return asked.body, held_by(asked, table)


def _refused(run: str, line: str, reason: str, status: int = 403) -> Response:
    MODEL_REQUESTS.labels(run, "refused").inc()
    say(f"run={run} {line} refused: {reason}")
    return refusal(status, reason)


def _printable(raw: bytes) -> str:
    """A raw path as one log line can hold it."""
    text = raw[:MAX_LOGGED_PATH].decode("ascii", "replace")
    return "".join(c if c.isprintable() else "?" for c in text)


_ENDED: deque[str] = deque()


def ended(run: str) -> None:
    """A run's route is gone: its series stay until ``KEPT_ENDED`` runs have ended after it (a
    scrape after its end still finds them), so that the label set stays bounded."""
    _ENDED.append(run)
    while len(_ENDED) > KEPT_ENDED:
        gone = _ENDED.popleft()
        if gone in _ENDED:
            continue  # (a run of the same name that ended since)
        for outcome in ("refused", "unreachable", "2xx", "3xx", "4xx", "5xx"):
            with contextlib.suppress(KeyError):
                MODEL_REQUESTS.remove(gone, outcome)


def serve(app: Starlette, host: str, port: int) -> uvicorn.Server:
    """Serve the route in a thread of its own (its own event loop)."""
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
        proxy_headers=False, server_header=False, date_header=False,
    )  # fmt: skip
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True, name="model-route").start()
    return server
