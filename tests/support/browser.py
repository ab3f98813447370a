"""Debian's Chromium, driven by Playwright: the browser the console's tests sign in with."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
WAIT_MS = 60_000


@contextmanager
def chromium() -> Iterator[Browser]:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} is missing: `make browser` installs it"
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


def signed_in(browser: Browser, url: str, token: str) -> Page:
    """A new page of the console at ``url``, signed in with ``token``, on its runs list."""
    page = browser.new_context().new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{url}/runs")
    expect(page).to_have_url(re.compile(r"/login"))
    page.fill("input[name=token]", token)
    page.click("button:has-text('Sign in')")
    expect(page).to_have_url(f"{url}/runs")
    return page
