"""The gateway's credential routes (``render.credential_routes``): an HTTP API a run reaches
with a secret header it never holds. A request to ``/_route/TOKEN/NAME/PATH`` whose token is a
running run's, sent from a pod of that run's sandbox, whose method and path one of the route's
rules lets through, to a host the sandbox's policy allows now (as the proxy would judge it) and
that resolves to no internal address (unless vouched for), goes to the route's URL + PATH with
the route's headers, on the address it was judged at. Its body streams both ways; the answer
comes back scrubbed of the secrets and the token. Anything else is refused, and nothing of it
is forwarded.

The request's own credentials (Authorization, Cookie, Proxy-Authorization) and any header of
a name the route sets are dropped: the run cannot choose what the secret header says."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from prometheus_client import Counter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from paddock.gateway import endpoints
from paddock.gateway.directory import Decided
from paddock.gateway.relay import HOP_BY_HOP, REWRITTEN, say
from paddock.gateway.routes import Refused, TokenStore
from paddock.render.credential_routes import CredentialRoute, RunRoutes, read_routes
from paddock.runs.scrubbing import StreamScrubber
from paddock.times import utcnow

Obj = dict[str, Any]
Decide = Callable[[str, str, int], Decided]  # address, host, port -> the proxy's judgement
Reachable = Callable[[str], bool]  # an address -> not internal, or vouched for
Resolve = Callable[[str, int], Awaitable[list[str]]]  # host, port -> its addresses
# Never forwarded from the sandbox: its own credentials (the route's are added instead), what
# would make the request another than the one the rules judged (a method or path override,
# another host), and a range (the answer is scrubbed whole, not in slices of it).
DROPPED = frozenset({
    "authorization", "cookie", "proxy-authorization", "accept-encoding", "range", "if-range",
    "x-http-method-override", "x-http-method", "x-method-override", "x-original-method",
    "x-original-url", "x-rewrite-url", "x-forwarded-host", "x-forwarded-prefix",
    "x-forwarded-proto", "x-forwarded-for", "forwarded", "x-host", "x-original-host",
    "x-forwarded-port", "x-real-ip", "true-client-ip", "accept-charset",
})  # fmt: skip
# Never passed back: what would let the agent act as the route without it (a session).
WITHHELD = frozenset({"set-cookie", "set-cookie2"})
MAX_PATH = 2048  # a longer path under a route is refused before its rules are read
TIMEOUT = httpx2.Timeout(connect=10.0, read=300.0, write=300.0, pool=30.0)
REQUESTS = Counter(
    "paddock_gateway_credential_requests",
    "Requests on the gateway's credential routes, by outcome: forwarded (with the API's "
    "status class, 2xx...5xx), refused or unreachable.",
    ["outcome"],
)


class CredentialRoutes(TokenStore[RunRoutes]):
    """The runs' credential routes, as the gateway's watch of their Secrets last said."""

    def __init__(self) -> None:
        super().__init__(read_routes)


def parts(raw_path: bytes) -> tuple[str, str, str] | None:
    """The token, the route's name and the path under it (starting with /) of a plain path
    ``/_route/TOKEN/NAME[/PATH]`` (a trailing / kept); None for anything else."""
    trailing = raw_path.endswith(b"/")
    path = endpoints.checked_path(raw_path.removesuffix(b"/"))
    if path is None or not path.startswith("/_route/"):
        return None
    path += "/" if trailing else ""
    token, _, rest = path.removeprefix("/_route/").partition("/")
    name, slash, under = rest.partition("/")
    if not token or not name:
        return None
    return token, name, slash + under if slash else "/"


def upstream_headers(
    route: CredentialRoute, headers: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The request's headers as forwarded: without hop-by-hop ones, its own credentials and
    any the route sets; with the route's, and uncompressed (so that the answer is scrubbed)."""
    own = {name.lower() for name, _ in route.headers}
    dropped = HOP_BY_HOP | DROPPED | own
    kept = [(k, v) for k, v in headers if k.lower() not in dropped]
    return [*kept, *route.headers, ("accept-encoding", "identity")]


