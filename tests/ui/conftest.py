"""A real headless Chromium (Debian's ``chromium``) driven by Playwright, on a real server.

Playwright's own browser download is never used: ``executable_path`` points at the
system Chromium, which ``.ci/run`` installs. Each test gets a fresh user-data-dir and
page; screenshots go under the test's temp dir. Pages fail the test on any script error
or Content-Security-Policy violation.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import make_http, release_sandbox
from tests.helpers import TOKEN, claim_sandbox
from tests.serverproc import ServerProcess

CHROMIUM = "/usr/bin/chromium"  # Debian's package (its launcher script)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1100, "height": 700}
CSP_REPORTER = """document.addEventListener('securitypolicyviolation', (e) =>
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || 'inline'}`));"""
CSP_MARKERS = re.compile(r"CSP violation|Content Security Policy")


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    """A server of this module's own: the restart test kills it."""
    with ServerProcess(tmp_path_factory.mktemp("ui-server"), token=TOKEN, runtime="host") as proc:
        yield proc


@pytest.fixture
def api(ui_server):
    with make_http(ui_server.url) as client:
        yield client


@pytest.fixture
def sandbox(api):
    sb = claim_sandbox(api)
    yield sb
    release_sandbox(api, sb)


@pytest.fixture(scope="module")
def playwright_driver():
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (.ci/run installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


class PageProblems(list):
    def check(self):
        assert not self, "the page reported problems:\n" + "\n".join(self)


@pytest.fixture
def browser(playwright_driver, tmp_path):
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
        args=CHROMIUM_ARGS, viewport=VIEWPORT, timeout=30_000)
    context.set_default_timeout(15_000)
    yield context
    context.close()


@pytest.fixture
def page(browser):
    page = browser.pages[0] if browser.pages else browser.new_page()
    problems = PageProblems()
    page.on("pageerror", lambda exc: problems.append(f"script error: {exc}"))
    page.add_init_script(CSP_REPORTER)
    page.on("console", lambda msg: problems.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error" and CSP_MARKERS.search(msg.text) else None)
    page.problems = problems
    yield page
    problems.check()


def screenshot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / "screenshots" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def open_console(page, server, route: str = "#/", token: str = TOKEN):
    """Log in through the fragment (never sent to the server), then follow a direct link."""
    page.goto(f"{server.url}/ui/#token={token}")
    page.wait_for_selector("#sandboxes")
    if route != "#/":
        page.goto(f"{server.url}/ui/{route}")
