"""The console's pages on Starlette: each request acts for the person whose token it carries
(``guard``), reads and decides through ``paddock.client`` (each read and decision authorised
for them with SubjectAccessReview), and lays the data of ``views`` out with Jinja2 templates.
Live parts (the runs list, a run's timeline) are server-sent events that htmx swaps into the
page: a watch on the server, no polling."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any
from urllib.parse import urlencode

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from paddock.api.approvals import ApprovalChoice
from paddock.client import approvals, runs, sandboxes
from paddock.client.access import (
    AGENTRUNS,
    CONFIGMAPS,
    POOLS,
    SANDBOXES,
    Caller,
    MissingError,
    RefusedError,
    TokenIdentities,
)
from paddock.client.common import listed
from paddock.console import guard, plumbing, views
from paddock.kube.errors import KubeError
from paddock.runs import events as ev

Handler = Callable[[Request, Caller], Response]
REFRESHING = (ev.APPROVAL_REQUESTED, ev.APPROVAL_RESOLVED, ev.USAGE, *runs.TERMINAL)
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self'; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY",  # (frame-ancestors, for browsers that read no CSP)
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # (no-referrer would make a form's Origin "null")
    "Cache-Control": "no-store",
}


class Console:
    """The console for one cluster: ``namespace`` is where its pages start."""

    def __init__(self, namespace: str, *, secure_cookie: bool, own: str | None = None) -> None:
        self.namespace = namespace
        self.secure_cookie = secure_cookie
        self.own = own  # the origin of its configured address (--external-url)
        self.identities = TokenIdentities()
        self.templates = Jinja2Templates(directory=str(files("paddock.console") / "templates"))

    # --- who asks --------------------------------------------------------------------------

    def caller(self, request: Request) -> Caller | None:
        token = guard.bearer(request.headers, request.cookies)
        identity = self.identities.identity(token) if token else None
        return None if identity is None else Caller(identity)

    def page(self, function: Handler) -> Callable[[Request], Response]:
        """A page for a signed-in person (else the sign-in page), with a refusal as a page."""

        def endpoint(request: Request) -> Response:
            caller = self.caller(request)
            if caller is None:
                return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
            if request.method == "POST" and not self._posted_here(request):
                return self.refusal(request, caller, 403, "this form was not posted from here")
            try:
                return function(request, caller)
            except MissingError as exc:
                return self.refusal(request, caller, 404, str(exc))
            except RefusedError as exc:
                return self.refusal(request, caller, 403, str(exc))
            except KubeError as exc:
                return self.refusal(request, caller, 502, f"the API server refused: {exc.message}")

        return endpoint

    def _posted_here(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        return guard.same_origin(origin, request.url.scheme, host, self.own)

    def _still(
        self, request: Request, rights: list[tuple[str, tuple[str, str], str, str]]
    ) -> Callable[[], None]:
        """What a live page calls to go on (at least every 30 s): its token is asked about
        again (a deleted ServiceAccount's is no more) and each right it reads by; raises
        ``RefusedError`` once one is gone, which ends the page's stream."""
        token = plumbing.token(request)

        def check() -> None:
            identity = self.identities.identity(token, fresh=True)
            if identity is None:
                raise RefusedError("the token this page was opened with is no longer accepted")
            for verb, resource, namespace, name in rights:
                Caller(identity).may(verb, resource, namespace, name)

        return check

    def render(self, request: Request, caller: Caller | None, name: str, status: int = 200,
               **context: Any) -> Response:  # fmt: skip
        token = guard.bearer(request.headers, request.cookies)
        context |= {
            "user": caller.username if caller else None,
            "csrf": guard.csrf_token(token) if token and caller else "",
            "namespace": context.get("namespace") or self._namespace(request),
        }
        return self.templates.TemplateResponse(request, name, context, status, headers=HEADERS)

    def _forged(self, request: Request, caller: Caller) -> Response | None:
        """The refusal of a POST without this page's CSRF token (None: it has it)."""
        if guard.csrf_ok(plumbing.token(request), plumbing.form(request).get(guard.CSRF_FIELD)):
            return None
        return self.refusal(request, caller, 403, "the form's CSRF token is not this page's")

    def refusal(self, request: Request, caller: Caller, status: int, message: str) -> Response:
        return self.render(request, caller, "refused.html", status, message=message)

    def _namespace(self, request: Request) -> str:
        return request.query_params.get("namespace") or self.namespace

    # --- signing in ------------------------------------------------------------------------

    def login(self, request: Request) -> Response:
        return self.render(request, None, "login.html", next=plumbing.local(request.query_params))

    async def sign_in(self, request: Request) -> Response:
        form = await request.form()
        token = str(form.get("token") or "").strip()
        where = plumbing.local(form)
        known = bool(token) and await run_in_threadpool(self.identities.identity, token) is not None
        if not self._posted_here(request) or not known:
            failed = "that token is not one the cluster accepts"
            return self.render(request, None, "login.html", 401, next=where, failed=failed)
        response = RedirectResponse(where, status_code=303)
        response.set_cookie(guard.COOKIE, token, httponly=True, samesite="strict",
                            secure=self.secure_cookie, path="/")  # fmt: skip
        return response

    def sign_out(self, request: Request, caller: Caller) -> Response:
        if (refused := self._forged(request, caller)) is not None:
            return refused
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(guard.COOKIE, path="/")
        return response

    # --- runs ------------------------------------------------------------------------------

    def runs_page(self, request: Request, caller: Caller) -> Response:
        namespace = self._namespace(request)
        shown = _filter(request)
        runs_now = listed(caller, "AgentRun", AGENTRUNS, namespace)
        return self.render(request, caller, "runs.html", shown=shown, phases=views.PHASES,
                           listing=views.run_page(runs_now, _now(), shown),
                           query=request.url.query, paging=_paging(request))  # fmt: skip

    def runs_stream(self, request: Request, caller: Caller) -> Response:
        """The runs list as it changes: the whole table when its rows, their order or its
        pages change, else only the rows that changed (none: nothing is sent)."""
        namespace, shown = self._namespace(request), _filter(request)
        check = self._still(request, [("list", AGENTRUNS, namespace, ""),
                                      ("watch", AGENTRUNS, namespace, "")])  # fmt: skip
        changes = runs.runs_as_they_change(caller, namespace, check)
        table = self.templates.get_template("runs_table.html")
        one = self.templates.get_template("run_row.html")
        paging = _paging(request)

        def stream() -> Iterator[ServerSentEvent]:
            before = None
            for current in changes:
                listing = views.run_page(current, _now(), shown)
                changed = views.changed_rows(before, listing)
                before = listing
                if changed is None:
                    html = table.render(listing=listing, namespace=namespace, paging=paging)
                    yield ServerSentEvent(data=html, event="runs")
                elif changed:
                    rows = [one.render(row=r, namespace=namespace, oob=True) for r in changed]
                    yield ServerSentEvent(data="".join(rows), event="rows")

        return EventSourceResponse(plumbing.until_refused(stream()), headers=HEADERS, ping=15)

    def approvals_page(self, request: Request, caller: Caller) -> Response:
        namespace = self._namespace(request)
        pending = views.waiting(listed(caller, "AgentRun", AGENTRUNS, namespace))
        deciding = _deciding(caller, namespace, pending, {})
        return self.render(request, caller, "approvals.html", waiting=pending, deciding=deciding)

    def approvals_stream(self, request: Request, caller: Caller) -> Response:
        namespace = self._namespace(request)
        check = self._still(request, [("list", AGENTRUNS, namespace, ""),
                                      ("watch", AGENTRUNS, namespace, "")])  # fmt: skip
        changes = runs.runs_as_they_change(caller, namespace, check)
        listing = self.templates.get_template("approvals_list.html")
        csrf = guard.csrf_token(plumbing.token(request))
        asked: dict[str, bool] = {}  # whether the person may decide a run's, asked once a run

        def stream() -> Iterator[ServerSentEvent]:
            for current in changes:
                pending = views.waiting(current)
                deciding = _deciding(caller, namespace, pending, asked)
                html = listing.render(waiting=pending, deciding=deciding, namespace=namespace,
                                      csrf=csrf)  # fmt: skip
                yield ServerSentEvent(data=html, event="approvals")

        return EventSourceResponse(plumbing.until_refused(stream()), headers=HEADERS, ping=15)

    def run_page(self, request: Request, caller: Caller) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        run = runs.read_run(caller, namespace, name)
        return self.render(request, caller, "run.html", namespace=namespace,
                           **self._run_parts(caller, run))  # fmt: skip

    def _run_parts(self, caller: Caller, run: dict[str, Any]) -> dict[str, Any]:
        meta = run["metadata"]
        return {
            "run": run,
            "row": views.run_row(run, _now()),
            "requests": views.requests(run),
            "message": (run.get("status") or {}).get("message") or "",
            "may_decide": caller.allows("patch", AGENTRUNS, meta["namespace"], meta["name"]),
            "may_delete": caller.allows("delete", AGENTRUNS, meta["namespace"], meta["name"]),
            "ended": views.ENDED,
        }

    def run_events(self, request: Request, caller: Caller) -> Response:
        """The run's log from the start (or from after the browser's ``Last-Event-ID``, when
        it reconnects), then each event as it comes; the status and approvals again when an
        event changes them; ``end`` once the run has ended."""
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        runs.read_run(caller, namespace, name)
        start = plumbing.after(request.headers.get("last-event-id"))
        check = self._still(request, [("get", AGENTRUNS, namespace, name),
                                      ("list", CONFIGMAPS, namespace, "")])  # fmt: skip
        followed = runs.events(caller, namespace, name, start, follow=True, check=check)
        item = self.templates.get_template("item.html")
        parts = self.templates.get_template("run_parts.html")
        csrf = guard.csrf_token(plumbing.token(request))

        def stream() -> Iterator[ServerSentEvent]:
            try:
                for event in followed:
                    html = item.render(item=views.item(event))
                    yield ServerSentEvent(data=html, event="item", id=str(event["seq"]))
                    if event["type"] in REFRESHING:
                        ending = event["type"] in runs.TERMINAL
                        run = (
                            runs.ended(namespace, name)
                            if ending
                            else runs.read_run(caller, namespace, name)
                        )
                        context = self._run_parts(caller, run) | {
                            "namespace": namespace,
                            "csrf": csrf,
                        }
                        yield ServerSentEvent(data=parts.render(**context), event="parts")
            except (RefusedError, KubeError) as exc:
                yield ServerSentEvent(data=f"the log cannot be read: {exc}", event="broken")
            yield ServerSentEvent(data="", event="end")

        return EventSourceResponse(stream(), headers=HEADERS, ping=15)

    def decide(self, request: Request, caller: Caller) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        form = plumbing.form(request)
        if (refused := self._forged(request, caller)) is not None:
            return refused
        if form.get("choice") not in set(ApprovalChoice):
            return self.refusal(request, caller, 400, "choose approve, approve-always or deny")
        if not str(form.get("digest") or "").startswith("sha256:"):
            return self.refusal(request, caller, 400, "the form names no text to decide on")
        choice = ApprovalChoice(form["choice"])
        rid = request.path_params["request"]
        approvals.decide(caller, namespace, name, [rid], choice, shown={rid: form["digest"]})
        if request.headers.get("hx-request"):
            return Response(status_code=204)  # the page stays; its live parts show the outcome
        return RedirectResponse(f"/runs/{namespace}/{name}", status_code=303)

    def cancel(self, request: Request, caller: Caller) -> Response:
        """Cancel a run from its page: it stays, and ends Cancelled."""
        return self._act(request, caller, runs.cancel_run, "/runs/{namespace}/{name}")

    def delete(self, request: Request, caller: Caller) -> Response:
        """Delete a run (and its log) from its page; the runs list follows."""
        return self._act(request, caller, runs.delete_run, "/runs?namespace={namespace}")

    def _act(
        self, request: Request, caller: Caller, act: Callable[[Caller, str, str], object],
        then: str,
    ) -> Response:  # fmt: skip
        """A run's action posted from its page (with its CSRF token), then the page ``then``."""
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        if (refused := self._forged(request, caller)) is not None:
            return refused
        act(caller, namespace, name)
        return RedirectResponse(then.format(namespace=namespace, name=name), status_code=303)

    # --- sandboxes -------------------------------------------------------------------------

    def sandboxes_page(self, request: Request, caller: Caller) -> Response:
        namespace = self._namespace(request)
        now = _now()
        boxes = [views.sandbox_row(s, now) for s in listed(caller, "Sandbox", SANDBOXES, namespace)]
        pools = []
        if caller.allows("list", POOLS, namespace):
            pools = [views.pool_row(p) for p in listed(caller, "SandboxPool", POOLS, namespace)]
        return self.render(request, caller, "sandboxes.html", sandboxes=boxes, pools=pools)

    def check(self, request: Request, caller: Caller) -> Response:
        namespace, name = request.path_params["namespace"], request.path_params["name"]
        command = request.query_params.get("command") or ""
        verdict = sandboxes.check_command(caller, namespace, name, command) if command else None
        page = "verdict.html" if request.headers.get("hx-request") else "check.html"
        return self.render(request, caller, page, namespace=namespace, sandbox=name,
                           command=command, verdict=verdict)  # fmt: skip


def _deciding(
    caller: Caller, namespace: str, pending: list[views.Waiting], asked: dict[str, bool]
) -> set[str]:
    """The runs among ``pending``'s whose requests the person may decide (each run asked about
    once, kept in ``asked``)."""
    for run in {w.run for w in pending} - asked.keys():
        asked[run] = caller.allows("patch", AGENTRUNS, namespace, run)
    return {run for run, may in asked.items() if may}


def _now() -> datetime:
    return datetime.now(UTC)


def _filter(request: Request) -> views.RunFilter:
    query = request.query_params
    page = query.get("page", "1")
    return views.RunFilter(query.get("phase", ""), query.get("harness", ""), query.get("q", ""),
                           int(page) if re.fullmatch(r"[0-9]{1,6}", page) else 1)  # fmt: skip


def _paging(request: Request) -> str:
    """The runs list's query without its page: what the pager's links add a page to."""
    return urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "page"])


