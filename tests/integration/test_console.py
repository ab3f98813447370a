"""The web console in a real browser (Debian's Chromium, driven by Playwright) against the local
cluster and a real operator, the console running as its own process with the identity the
chart gives it: a person signs in with a token, sees a run asking for approval appear in the
live list, approves it on the run's page and watches its output arrive on the same page; denies
another on the page of everything waiting, and it fails ApprovalDenied; a viewer sees runs but
no buttons, and is refused if it posts the form anyway; a secret in a run's output is masked; a
command's verdict is checked on the sandboxes page. Screenshots of the main pages are kept in
test-artifacts/console/ (not committed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from paddock.api.approvals import digest_of, visible
from support import identity
from support.browser import chromium, signed_in
from support.kube import ROOT, Cluster
from support.runs import command_run, wait_for_run
from support.sandboxes import ready_sandbox, secret
from support.waiting import wait_for

pytestmark = pytest.mark.integration

ARTIFACTS = ROOT / "test-artifacts" / "console"
ASK_TOUCH = {"commands": {"default": "allow", "ask": ["touch *"]}}
# A command of 1,700 characters whose file name a right-to-left override disguises (it reads
# "long-...hs.png" on a page that draws the override).
LONG = "touch long-" + "a" * 180 + "\u202egnp.sh # " + "b" * 1500
SECRET_VALUE = "s3cr3t-console-0123456789"
READ = ["get", "list", "watch"]


def _rules(*, decide: bool) -> list[dict[str, Any]]:
    runs = [*READ, "patch", "delete"] if decide else READ
    return [
        {"apiGroups": ["paddock.dev"], "resources": ["agentruns"], "verbs": runs},
        {"apiGroups": ["paddock.dev"], "resources": ["sandboxes", "sandboxpools"], "verbs": READ},
        {"apiGroups": ["paddock.dev"], "resources": ["sandboxpolicies", "workspaces"],
         "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
    ]  # fmt: skip


@contextmanager
def _console(cluster: Cluster, namespace: str, helm: str, tmp_path: Path) -> Iterator[str]:
    """``paddock console`` as its own process with the chart's console identity; its URL."""
    kubeconfig = identity.chart_identity(cluster, helm, namespace, "console", tmp_path)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    argv = [
        sys.executable,
        "-m",
        "paddock.cli",
        "console",
        "-n",
        namespace,
        "--http",
        "127.0.0.1:0",
    ]
    log_path = tmp_path / "console.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        found = wait_for(
            lambda: re.search(r"paddock console: serving (\S+)", log_path.read_text()),
            30, what="the console's URL",
        )  # fmt: skip
        yield found.group(1).rstrip("/")
    finally:
        process.terminate()
        process.wait(timeout=30)
        for kind in ("clusterrolebinding", "clusterrole"):
            cluster.kubectl("delete", kind, f"{namespace}-console", "--ignore-not-found")
        assert "Traceback" not in log_path.read_text(), log_path.read_text()


