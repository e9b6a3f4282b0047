"""Servers for the volume tests: volumes are disks of their own (loop devices), so root is needed."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN, ok
from tests.serverproc import ServerProcess

U, V = "/api/v1/sandboxes", "/api/v1/sandboxvolumes"
SMALL = ["--volume-size", "64Mi"]

needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mkfs.ext4") is None,
                                reason="volumes are loop-mounted disks: root and e2fsprogs")


@pytest.fixture(scope="module")
def volume_server(tmp_path_factory):
    """The host runtime (fast claims) with small volumes and a 512 MiB team quota."""
    with ServerProcess(tmp_path_factory.mktemp("volume-data"), token=TOKEN, runtime="host",
                       extra_args=[*SMALL, "--volume-quota", "512Mi"]) as srv:
        yield srv


@pytest.fixture(scope="module")
def hardened_server(tmp_path_factory):
    """The hardened runtime (bubblewrap, a uid per sandbox): what a tenant really gets."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    with ServerProcess(tmp_path_factory.mktemp("volume-hard"), token=TOKEN, runtime="bwrap",
                       extra_args=SMALL) as srv:
        yield srv


@pytest.fixture
def vhttp(volume_server):
    with make_http(volume_server.url) as client:
        yield client


@pytest.fixture
def hhttp(hardened_server):
    with make_http(hardened_server.url) as client:
        yield client


def new_volume(http, **body) -> str:
    return ok(http.post(V, json={"access_mode": "RWO", **body}), 201)["id"]


def claim_with(http, volume_id: str, mount_point: str = "/workspace", template: str = "default") -> dict:
    return ok(http.post(U, json={"template": template, "mounts": [
        {"sandboxvolume_id": volume_id, "mount_point": mount_point}]}), 201)


def run(http, sandbox_id: str, script: str) -> dict:
    """A shell command in the sandbox, waited for: {output_raw, exit_code, ...}."""
    return ok(http.post(f"{U}/{sandbox_id}/contexts", json={
        "type": "cmd", "cmd": {"command": ["sh", "-c", script]}, "wait_until_done": True}), 201)
