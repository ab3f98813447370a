"""The console's ASGI plumbing: the Host check every request passes, the worker threads its
live pages follow watches in, a posted form read before a page runs in a thread, and what a
request carries (its token, its form, where to go next, where a stream resumes), and a live
part's end once its reader's access is gone."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from paddock.client.access import RefusedError
from paddock.console import guard
from paddock.kube.errors import KubeError


class Named:
    """Serves only requests whose ``Host`` names the console (``guard.host_allowed``); others
    get 421 Misdirected Request."""

    def __init__(self, app: ASGIApp, own: str | None) -> None:
        self.app, self.own = app, own

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not guard.host_allowed(
            Headers(scope=scope).get("host"), self.own
        ):
            refused = PlainTextResponse("this console is not served at that address", 421)
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


WORKER_THREADS = 400  # each open live page holds one while its watch waits


@contextlib.asynccontextmanager
async def threads(app: Starlette) -> AsyncIterator[None]:
    """Enough worker threads for the live pages: each follows a watch in one (anyio's default
    of 40 would let 40 open pages stop every other request)."""
    import anyio.to_thread

    anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
    yield


def with_form(endpoint: Callable[[Request], Response]) -> Callable[[Request], Any]:
    """Read the posted form first (async), then run the page in a worker thread."""

    async def reading(request: Request) -> Response:
        request.state.form = {k: str(v) for k, v in (await request.form()).items()}
        return await run_in_threadpool(endpoint, request)

    return reading


def after(last_event_id: str | None) -> int:
    seq = last_event_id or ""
    return int(seq) + 1 if re.fullmatch(r"[0-9]{1,12}", seq) else 0


def token(request: Request) -> str:
    return guard.bearer(request.headers, request.cookies) or ""


def form(request: Request) -> dict[str, str]:
    """The posted form (a page endpoint runs in a worker thread: the body was read before)."""
    return dict(request.state.form)


def local(query: Any) -> str:
    """Where to go after signing in: a path of this console, never another site."""
    where = str(query.get("next") or "/runs")
    return where if where.startswith("/") and not where.startswith("//") else "/runs"


def until_refused(stream: Iterator[ServerSentEvent]) -> Iterator[ServerSentEvent]:
    """A live part's events until the person's access is gone: then one saying so, and the
    stream ends (the browser's reconnection then meets the sign-in or a refusal)."""
    try:
        yield from stream
    except RefusedError as exc:
        yield ServerSentEvent(data=f"this page's access has ended: {exc}", event="broken")
    except KubeError as exc:  # (its access could not be asked about: ended all the same)
        yield ServerSentEvent(data=f"the API server refused: {exc.message}", event="broken")
