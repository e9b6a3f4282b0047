"""The sandbox page's services (with their public URLs) and its small metrics charts, in a real
browser, on a server that samples the cgroups every second (the hardened runtime when root)."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import make_http, release_sandbox
from tests.helpers import TOKEN, claim_sandbox, create_session, ok, wait_for
from tests.serverproc import ServerProcess

from .conftest import open_console, screenshot

HARDENED = os.geteuid() == 0 and shutil.which("bwrap") is not None


@pytest.fixture(scope="module")
def edges_server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("ui-edges"), token=TOKEN, runtime="bwrap" if HARDENED else "host",
                       extra_args=["--metrics-interval", "1"]) as proc:
        yield proc


def test_the_sandbox_page_lists_services_with_urls_and_charts_its_metrics(page, edges_server, tmp_path):
    with make_http(edges_server.url) as api:
        sb = claim_sandbox(api)
        try:
            services = [{"id": "web", "port": 8080, "ingress": {"public": True}, "runtime": {"type": "manual"}},
                        {"id": "db", "port": 5432, "ingress": {"public": False}}]
            ok(api.put(f"/api/v1/sandboxes/{sb}/services", json={"services": services}), 200)
            create_session(api, sb, {"command": ["sh", "-c", "exec sleep 60"]})
            open_console(page, edges_server, f"#/sandboxes/{sb}")
            web = page.locator("#services tr[data-service='web'] a")
            web.wait_for()
            assert web.get_attribute("href") == f"http://{sb}--p8080.localhost:{edges_server.port}"
            assert "not_public" in page.locator("#services tr[data-service='db']").text_content()
            charts = page.locator("#metrics figure.chart")
            wait_for(lambda: charts.count() == 3, describe=lambda: page.locator("#metrics").inner_html())
            if HARDENED:  # cgroups are sampled: the memory chart draws a line once there are two samples
                page.goto(f"{edges_server.url}/ui/#/")

                def points() -> int:  # what the page asks for: the last 15 minutes (4 s steps)
                    series = ok(api.get(f"/api/v1/sandboxes/{sb}/metrics", params={"metrics": "sandbox.memory.usage"}),
                                200)["series"]
                    return sum(len(segment["points"]) for s in series for segment in s["segments"])
                wait_for(lambda: points() >= 2, timeout=30)
                open_console(page, edges_server, f"#/sandboxes/{sb}")
                memory = page.locator("#metrics figure[data-metric='sandbox.memory.usage']")
                memory.locator("polyline").wait_for(state="attached")  # a flat line has no height
                assert "MiB" in memory.locator(".last").text_content()
            screenshot(page, tmp_path, "sandbox-edges")
        finally:
            release_sandbox(api, sb)