@pytest.fixture
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_person_approves_and_denies_in_the_browser_and_a_viewer_only_watches(
    cluster: Cluster, namespace: str, operator: Any, helm: str, tmp_path: Path, browser: Browser
) -> None:
    cluster.apply(secret("creds", token=SECRET_VALUE), namespace)
    ready_sandbox(cluster, namespace, "box", policy=ASK_TOUCH)
    approver = identity.role_token(cluster, namespace, "approver", _rules(decide=True))
    viewer = identity.role_token(cluster, namespace, "viewer", _rules(decide=False))
    with _console(cluster, namespace, helm, tmp_path) as url:
        page = signed_in(browser, url, approver)

        # A run asking for approval appears in the live list, waiting for a decision.
        cluster.apply(command_run("asks", "box", "touch made && echo made-it"), namespace)
        row = page.locator("tr[data-run=asks]")
        expect(row.locator(".waiting")).to_have_text("1 to decide")
        _shot(page, "runs")

        # Approve on the run's page: the output arrives on the same page, live.
        row.locator("a").click()
        expect(page.locator("[data-request] .state")).to_have_text("Pending")
        page.evaluate("window.paddockSamePage = true")
        page.click("button[value=approve]")
        expect(page.locator("#timeline [data-type=output]")).to_contain_text("made-it")
        expect(page.locator("#phase")).to_have_text("Succeeded")
        expect(page.locator("[data-request] .by")).to_have_text(
            f"by system:serviceaccount:{namespace}:approver"
        )
        assert page.evaluate("window.paddockSamePage") is True  # no reload: pushed to the page
        _shot(page, "run")
        assert wait_for_run(cluster, namespace, "asks")["phase"] == "Succeeded"

        # Deny another from the approvals page: it leaves the list, live, and fails.
        cluster.apply(command_run("denied", "box", "touch nope"), namespace)
        page.goto(f"{url}/approvals")
        waiting = page.locator("[data-run=denied]")
        expect(waiting.locator("pre.asked")).to_have_text("touch nope")
        _shot(page, "approvals")
        waiting.locator("button[value=deny]").click()
        expect(waiting).to_have_count(0)
        page.goto(f"{url}/runs/{namespace}/denied")
        expect(page.locator("#phase")).to_have_text("Failed")
        expect(page.locator("#reason")).to_have_text("ApprovalDenied")

        # A long command hiding text with a bidirectional override is shown whole, the
        # override as its code point, wrapped beside the buttons; the approval allows that
        # text, and a decision naming other text (an abridged page's) is refused.
        cluster.apply(command_run("long", "box", LONG), namespace)
        page.goto(f"{url}/runs/{namespace}/long")
        asked = page.locator("[data-request] pre.asked")
        expect(asked).to_have_text(visible(LONG))
        width = page.viewport_size["width"] if page.viewport_size else 1280
        for shown in (asked, page.locator("button[value=approve]")):
            # (None while the live page swaps the request's part in again: laid out once more)
            box = wait_for(shown.bounding_box, 30, what="the request laid out on the page")
            assert box["x"] + box["width"] <= width, box
        (long_id,) = [r.get_attribute("data-request") for r in page.locator("[data-request]").all()]
        csrf = page.locator("input[name=csrf]").first.get_attribute("value")
        abridged = {"csrf": str(csrf), "choice": "approve", "digest": digest_of(LONG[:1000])}
        other = page.request.post(
            f"{url}/runs/{namespace}/long/approvals/{long_id}",
            form=abridged,
            headers={"Origin": url},
            max_redirects=0,
        )
        assert other.status == 403, other.text()
        assert "not the text that was shown" in other.text()
        _shot(page, "long")
        page.click("button[value=approve]")
        expect(page.locator("#phase")).to_have_text("Succeeded")
        (approval,) = wait_for_run(cluster, namespace, "long")["approvals"]
        assert approval["state"] == "Approved"

        # A viewer sees a waiting run, gets no buttons, and is refused if it posts anyway.
        cluster.apply(command_run("waits", "box", "touch later"), namespace)
        wait_for_run(cluster, namespace, "waits", ("AwaitingApproval",))
        watcher = signed_in(browser, url, viewer)
        watcher.goto(f"{url}/runs/{namespace}/waits")
        expect(watcher.locator("[data-request] .state")).to_have_text("Pending")
        expect(watcher.locator("button[value=approve]")).to_have_count(0)
        csrf = watcher.locator("input[name=csrf]").first.get_attribute("value")
        (request_id,) = [
            r.get_attribute("data-request") for r in watcher.locator("[data-request]").all()
        ]
        posted = watcher.request.post(
            f"{url}/runs/{namespace}/waits/approvals/{request_id}",
            form={"csrf": str(csrf), "choice": "approve", "digest": digest_of("touch later")},
            headers={"Origin": url},
            max_redirects=0,
        )
        assert posted.status == 403, posted.text()
        assert "may not patch agentruns" in posted.text()
        expect(watcher.locator(".actions button")).to_have_count(0)  # no cancel, no delete
        assert wait_for_run(cluster, namespace, "waits", ("AwaitingApproval",))

        # The runs list filters by AwaitingApproval; the run is cancelled, then deleted, from
        # its page.
        page.goto(f"{url}/runs?namespace={namespace}&phase=AwaitingApproval")
        expect(page.locator("tr[data-run]")).to_have_count(1)
        page.locator("tr[data-run=waits] a").click()
        page.click("button.cancel")
        expect(page.locator("#phase")).to_have_text("Cancelled")
        assert wait_for_run(cluster, namespace, "waits")["phase"] == "Cancelled"
        page.click("button.delete")
        expect(page).to_have_url(re.compile(r"/runs\?namespace="))
        wait_for(lambda: not cluster.kubectl("get", "agentrun", "waits", "-n", namespace,
                                             "--ignore-not-found").stdout, 30,
                 what="run waits deleted")  # fmt: skip

        # A secret in a run's output is masked on the page.
        token_ref = {"name": "TOKEN", "secretKeyRef": {"name": "creds", "key": "token"}}
        leaky = command_run("leaky", "box", 'echo "the token is $TOKEN"', secrets=[token_ref])
        cluster.apply(leaky, namespace)
        page.goto(f"{url}/runs/{namespace}/leaky")
        expect(page.locator("#phase")).to_have_text("Succeeded")
        expect(page.locator("#timeline [data-type=output]")).to_contain_text("[redacted]")
        assert SECRET_VALUE not in page.content()

        # The sandboxes page, and what the sandbox's policy says to a command typed in.
        page.goto(f"{url}/sandboxes")
        expect(page.locator("tr[data-sandbox=box] .phase")).to_have_text("Ready")
        page.locator("tr[data-sandbox=box] a").click()
        page.fill("input[name=command]", "touch x && ls")
        page.click("button:has-text('Check')")
        expect(page.locator(".verdict")).to_contain_text("ask")
        _shot(page, "sandboxes-check")
        page.goto(f"{url}/sandboxes")
        _shot(page, "sandboxes")