def refusal(status: int, message: str) -> JSONResponse:
    REQUESTS.labels("refused").inc()
    return JSONResponse(
        {"error": {"message": f"Paddock's credential route: {message}", "code": status}},
        status_code=status,
    )


class CredentialForwarding:
    """The handler of ``/_route/...`` (``forward``)."""

    def __init__(
        self,
        routes: CredentialRoutes,
        sandbox_at: Callable[[str], str | None],
        decide: Decide,
        reachable: Reachable,
        ready: Callable[[], bool],
        resolve: Resolve | None = None,
    ) -> None:
        self.routes, self.sandbox_at, self.decide = routes, sandbox_at, decide
        self.reachable, self.ready = reachable, ready
        self.resolve = resolve or resolver(None)
        # No connection is kept for another request: a pooled one is known by its address, and
        # another route's host at the same address would get the TLS it was checked for.
        limits = httpx2.Limits(max_connections=None, max_keepalive_connections=0)
        self.client = httpx2.AsyncClient(
            timeout=TIMEOUT, limits=limits, trust_env=False, follow_redirects=False
        )

    async def forward(self, request: Request) -> Response:
        if not self.ready():
            return refusal(503, "the gateway is starting")
        found = parts(request.scope.get("raw_path") or request.url.path.encode())
        if found is None:
            return refusal(404, "the path is not a plain one of a route")
        token, name, path = found
        address = request.client.host if request.client else ""
        line = f"from={address} {request.method} route={name}"
        routes = self.routes.find(token, self.sandbox_at(address), utcnow())
        if isinstance(routes, Refused):
            return _refused(line, routes.reason)
        route = routes.named(name)
        if route is None:
            return _refused(line, f"the run has no route {name}")
        if len(path) > MAX_PATH:
            return _refused(line, f"the path is longer than {MAX_PATH} characters")
        # (off the loop: a route's patterns, matched against a long path, take a while)
        query = request.scope.get("query_string", b"").decode("latin-1")
        if not await asyncio.to_thread(route.allows, request.method, path, query):
            return _refused(line, f"{request.method} {path[:200]} is not one the route allows")
        target = await self._judged(address, route)
        if isinstance(target, str):
            return _refused(line, target)
        return await self._send(request, route, routes, path, target, token, line)

    async def _judged(self, address: str, route: CredentialRoute) -> tuple[str, str] | str:
        """The upstream's host and the address it is reached at, or why not: a host the
        sandbox's policy does not allow now, or one that resolves to an internal address."""
        url = urlsplit(route.upstream)
        host = url.hostname or ""
        port = url.port or (443 if url.scheme == "https" else 80)
        decided = self.decide(address, host, port)
        if not decided.allowed:
            return f"{host}:{port} {decided.reason}"
        try:
            addresses = await self.resolve(host, port)
        except OSError as exc:
            return f"{host} does not resolve ({exc})"
        if not addresses or not all(self.reachable(a) for a in addresses):
            return f"{host} resolves to an internal address"
        return host, addresses[0]

    async def _send(
        self,
        request: Request,
        route: CredentialRoute,
        routes: RunRoutes,
        path: str,
        target: tuple[str, str],
        token: str,
        line: str,
    ) -> Response:
        host, address = target
        url = urlsplit(route.upstream)
        at = f"[{address}]" if ":" in address else address
        netloc = at + (f":{url.port}" if url.port else "")
        query = f"?{request.url.query}" if request.url.query else ""
        pinned = f"{url.scheme}://{netloc}{url.path.rstrip('/')}{path}{query}"
        headers = [*upstream_headers(route, request.headers.items()), ("host", url.netloc)]
        body = request.stream() if request.method not in ("GET", "HEAD") else None
        outgoing = self.client.build_request(
            request.method, pinned, headers=headers, content=body,
            extensions={"sni_hostname": host},
        )  # fmt: skip
        try:
            response = await self.client.send(outgoing, stream=True)
        except httpx2.HTTPError as exc:
            REQUESTS.labels("unreachable").inc()
            say(f"run={routes.run} {line} -> {host}: {type(exc).__name__}")
            return refusal(502, f"{host} cannot be reached ({type(exc).__name__})")
        REQUESTS.labels(f"{response.status_code // 100}xx").inc()
        say(f"run={routes.run} {line} -> {host}: {response.status_code}")
        if response.headers.get("content-encoding", "identity").lower() != "identity":
            await response.aclose()
            return refusal(502, f"{host} answered compressed, which the route cannot scrub")
        scrubber = StreamScrubber([*route.secrets, token])
        kept = [
            (k, scrubber.header(v))
            for k, v in response.headers.multi_items()
            if k.lower() not in HOP_BY_HOP | REWRITTEN | WITHHELD
        ]
        answer = StreamingResponse(_scrubbed(response, scrubber), response.status_code)
        answer.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept]
        return answer


