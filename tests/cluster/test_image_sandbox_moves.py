"""An image sandbox paused on one node resumes on the other with its writable layer: the image
store and the checkpoints are in the directory every node shares."""
from __future__ import annotations

import shutil

import pytest

from session_supervisor.infra.images import ImageStore, store_root
from tests.helpers import ok
from tests.images.fixtures import debian_image

from .conftest import node, running


def run(http, sandbox_id: str, script: str) -> str:
    data = ok(http.post(f"/api/v1/sandboxes/{sandbox_id}/contexts", json={
        "type": "cmd", "cmd": {"command": ["sh", "-c", script]}, "wait_until_done": True}), 201)
    assert data["exit_code"] == 0, data
    return data.get("stdout", "")


def test_a_sandbox_paused_on_a_resumes_on_b_with_its_writable_layer_and_its_deletions(tmp_path, pg_url,
                                                                                       checkpoints):
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    image = ImageStore(store_root(tmp_path, checkpoints)).import_archive(debian_image(), "trixie")
    a, b = node("node-a", tmp_path, pg_url, checkpoints, runtime="bwrap"), \
        node("node-b", tmp_path, pg_url, checkpoints, runtime="bwrap")
    with running(a, b), a.client() as on_a, b.client() as on_b:
        ok(on_a.post("/api/v1/templates", json={"template_id": "shared", "spec": {"mainContainer": {
            "image": image.reference, "resources": {"memory": "512Mi", "ephemeralStorage": "512Mi"}}}}), 201)
        assert [t["template_id"] for t in ok(on_b.get("/api/v1/templates"), 200)["templates"]][-1] == "shared"
        sb = ok(on_a.post("/api/v1/sandboxes", json={"template": "shared"}), 201)["sandbox_id"]
        run(on_a, sb, "echo layer > /etc/from-node-a; rm /etc/hostname; echo ws > /workspace/w")
        ok(on_a.post(f"/api/v1/sandboxes/{sb}/pause"), 200)
        ok(on_b.post(f"/api/v1/sandboxes/{sb}/resume"), 200)
        out = run(on_b, sb, "cat /etc/from-node-a /workspace/w; test -e /etc/hostname || echo deleted; "
                            "grep VERSION_CODENAME /etc/os-release")
        assert out == "layer\nws\ndeleted\nVERSION_CODENAME=trixie\n"
        usage = ok(on_b.get(f"/api/v1/sandboxes/{sb}/status"), 200)["resource_usage"]
        assert usage["disk_limit_bytes"] == 512 * 2**20  # its disk came along at its size
        assert b.server.proc.pid  # resumed on node b: run() went through b, which owns it now
        ok(on_b.delete(f"/api/v1/sandboxes/{sb}"), 202)
