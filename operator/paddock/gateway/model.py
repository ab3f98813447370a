"""The gateway's model route: an HTTP endpoint a harness uses as its model API's base URL,
with its run's token where the API key would be. A request whose token is a running run's,
sent from a pod of that run's sandbox, is forwarded to the run's model API with the real key in
the provider's own header; its response is streamed back as it comes. Anything else is refused
with an error the CLIs show (the shape of the providers' own), and nothing is forwarded.

The token is taken from wherever a CLI puts its key (``x-api-key``, ``Authorization: Bearer``,
``x-goog-api-key``, a ``key`` query parameter); every one of those is dropped before the request
goes on, so the token never leaves the gateway and the key never reaches the sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from urllib.parse import parse_qsl, urlencode

import httpx2
import uvicorn
from prometheus_client import Counter
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route as Path

from paddock.gateway.meter import Meter
from paddock.gateway.prices import PriceTable
from paddock.gateway.routes import Refused, Routes
from paddock.gateway.usage import Usage, UsageCounter
from paddock.policy.budgets import Spent
from paddock.render.model_routes import Route
from paddock.times import utcnow

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
CREDENTIALS = frozenset({"authorization", "x-api-key", "x-goog-api-key"})
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade", "host"}
)  # fmt: skip
# The provider's header for the real key.
KEY_HEADER: dict[str, Callable[[str], tuple[str, str]]] = {
    "anthropic": lambda key: ("x-api-key", key),
    "openai": lambda key: ("authorization", f"Bearer {key}"),
    "google": lambda key: ("x-goog-api-key", key),
}
TOKENS = Counter(
    "paddock_model_tokens",
    "Model tokens the gateway's model route saw used, from the providers' own usage fields, by "
    "the run's namespace, harness and direction (input, output).",
    ["namespace", "harness", "direction"],
)
COST = Counter(
    "paddock_model_cost_usd",
    "What the model requests through the route cost, in US dollars, from the price table, by "
    "the run's namespace (models the table does not price are counted in tokens only).",
    ["namespace"],
)
KEPT_ENDED = 1000
# What the route forwards: each provider's inference endpoints and model listing, nothing else
# (no files, batches, fine-tuning or administration that the same key could reach).
MODEL_PATHS = {
    "anthropic": re.compile(r"/v1/(messages(/count_tokens)?|models(/[^/]+)?)"),
    "openai": re.compile(
        r"/v1/(responses(/[^/]+(/cancel|/input_items)?)?|chat/completions|models(/[^/]+)?)"
    ),
    "google": re.compile(
        r"/v1(beta|alpha)?/models(/[^/:]+(:(generateContent|streamGenerateContent|countTokens))?)?"
    ),
}
TIMEOUT = httpx2.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)
MODEL_REQUESTS = Counter(
    "paddock_gateway_model_requests",
    "Requests on the gateway's model route, by run (NAMESPACE/NAME; '-' for a token no run "
    "holds) and outcome: forwarded (with the model API's status class, 2xx...5xx), refused "
    "or unreachable. The series of the last 1000 runs that ended are kept.",
    ["run", "outcome"],
)


def token_of(headers: Mapping[str, str], query: Mapping[str, str]) -> str:
    """The run's token, wherever the harness put its key."""
    bearer = headers.get("authorization", "")
    if bearer[:7].lower() == "bearer ":
        return bearer[7:].strip()
    return headers.get("x-api-key") or headers.get("x-goog-api-key") or query.get("key") or ""


def upstream_request(
    route: Route, path: str, query: str, headers: list[tuple[str, str]]
) -> tuple[str, list[tuple[str, str]]]:
    """The URL and headers of the forwarded request: the run's API and path, the query without
    a key, the client's headers without credentials or hop-by-hop ones, and the real key."""
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "key"]
    url = route.upstream + path + (f"?{urlencode(kept)}" if kept else "")
    dropped = CREDENTIALS | HOP_BY_HOP | {"accept-encoding"}
    forwarded = [(k, v) for k, v in headers if k.lower() not in dropped]
    # Uncompressed, so that the route reads the usage in the response as it passes.
    return url, [*forwarded, ("accept-encoding", "identity"), KEY_HEADER[route.provider](route.key)]


def inference(request: Request) -> bool:
    """Whether the request asks the model for an answer (which costs), not a count or a list."""
    path = request.url.path
    return request.method == "POST" and not path.endswith(("/count_tokens", ":countTokens"))