async def _scrubbed(response: httpx2.Response, scrubber: StreamScrubber) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield scrubber.feed(chunk)
        yield scrubber.end()
    finally:
        await response.aclose()


def _refused(line: str, reason: str) -> Response:
    say(f"{line} refused: {reason}")
    return refusal(403, reason)


def resolver(hosts_file: Path | None) -> Resolve:
    """Names as the gateway's Squid resolves them: from ``hosts_file`` (/etc/hosts format)
    first, else the system's resolver."""
    named: dict[str, str] = {}
    if hosts_file is not None:
        for line in hosts_file.read_text().splitlines():
            words = line.split("#")[0].split()
            for name in words[1:]:
                named.setdefault(name.lower(), words[0])

    async def resolve(host: str, port: int) -> list[str]:
        if host.lower() in named:
            return [named[host.lower()]]
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [str(info[4][0]) for info in found]

    return resolve


NAT64 = ipaddress.ip_network("64:ff9b::/96")
# IPv6 ranges that are no global address whatever a Python version says of them, or that carry
# an IPv4 address in their last 32 bits.
NEVER_GLOBAL = tuple(ipaddress.ip_network(n) for n in (
    "fec0::/10", "64:ff9b:1::/48", "::/96", "::ffff:0:0:0/96", "100::/64", "2001:db8::/32",
))  # fmt: skip
CARRY_IPV4 = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "::/96", "::ffff:0:0:0/96"))


def embedded(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[Any]:
    """The address and every IPv4 address it carries (IPv4-mapped, NAT64, 6to4, Teredo), which
    a connection to it may reach."""
    if isinstance(ip, ipaddress.IPv4Address):
        return [ip]
    found: list[Any] = [ip]
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if any(ip in n for n in CARRY_IPV4):
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found += list(ip.teredo)
    return found


def reachable_from(internal: Callable[[], tuple[str, ...]], vouched: tuple[str, ...]) -> Reachable:
    """Whether an address may be reached: one vouched for, or one that is global (no private,
    shared, link-local, loopback or reserved address) and in none of the gateway's internal
    ranges (as they are now: the cluster's addresses change), nor carries such an IPv4
    address (an IPv4-mapped, NAT64, 6to4 or Teredo IPv6 address)."""
    trusted = [ipaddress.ip_network(n, strict=False) for n in vouched]

    def reachable(address: str) -> bool:
        ip = ipaddress.ip_address(address.split("%")[0])
        if any(ip.version == n.version and ip in n for n in trusted):
            return True
        ranges = [ipaddress.ip_network(n, strict=False) for n in internal()]
        return all(
            one.is_global
            and not any(one.version == n.version and one in n for n in (*ranges, *NEVER_GLOBAL))
            for one in embedded(ip)
        )

    return reachable