def build(namespace: str, *, secure_cookie: bool, external_url: str | None = None) -> Starlette:
    own = guard.origin_of(external_url) if external_url else None
    console = Console(namespace, secure_cookie=secure_cookie, own=own)
    page = console.page
    static = StaticFiles(directory=str(files("paddock.console") / "static"))
    routes = [
        Route("/", lambda request: RedirectResponse("/runs", status_code=303)),
        Route("/healthz", lambda request: Response("ok")),
        Route("/login", console.login, methods=["GET"]),
        Route("/login", console.sign_in, methods=["POST"]),
        Route("/logout", plumbing.with_form(page(console.sign_out)), methods=["POST"]),
        Route("/runs", page(console.runs_page)),
        Route("/runs/stream", page(console.runs_stream)),
        Route("/approvals", page(console.approvals_page)),
        Route("/approvals/stream", page(console.approvals_stream)),
        Route("/runs/{namespace}/{name}", page(console.run_page)),
        Route("/runs/{namespace}/{name}/events", page(console.run_events)),
        Route(
            "/runs/{namespace}/{name}/approvals/{request}",
            plumbing.with_form(page(console.decide)),
            methods=["POST"],
        ),
        Route(
            "/runs/{namespace}/{name}/cancel",
            plumbing.with_form(page(console.cancel)),
            methods=["POST"],
        ),
        Route(
            "/runs/{namespace}/{name}/delete",
            plumbing.with_form(page(console.delete)),
            methods=["POST"],
        ),
        Route("/sandboxes", page(console.sandboxes_page)),
        Route("/sandboxes/{namespace}/{name}/check", page(console.check)),
        Mount("/static", static, name="static"),
    ]
    return Starlette(
        routes=routes, lifespan=plumbing.threads, middleware=[Middleware(plumbing.Named, own=own)]
    )