def model_path(provider: str, path: str) -> bool:
    """Whether the route forwards a request for ``path`` to the provider's API."""
    pattern = MODEL_PATHS.get(provider)
    return pattern is not None and pattern.fullmatch(path) is not None


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

    async def forward(request: Request) -> Response:
        address = request.client.host if request.client else ""
        if not ready():
            return refusal(503, "the gateway is starting")
        line = f"{request.method} {request.url.path}"
        token = token_of(request.headers, request.query_params)
        found = await _admitted(routes.find(token, sandbox_at(address), utcnow()), request.url.path,
                                f"from={address} {line}", spending)  # fmt: skip
        if isinstance(found, Response):
            return found
        url, headers = upstream_request(
            found, request.url.path, request.url.query, request.headers.items()
        )
        outgoing = client.build_request(
            request.method, url, headers=headers, content=request.stream()
        )
        try:
            response = await client.send(outgoing, stream=True)
        except httpx2.HTTPError as exc:
            MODEL_REQUESTS.labels(found.run, "unreachable").inc()
            _say(f"run={found.run} {line} -> {found.upstream} unreachable: {type(exc).__name__}")
            return refusal(502, f"{found.upstream} cannot be reached ({type(exc).__name__})")
        MODEL_REQUESTS.labels(found.run, f"{response.status_code // 100}xx").inc()
        relayed = _relay(request, response, found, table, spending, line)
        kept = {k: v for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP}
        return StreamingResponse(
            relayed, response.status_code, kept, background=BackgroundTask(response.aclose)
        )

    return Starlette(routes=[Path("/{path:path}", forward, methods=METHODS)])


async def _relay(
    request: Request,
    response: httpx2.Response,
    found: Route,
    table: PriceTable,
    spending: Meter,
    line: str,
) -> AsyncIterator[bytes]:
    """The answer's bytes as they come, its usage counted as it passes (told within the
    meter's period) and, at its end, the rest."""
    counter = UsageCounter(found.provider, response.headers.get("content-type", ""))
    streamed = Spent()  # what of the answer is counted already, as it passed
    try:
        async for chunk in response.aiter_raw():
            counter.feed(chunk)
            grown = _spent(counter.so_far, table).at_least(streamed)  # (only grows)
            if grown != streamed:
                spending.streaming(found, grown - streamed)
                streamed = grown
            yield chunk
    finally:  # also when the client leaves before the end (Codex does, at times)
        usage = counter.usage
        cost = _counted(found, usage, table, f"{line} -> {response.status_code}")
        uncounted = response.status_code < 300 and inference(request) and not counter.counted
        spending.used(found, usage, cost, uncounted, streamed)


async def _admitted(found: Route | Refused, path: str, line: str, meter: Meter) -> Route | Response:
    """The request's route, or its refusal: no run's token, a path that is not the model
    API's, or a ceiling of the run's budget reached (the operator told first)."""
    if isinstance(found, Refused):
        MODEL_REQUESTS.labels(found.run or "-", "refused").inc()
        _say(f"run={found.run or '-'} {line} refused: {found.reason}")
        return refusal(403, found.reason)
    if not model_path(found.provider, path):
        MODEL_REQUESTS.labels(found.run, "refused").inc()
        _say(f"run={found.run} {line} refused: not an endpoint of the model API")
        return refusal(403, f"{path} is not an endpoint of the model API")
    at = meter.admit(found)
    if at:
        MODEL_REQUESTS.labels(found.run, "refused").inc()
        _say(f"run={found.run} {line} refused: budget exhausted ({at})")
        await asyncio.to_thread(meter.tell, found.uid)
        return refusal(403, f"the run's budget is exhausted ({at})")
    return found


def _spent(usage: Usage, prices: PriceTable) -> Spent:
    """The tokens of an answer so far, and their cost if its model is priced."""
    cost = prices.cost(usage) or 0.0
    return Spent(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost_usd=cost)


def _counted(route: Route, usage: Usage, prices: PriceTable, line: str) -> float | None:
    """A response that passed: its usage counted, and logged with the request; its cost."""
    namespace = route.run.partition("/")[0]
    harness = route.harness or "-"
    TOKENS.labels(namespace, harness, "input").inc(usage.input_tokens)
    TOKENS.labels(namespace, harness, "output").inc(usage.output_tokens)
    cost = prices.cost(usage)
    if cost is not None:
        COST.labels(namespace).inc(cost)
    priced = "unpriced" if cost is None else f"${cost:.6f}"
    _say(f"run={route.run} {line} model={usage.model or '-'} input={usage.input_tokens} "
         f"output={usage.output_tokens} cost={priced}")  # fmt: skip
    return cost


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


def _say(line: str) -> None:
    print(f"paddock gateway: model route: {line}", file=sys.stderr, flush=True)
