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
from collections import Counter as Counter_
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
from paddock.gateway.credentials import CredentialForwarding
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
# The query parameters forwarded, with the values a CLI sends; any other is dropped.
QUERY = {"alt": ("sse", "json"), "beta": ("true",)}
# Headers that would make the request another than the one checked: never forwarded.
OTHER_REQUEST = frozenset({
    "x-http-method-override", "x-http-method", "x-method-override", "openai-organization",
    "openai-project", "x-goog-user-project", "x-goog-fieldmask", "x-goog-request-params",
})  # fmt: skip
ALONE = 10**12  # input tokens held by a request whose use its size does not bound
AT_ONCE = 8  # requests of one run taken on at once, body to answer's end; others wait
WAKE_SECONDS = 30.0  # a waiting request looks again at least this often


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
    anywhere but where a key goes. Of the query, only what a CLI sends is kept (``alt`` for
    a Gemini stream, ``beta`` for Anthropic's)."""
    path = endpoints.checked_path(raw_path)
    if path is None:
        return "the path is not a plain one (dot segments, encoded separators, backslashes)"
    endpoint = endpoints.endpoint_of(route.provider, method, path)
    if endpoint is None:
        return f"{method} {path} is not an endpoint of the model API"
    pairs = parse_qsl(query, keep_blank_values=True)
    elsewhere = [path] + [f"{k}={v}" for k, v in pairs if k != "key"]
    elsewhere += [f"{k}: {v}" for k, v in headers if k.lower() not in CREDENTIALS]
    if token and any(token in value for value in elsewhere):
        return "the run's token is in the request elsewhere than where its key goes"
    return Call(endpoint, path, [(k, v) for k, v in pairs if QUERY.get(k, ()) and v in QUERY[k]])


def upstream_request(
    route: Route, call: Call, headers: list[tuple[str, str]]
) -> tuple[str, list[tuple[str, str]]]:
    """The URL and headers of the forwarded request: the run's API, the path as checked, the
    query kept, the client's headers without credentials, hop-by-hop ones or those that
    would make the request another (a method override, another organisation or project,
    a field mask that leaves the usage out), and the real key."""
    url = route.upstream + call.path + (f"?{urlencode(call.query)}" if call.query else "")
    dropped = CREDENTIALS | HOP_BY_HOP | OTHER_REQUEST | {"accept-encoding", "content-length"}
    forwarded = [(k, v) for k, v in headers if k.lower() not in dropped]
    # Uncompressed, so that the route reads the usage and scrubs the answer as it passes.
    return url, [*forwarded, ("accept-encoding", "identity"), KEY_HEADER[route.provider](route.key)]


def held_by(asked: endpoints.Asked, table: PriceTable) -> Spent:
    """The most an answer can use: its input's size in bytes (no fewer than its tokens) and
    its output limit, and their cost where its model is priced; a request that refers to
    content apart from it holds so much that no other request runs beside it."""
    most = Usage(ALONE if asked.alone else len(asked.body), asked.max_output, asked.model)
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
    credentials: CredentialForwarding | None = None,
) -> Starlette:
    """The route: ``sandbox_at`` names the sandbox of a pod address; nothing is answered but
    "starting" until ``ready`` (the routes and the sandbox pods are listed). Each request is
    checked against its run's budget by ``meter``, and what each answer used is counted as it
    passes, priced by ``prices``. ``credentials``: the credential routes, under ``/_route/``
    (without them, a path there is no model endpoint either)."""
    forwarding = _Forwarding(routes, sandbox_at, ready, prices or PriceTable(), meter or Meter())
    paths = [Path("/{path:path}", forwarding.forward, methods=METHODS)]
    if credentials is not None:
        paths.insert(0, Path("/_route/{rest:path}", credentials.forward, methods=METHODS))
    return Starlette(routes=paths)


