"""Who a console request is from, its CSRF token and Origin (pure), and that every page and
decision asks the API server whether the person may (SubjectAccessReview) before it reads or
writes anything: here with the reviews answered no, and the Kubernetes calls that would follow
failing the test if made. (The real reviews, and a viewer refused, are the browser test's.)"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from paddock.client import access
from paddock.console import app, guard
from paddock.kube import client as kube
from paddock.kube import review
from paddock.kube.review import Identity

TOKEN = "token-of-alice"


def test_the_bearer_comes_from_authorization_before_the_cookie() -> None:
    cookie = {guard.COOKIE: "from-cookie"}
    assert guard.bearer({"authorization": "Bearer  from-proxy "}, cookie) == "from-proxy"
    assert guard.bearer({"authorization": "Basic abc"}, cookie) == "from-cookie"
    assert guard.bearer({}, cookie) == "from-cookie"
    assert guard.bearer({"authorization": "Bearer "}, {}) is None


def test_a_csrf_token_is_the_bearers_own_and_checked_in_constant_time() -> None:
    mine = guard.csrf_token(TOKEN)
    assert mine == guard.csrf_token(TOKEN)
    assert mine != guard.csrf_token("token-of-bob")
    assert TOKEN not in mine
    assert guard.csrf_ok(TOKEN, mine)
    assert not guard.csrf_ok(TOKEN, None)
    assert not guard.csrf_ok(TOKEN, guard.csrf_token("token-of-bob"))


CONSOLE = "https://console.example:8443"  # the address the console is configured with


@pytest.mark.parametrize(
    ("origin", "same"),
    [(None, True), ("https://console.example:8443", True), ("https://evil.example", False),
     ("http://console.example:8443", False), ("null", False)],
)  # fmt: skip
def test_only_the_consoles_own_origin_may_post(origin: str | None, same: bool) -> None:
    assert guard.same_origin(origin, "https", "console.example:8443", None) is same
    # Behind a proxy that ends TLS, the configured address's origin is the console's own.
    assert guard.same_origin(origin, "http", "console.example:8443", CONSOLE) is same


@pytest.mark.parametrize(
    ("host", "served"),
    [("console.example:8443", True), ("CONSOLE.example:8443", True),
     ("console.example", False),  # another port: another origin
     ("evil.example", False), ("evil.example:8443", False),  # a name rebound to the console
     ("localhost:8080", True), ("127.0.0.1:8080", True), ("[::1]:8080", True),
     ("10.96.0.7", True), ("", False), (None, False)],
)  # fmt: skip
def test_only_requests_naming_the_console_are_served(host: str | None, served: bool) -> None:
    assert guard.host_allowed(host, CONSOLE) is served
    client = TestClient(app.build("team", secure_cookie=False, external_url=CONSOLE + "/"))
    answer = client.get("/healthz", headers={"Host": host} if host else {"Host": ""})
    assert (answer.status_code == 200) is served
    if not served:
        assert answer.status_code == 421


@pytest.mark.parametrize(
    ("url", "origin"),
    [("https://Console.Example:443/", "https://console.example"),
     ("http://console.example:80", "http://console.example"),
     ("https://console.example.:8443/x", "https://console.example:8443")],
)  # fmt: skip
def test_the_configured_address_is_the_origin_a_browser_sends(url: str, origin: str) -> None:
    assert guard.origin_of(url) == origin


def _client() -> TestClient:
    """The console configured at CONSOLE, and asked there."""
    console = app.build("team", secure_cookie=False, external_url=CONSOLE)
    return TestClient(console, base_url=CONSOLE, follow_redirects=False)


# Each request the console serves, and the first review it must ask for: (verb, resource).
ACTIONS = [
    ("GET", "/runs?namespace=team", ("list", "agentruns")),
    ("GET", "/runs/stream?namespace=team", ("list", "agentruns")),
    ("GET", "/approvals?namespace=team", ("list", "agentruns")),
    ("GET", "/approvals/stream?namespace=team", ("list", "agentruns")),
    ("GET", "/runs/team/fix", ("get", "agentruns")),
    ("GET", "/runs/team/fix/events", ("get", "agentruns")),
    ("POST", "/runs/team/fix/approvals/command.1", ("patch", "agentruns")),
    ("POST", "/runs/team/fix/cancel", ("patch", "agentruns")),
    ("POST", "/runs/team/fix/delete", ("delete", "agentruns")),
    ("GET", "/sandboxes?namespace=team", ("list", "sandboxes")),
    ("GET", "/sandboxes/team/box/check?command=ls", ("get", "sandboxes")),
]


@pytest.fixture
def refusing(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """Alice is who the token says; every review answers no; no other API call may happen."""
    asked: list[tuple[str, str, str]] = []

    def allowed(who: Identity, verb: str, resource: str, namespace: str, **_: Any) -> Any:
        asked.append((verb, resource, namespace))
        return False, "no RBAC rule"

    def forbidden_call(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"the API was called before the person was authorised: {args}")

    alice = Identity(username="alice", uid="u-1", groups=("team",), extra={})
    monkeypatch.setattr(access.TokenIdentities, "identity", lambda self, token: alice)
    monkeypatch.setattr(review, "allowed", allowed)
    for name in ("get", "listed", "patch", "create", "delete"):
        monkeypatch.setattr(kube, name, forbidden_call)
    return asked


@pytest.mark.parametrize(("method", "path", "first"), ACTIONS)
def test_every_action_is_authorised_for_the_person_first(
    refusing: list[tuple[str, str, str]], method: str, path: str, first: tuple[str, str]
) -> None:
    client = _client()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    form = {"csrf": guard.csrf_token(TOKEN), "choice": "approve", "digest": "sha256:" + "0" * 64}
    answer = client.request(method, path, headers=headers, data=form if method == "POST" else None)
    assert answer.status_code == 403
    assert refusing[0] == (*first, "team")
    assert f"alice may not {first[0]} {first[1]}" in answer.text


@pytest.mark.parametrize("page", ["%C2%B2", "9" * 5000, "-1", "x"])
def test_an_odd_page_number_is_the_first_page_not_a_crash(
    refusing: list[tuple[str, str, str]], page: str
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Last-Event-ID": "9" * 5000}
    for path in (f"/runs?namespace=team&page={page}", "/runs/team/fix/events"):
        answer = _client().get(path, headers=headers)
        assert answer.status_code == 403, answer.text  # refused for the person, not a 500


def test_a_decision_without_the_pages_csrf_token_or_from_another_origin_is_refused(
    refusing: list[tuple[str, str, str]],
) -> None:
    client = _client()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    path = "/runs/team/fix/approvals/command.1"
    forged = client.post(path, headers=headers, data={"csrf": "guess", "choice": "approve"})
    assert forged.status_code == 403
    assert "CSRF" in forged.text
    form = {"csrf": guard.csrf_token(TOKEN), "choice": "approve"}
    evil = {**headers, "Origin": "https://evil.example"}
    elsewhere = client.post(path, headers=evil, data=form)
    assert elsewhere.status_code == 403
    assert "not posted from here" in elsewhere.text
    unnamed = client.post(path, headers=headers, data=form)  # no digest of the text shown
    assert unnamed.status_code == 400
    assert "names no text" in unnamed.text
    # Signing out takes the page's token too: another site cannot sign the person out.
    assert client.post("/logout", headers=headers, data={"csrf": "guess"}).status_code == 403
    signed_out = client.post("/logout", headers=headers, data={"csrf": form["csrf"]})
    assert signed_out.status_code == 303
    assert refusing == []  # refused before anything was asked or done
    # No page of the console is framed by another site's.
    assert forged.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in forged.headers["content-security-policy"]


def test_without_a_token_a_page_sends_the_person_to_sign_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = _client()
    answer = client.get("/runs/team/fix")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=/runs/team/fix"
    page = client.get("/login?next=//evil.example/x")
    assert 'value="/runs"' in page.text  # never sent on to another site
