"""Sandbox volumes on two nodes: the disks are in the shared checkpoint dir, so a repository written
at /workspace by a sandbox on node A is there for the next sandbox, claimed on node B; an RWO
volume bound on one node is refused on the other, and a disk is mounted by one node at a time (an
ext4 filesystem mounted twice is corrupted): another node's file calls, snapshots and restores
wait for it, then are refused while it stays mounted."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.helpers import err, ok

from .conftest import node, running

U, V = "/api/v1/sandboxes", "/api/v1/sandboxvolumes"
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mkfs.ext4") is None or shutil.which("bwrap") is None,
                                reason="volumes are loop-mounted disks (root, e2fsprogs); bubblewrap")


def run(http, sandbox_id: str, script: str) -> str:
    data = ok(http.post(f"{U}/{sandbox_id}/contexts", json={
        "type": "cmd", "cmd": {"command": ["sh", "-c", script]}, "wait_until_done": True}), 201)
    assert data["exit_code"] == 0, data
    return data.get("stdout", "")


def claim(http, volume: str) -> str:
    return ok(http.post(U, json={"template": "coding-agent", "mounts": [
        {"sandboxvolume_id": volume, "mount_point": "/workspace"}]}), 201)["sandbox_id"]


def test_a_volume_written_on_node_a_is_bound_on_node_b_and_mounted_by_one_node_at_a_time(tmp_path, pg_url,
                                                                                           checkpoints):
    a = node("node-a", tmp_path, pg_url, checkpoints, runtime="bwrap")
    b = node("node-b", tmp_path, pg_url, checkpoints, runtime="bwrap")
    a.server.extra_args += ["--volume-size", "64Mi"]
    b.server.extra_args += ["--volume-size", "64Mi"]
    with running(a, b), a.client() as on_a, b.client() as on_b:
        volume = ok(on_a.post(V, json={"access_mode": "RWO"}), 201)["id"]
        assert (checkpoints / "volumes" / volume / "volume.img").exists()  # in the shared dir
        assert [v["id"] for v in ok(on_b.get(V), 200)] == [volume]
        first = claim(on_a, volume)
        run(on_a, first, "cd /workspace && git init -q repo && echo from-a > repo/notes.txt")
        # Bound (RWO) and mounted on A: B refuses a second binding, and its file calls, snapshots
        # and restores, which would touch a disk A is writing.
        assert "already mounted by sandbox" in err(on_b.post(U, json={"template": "coding-agent", "mounts": [
            {"sandboxvolume_id": volume, "mount_point": "/workspace"}]}), 409, "conflict")["message"]
        held = err(on_b.get(f"{V}/{volume}/files", params={"path": "repo/notes.txt"}), 409, "conflict")
        assert "mounted on node node-a" in held["message"], held
        err(on_b.post(f"{V}/{volume}/snapshots", json={"name": "s"}), 409, "conflict")
        assert ok(on_a.post(f"{V}/{volume}/snapshots", json={"name": "on-a"}), 201)["size_bytes"] > 0
        ok(on_a.delete(f"{U}/{first}"), 202)

        second = claim(on_b, volume)  # waits for A to let the disk go, then mounts it on B
        try:
            assert run(on_b, second, "cat /workspace/repo/notes.txt && test -d /workspace/repo/.git && "
                                     "echo from-b >> /workspace/repo/notes.txt && cat /workspace/repo/notes.txt"
                       ) == "from-a\nfrom-a\nfrom-b\n"
            assert not (a.server.data_dir / "volume-mounts" / volume).exists()  # A no longer has it
            err(on_a.get(f"{V}/{volume}/files/list", params={"path": "/"}), 409, "conflict")
        finally:
            ok(on_b.delete(f"{U}/{second}"), 202)
        # Nothing binds it now: A reads it again once B let it go, and deletes it.
        assert on_a.get(f"{V}/{volume}/files", params={"path": "repo/notes.txt"}).content == b"from-a\nfrom-b\n"
        assert ok(on_a.delete(f"{V}/{volume}"), 200) == {"deleted": True}
        err(on_b.get(f"{V}/{volume}"), 404, "not_found")
        assert sorted(p.name for p in (checkpoints / "volumes").iterdir()) == [".lock"]