class _Forwarding:
    def __init__(
        self,
        routes: Routes,
        sandbox_at: Callable[[str], str | None],
        ready: Callable[[], bool],
        table: PriceTable,
        meter: Meter,
    ) -> None:
        self.routes, self.sandbox_at, self.ready = routes, sandbox_at, ready
        self.table, self.meter = table, meter
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=100)
        self.client = httpx2.AsyncClient(
            timeout=TIMEOUT, limits=limits, trust_env=False, follow_redirects=False
        )
        self.settled = asyncio.Condition()  # an answer ended: waiting requests look again
        self.at_once: Counter_[str] = Counter_()  # requests in the route, by run uid
        self.turns: dict[str, asyncio.Semaphore] = {}  # AT_ONCE of them go on, by run uid

    def route_of(self, request: Request, token: str) -> Route | Refused:
        address = request.client.host if request.client else ""
        return self.routes.find(token, self.sandbox_at(address), utcnow())

    async def forward(self, request: Request) -> Response:
        if not self.ready():
            return refusal(503, "the gateway is starting")
        raw_path = request.scope.get("raw_path") or request.url.path.encode()
        token = token_of(request.headers, request.query_params)
        address = request.client.host if request.client else ""
        line = f"from={address} {request.method} {_printable(raw_path, token)}"
        found = self.route_of(request, token)
        if isinstance(found, Refused):
            return _refused(found.run or "-", line, found.reason)
        call = call_of(found, request.method, raw_path, request.url.query,
                       request.headers.items(), token)  # fmt: skip
        if isinstance(call, str):
            return _refused(found.run, line, call)
        # The run's turn, held until its answer has passed: AT_ONCE bodies of a run at most.
        uid, taken = found.uid, False
        self.at_once[uid] += 1
        turn = self.turns.setdefault(uid, asyncio.Semaphore(AT_ONCE))

        def left() -> None:
            if taken:
                turn.release()
            self.at_once[uid] -= 1
            if not self.at_once[uid]:
                del self.at_once[uid], self.turns[uid]

        response: Response | None = None
        try:
            await turn.acquire()
            taken = True
            response = await self._forward(request, found, call, token, line)
        finally:
            if isinstance(response, Relayed):
                response.passage.ended.append(left)
            else:
                left()
        return response

    async def _forward(
        self, request: Request, route: Route, call: Call, token: str, line: str
    ) -> Response:
        prepared = await self._prepared(request, route, call, line)
        if isinstance(prepared, Response):
            return prepared
        body, held = prepared
        refused = await self._admitted(request, route, token, held, line)
        if refused is not None:
            return refused
        try:  # from here, what the request holds is given back however it ends
            url, headers = upstream_request(route, call, request.headers.items())
            outgoing = self.client.build_request(request.method, url, headers=headers,
                                                 content=body)  # fmt: skip
            response = await self.client.send(outgoing, stream=True)
        except BaseException as exc:  # (also a client that left)
            await self._give_back(route, held)
            if not isinstance(exc, Exception):
                raise
            outcome, status = ("unreachable", 502) if isinstance(exc, httpx2.HTTPError) else (
                "refused", 400)  # fmt: skip
            MODEL_REQUESTS.labels(route.run, outcome).inc()
            say(f"run={route.run} {line} -> {route.upstream}: {type(exc).__name__}")
            said = "cannot be reached" if status == 502 else "cannot be sent"
            return refusal(status, f"{route.upstream} {said} ({type(exc).__name__})")
        MODEL_REQUESTS.labels(route.run, f"{response.status_code // 100}xx").inc()
        passage = Passage(route, response, token, call.endpoint.inference, held, line)
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            await passage.close(self.table, self.meter, self.settled)
            return refusal(502, "the model API answered compressed, which the route cannot read")
        return Relayed(passage, self.table, self.meter, self.settled)

    async def _give_back(self, route: Route, held: Spent) -> None:
        self.meter.landed(route, held)
        async with self.settled:
            self.settled.notify_all()

    async def _admitted(
        self, request: Request, route: Route, token: str, held: Spent, line: str
    ) -> Response | None:
        """None once the request is admitted against its run's budget, or its refusal: at a
        ceiling (the operator told first), or its route gone or its client left while it
        waited for the answers in flight (with which it could pass a ceiling)."""
        async with self.settled:
            while (verdict := self.meter.admit(route, held)).waits:
                WAITING.inc()
                try:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.settled.wait(), WAKE_SECONDS)
                finally:
                    WAITING.dec()
                still = self.route_of(request, token)
                if isinstance(still, Refused) or still.uid != route.uid:
                    return _refused(route.run, line, "the run's route ended while it waited")
                if await request.is_disconnected():
                    return _refused(route.run, line, "its client left while it waited", 499)
        if not verdict.refused:
            return None
        MODEL_REQUESTS.labels(route.run, "refused").inc()
        say(f"run={route.run} {line} refused: budget exhausted ({verdict.refused})")
        await asyncio.to_thread(self.meter.tell, route.uid)
        return refusal(403, f"the run's budget is exhausted ({verdict.refused})")

    async def _prepared(
        self, request: Request, route: Route, call: Call, line: str
    ) -> tuple[bytes | None, Spent] | Response:
        """The body to forward and what the request holds of the budget, or its refusal: a
        body too large, an answer the route cannot read the request of, or a model without
        a price where a cost ceiling applies (counted as refused)."""
        if request.method != "POST":
            return None, Spent()
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > endpoints.MAX_REQUEST_BYTES:
                return _refused(route.run, line, "the request is larger than 32 MiB", 413)
        if not call.endpoint.inference:
            return bytes(body), Spent()
        asked = endpoints.asked(route.provider, call.path, bytes(body))
        if isinstance(asked, str):
            return _refused(route.run, line, asked, 400)
        priced = self.table.price_of(asked.model) is not None
        unpriced = budgets.unpriced_refused(route.ceilings, asked.model, priced)
        if unpriced:
            self.meter.refuse(route, Spent(refused=1, unpriced=1))
            await asyncio.to_thread(self.meter.tell, route.uid)
            return _refused(route.run, line, f"the run's budget refuses it ({unpriced})")
        return asked.body, held_by(asked, self.table)


def _refused(run: str, line: str, reason: str, status: int = 403) -> Response:
    MODEL_REQUESTS.labels(run, "refused").inc()
    say(f"run={run} {line} refused: {reason}")
    return refusal(status, reason)


def _printable(raw: bytes, token: str) -> str:
    """A raw path as one log line can hold it, without the run's token."""
    text = raw[:MAX_LOGGED_PATH].decode("ascii", "replace")
    if token:
        text = text.replace(token, "[token]")
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
