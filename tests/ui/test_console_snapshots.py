"""The sandbox page's snapshots, in a real browser: the snapshot button takes one (listed with its
name), the fork button makes a child and opens its page, and delete removes a snapshot."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import make_http, release_sandbox
from tests.helpers import TOKEN, claim_sandbox, ok, wait_for
from tests.serverproc import ServerProcess

from .conftest import open_console, screenshot

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("bwrap") is None or shutil.which("mkfs.xfs") is None,
                                reason="rootfs snapshots need a disk per sandbox: root, bubblewrap, xfsprogs")


@pytest.fixture(scope="module")
def disk_server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("ui-snapshots"), token=TOKEN, runtime="bwrap",
                       extra_args=["--disk-quota", "on"]) as proc:
        yield proc


def test_the_sandbox_page_takes_lists_and_deletes_snapshots_and_forks(page, disk_server, tmp_path):
    made = []
    with make_http(disk_server.url) as api:
        sb = claim_sandbox(api)
        made.append(sb)
        try:
            open_console(page, disk_server, f"#/sandboxes/{sb}")
            page.fill("#snapshot-name", "from-the-console")
            page.click("button.act-snapshot")
            row = page.locator("#snapshots tr[data-snapshot]")
            row.wait_for()
            assert "from-the-console" in row.text_content()
            snapshot_id = row.get_attribute("data-snapshot")
            assert ok(api.get(f"/api/v1/sandboxes/{sb}/snapshots"), 200)["snapshots"][0]["id"] == snapshot_id
            screenshot(page, tmp_path, "sandbox-snapshots")
            page.on("dialog", lambda dialog: dialog.accept())
            row.locator("button.act-delete").click()
            wait_for(lambda: ok(api.get(f"/api/v1/sandboxes/{sb}/snapshots"), 200)["count"] == 0)
            page.click("button.act-fork")

            def opened():  # page.url does not follow a change of location.hash
                shown = page.evaluate("location.hash")
                return shown.startswith("#/sandboxes/") and sb not in shown and shown
            child = wait_for(opened, describe=lambda: page.locator("#notice").text_content()).rsplit("/", 1)[1]
            made.append(child)
            got = ok(api.get(f"/api/v1/sandboxes/{child}"), 200)
            assert got["id"] == child and got["status"] == "paused"
        finally:
            for each in made:
                release_sandbox(api, each)
