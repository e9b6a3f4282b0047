"""``ephemeral_storage`` bounds what a sandbox can write: past it, ENOSPC inside, and nothing else.

The data dir is on a small tmpfs the test mounts, so "the data dir's filesystem keeps its reserve"
is measured on a real filesystem that a runaway tenant could otherwise fill.
"""
from __future__ import annotations

import os
import subprocess
import time

import httpx
import pytest

from session_supervisor.infra.images import ImageStore, store_root
from tests.conftest import make_http
from tests.helpers import TOKEN
from tests.serverproc import ServerProcess

from .fixtures import debian_image

TMPFS_BYTES = 1536 * 2**20


@pytest.fixture
def small_server(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs and loop disks needs root")
    data = tmp_path / "data"
    data.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "sessiond-test", str(data)], check=True)
    try:
        image = ImageStore(store_root(data)).import_archive(debian_image(), "trixie")
        proc = ServerProcess(data, token=TOKEN, runtime="bwrap", extra_args=["--disk-quota", "on"])
        proc.start()
        proc.image_reference = image.reference
        try:
            yield proc
        finally:
            proc.stop()
    finally:
        subprocess.run(["umount", "--lazy", str(data)], check=False)


def free_bytes(path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def run(http, sandbox_id: str, script: str, timeout: float = 120) -> dict:
    reply = http.post(f"/api/v1/sandboxes/{sandbox_id}/contexts", timeout=timeout, json={
        "type": "cmd", "cmd": {"command": ["sh", "-c", script]}, "wait_until_done": True})
    assert reply.status_code == 201, reply.text
    return reply.json()["data"]


def echo_round_trip(http, sandbox_id: str, text: str) -> None:
    sid = http.post(f"/api/v1/sandboxes/{sandbox_id}/sessions", json={"command": ["sh", "-c", f"echo {text}"]}
                    ).json()["data"]["id"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        events = http.get(f"/api/v1/sandboxes/{sandbox_id}/sessions/{sid}/events?after=0").json()["data"]["events"]
        if any(e["type"] == "attempt.exited" for e in events):
            assert any(e["type"] == "output" for e in events)
            return
        time.sleep(0.1)
    raise AssertionError("the echo session did not finish")


@pytest.mark.parametrize("template", ["default", "image"])
def test_a_sandbox_writing_past_its_ephemeral_storage_gets_enospc_and_nothing_else_happens(small_server, template):
    with make_http(small_server.url) as http:
        name = "default"
        if template == "image":
            name = "small-disk"
            assert http.post("/api/v1/templates", json={"template_id": name, "spec": {"mainContainer": {
                "image": small_server.image_reference,
                "resources": {"memory": "512Mi", "ephemeralStorage": "300Mi"}}}}).status_code == 201
            config = {}
        else:
            config = {"config": {"resources": {"ephemeral_storage": "300Mi"}}}
        neighbour = http.post("/api/v1/sandboxes", json={"template": "default"}).json()["data"]["sandbox_id"]
        tenant = http.post("/api/v1/sandboxes", json={"template": name, **config}).json()["data"]["sandbox_id"]
        reserve = 64 * 2**20
        # 1 GiB into the workspace, /tmp and (image) the root's writable layer: each stops at the disk.
        target = "/var/fill" if template == "image" else "/tmp/fill"
        out = run(http, tenant, f"dd if=/dev/zero of=/workspace/fill bs=1M count=1024 2>&1; "
                                f"dd if=/dev/zero of={target} bs=1M count=1024 2>&1; df -k /workspace | tail -1")
        text = out.get("stdout", "") + out.get("stderr", "")
        assert text.count("No space left on device") == 2, text
        assert free_bytes(small_server.data_dir) > reserve  # the data dir's filesystem kept its reserve
        status = http.get(f"/api/v1/sandboxes/{tenant}/status").json()["data"]["resource_usage"]
        assert status["disk_limit_bytes"] == 300 * 2**20 and status["disk_free_bytes"] < 2**20
        assert status["disk_used_bytes"] + status["disk_free_bytes"] == status["disk_limit_bytes"]
        # The full tenant costs nobody else anything: an echo, a new claim and a pause all work.
        echo_round_trip(http, neighbour, "still-here")
        echo_round_trip(http, tenant, "tenant-store-fine")  # its own store is not on its disk
        fresh = http.post("/api/v1/sandboxes", json={"template": "default"})
        assert fresh.status_code == 201, fresh.text
        assert http.post(f"/api/v1/sandboxes/{neighbour}/pause").status_code == 200
        assert http.post(f"/api/v1/sandboxes/{tenant}/pause").status_code == 200
        assert http.post(f"/api/v1/sandboxes/{tenant}/resume").status_code == 200
        assert run(http, tenant, "rm /workspace/fill && echo freed")["stdout"] == "freed\n"
        for sandbox_id in (neighbour, tenant, fresh.json()["data"]["sandbox_id"]):
            assert http.delete(f"/api/v1/sandboxes/{sandbox_id}").status_code == 202
        if template == "image":
            http.delete(f"/api/v1/templates/{name}")


def test_every_template_gets_the_default_8gi_disk_and_status_reports_it(small_server):
    with make_http(small_server.url) as http:
        sandbox_id = http.post("/api/v1/sandboxes", json={"template": "default"}).json()["data"]["sandbox_id"]
        usage = http.get(f"/api/v1/sandboxes/{sandbox_id}/status").json()["data"]["resource_usage"]
        assert usage["disk_limit_bytes"] == 8 * 2**30 and "disk_quota" not in usage
        http.delete(f"/api/v1/sandboxes/{sandbox_id}")


def test_without_the_quota_mechanism_the_server_says_so_at_start_and_in_status(tmp_path):
    proc = ServerProcess(tmp_path, token=TOKEN, runtime="host", extra_args=["--disk-quota", "off"])
    proc.start()
    try:
        with make_http(proc.url) as http:
            sandbox_id = http.post("/api/v1/sandboxes", json={"template": "default"}).json()["data"]["sandbox_id"]
            usage = http.get(f"/api/v1/sandboxes/{sandbox_id}/status").json()["data"]["resource_usage"]
            assert "disk quotas are off" in usage["disk_quota"] and "disk_limit_bytes" not in usage
    finally:
        proc.stop()