def test_a_live_page_ends_once_its_readers_access_is_gone(
    cluster: Cluster, namespace: str, operator: Any, helm: str, tmp_path: Path
) -> None:
    """A person whose RoleBinding is deleted stops getting the runs list; one whose
    ServiceAccount is deleted stops getting a run's events: each stream says so and ends
    within the 30 s between re-checks, though nothing else happens meanwhile."""
    ready_sandbox(cluster, namespace, "box")
    cluster.apply(command_run("quiet", "box", "sleep 600"), namespace)
    wait_for_run(cluster, namespace, "quiet", ("Running",))
    lister = identity.role_token(cluster, namespace, "lister", _rules(decide=False))
    follower = identity.role_token(cluster, namespace, "follower", _rules(decide=False))
    with _console(cluster, namespace, helm, tmp_path) as url:
        streams = {
            "rolebinding/lister": _Stream(f"{url}/runs/stream?namespace={namespace}", lister),
            "serviceaccount/follower": _Stream(f"{url}/runs/{namespace}/quiet/events", follower),
        }
        for stream in streams.values():
            wait_for(lambda s=stream: s.lines, 30, what="the stream's first event")
        for gone in streams:
            cluster.kubectl("delete", gone, "-n", namespace)
        for gone, stream in streams.items():
            wait_for(lambda s=stream: not s.reader.is_alive(), 75, what=f"{gone}'s stream ended")
            assert "event: broken" in stream.lines, (gone, stream.lines[-5:])
    assert wait_for_run(cluster, namespace, "quiet", ("Running",))  # the run itself goes on


class _Stream:
    """A live part read as a browser would, its lines gathered in a thread until it ends."""

    def __init__(self, url: str, token: str) -> None:
        self.lines: list[str] = []
        bearer = {"Authorization": f"Bearer {token}"}
        request = urllib.request.Request(url, headers=bearer)  # noqa: S310 (the console's URL)
        self.reader = threading.Thread(target=self._read, args=(request,), daemon=True)
        self.reader.start()

    def _read(self, request: urllib.request.Request) -> None:
        with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310
            for line in answer:
                self.lines.append(line.decode().rstrip("\r\n"))
