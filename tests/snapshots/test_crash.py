"""kill -9 of the server in the middle of a rootfs snapshot and of a fork of a running sandbox.

Without the disk pool a copy of a disk is a sparse copy that reads every block it holds, so with
a few hundred MiB written it takes long enough to kill the server while it copies, with the
sandbox's filesystem frozen. After the restart each call either completed or left nothing: no
temporary image, no half-made snapshot or sandbox, nothing counted against the team's quota, and
the source's disk is thawed and writable again."""
from __future__ import annotations

import os
import threading
from pathlib import Path

import httpx
import pytest

from session_supervisor.infra.sandbox_images import WARM_PREFIX
from tests.conftest import make_http
from tests.helpers import TOKEN, err, listed_sandbox_ids, ok, wait_for
from tests.serverproc import ServerProcess
from tests.snapshots.conftest import needs_disks
from tests.snapshots.helpers import SB, claim, read, run, write

pytestmark = needs_disks
FILL_MIB = 384


def temporaries(data: Path) -> list[str]:
    """Every temporary image or snapshot directory under the data dir (none once swept)."""
    found = []
    for root, dirs, files in os.walk(data):
        if "disk" in dirs and Path(root).parent.name == "sandboxes":
            dirs.remove("disk")  # a sandbox's mounted filesystem: the tenant's own files
        found += [os.path.join(root, n) for n in dirs + files if n.startswith(".tmp-")]
    return found


def copying(data: Path) -> bool:
    """A copy of a disk image has begun: its file exists under a temporary name."""
    for name in temporaries(data):
        if name.endswith(".img") or (os.path.isdir(name) and os.path.exists(os.path.join(name, "disk.img"))):
            return True
    return False


def in_background(http_url: str, method: str, path: str) -> dict:
    """Send the call from a thread; its answer (or the error the kill gave it) lands in the dict."""
    box: dict = {}

    def call():
        try:
            with httpx.Client(base_url=http_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
                box["response"] = c.request(method, path, json={})
        except httpx.HTTPError as exc:
            box["error"] = exc
    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    box["thread"] = thread
    return box


@pytest.mark.parametrize("call", ["snapshot", "fork"])
def test_kill_9_in_the_middle_of_a_copy_leaves_it_done_or_gone(tmp_path, call):
    data = tmp_path / "data"
    server = ServerProcess(data, token=TOKEN, runtime="bwrap",
                           extra_args=["--disk-quota", "on", "--disk-pool-size", "off",
                                       "--snapshot-quota", f"{FILL_MIB * 3 // 2}Mi"])
    server.start()
    try:
        with make_http(server.url) as http:
            sb = claim(http)
            write(http, sb, "/workspace/kept.txt", b"before the crash")
            run(http, sb, f"head -c {FILL_MIB}M /dev/urandom > /workspace/fill")
        path = f"{SB}/{sb}/snapshots" if call == "snapshot" else f"{SB}/{sb}/fork"
        box = in_background(server.url, "POST", path)
        wait_for(lambda: copying(data), timeout=30, interval=0.002, describe=lambda: temporaries(data))
        server.kill()  # while the disk image is being copied, its filesystem frozen
        box["thread"].join(30)
        server.start()
        with make_http(server.url) as http:
            assert temporaries(data) == [], "the start-up sweep left temporary copies"
            listed = ok(http.get(f"{SB}/{sb}/snapshots"), 200)
            sandboxes = [s["id"] for s in ok(http.get(SB), 200)["sandboxes"]]
            completed = "response" in box and box["response"].status_code == 201
            if not completed:  # killed while it copied: the restart found the disk frozen and thawed it
                assert "thawed" in server.log_path.read_text(), server.log_tail()
            if call == "snapshot":
                assert listed["count"] == (1 if completed else 0), listed
                kept = os.listdir(data / "snapshots")
                assert len(kept) == listed["count"], kept  # nothing on disk that the list does not show
            else:
                assert listed["count"] == 0
                assert len(sandboxes) == (2 if completed else 1), sandboxes
                assert sorted(os.listdir(data / "sandboxes")) == sorted(sandboxes)
            # The source is thawed and writable again, with what it held.
            assert read(http, sb, "/workspace/kept.txt") == b"before the crash"
            write(http, sb, "/workspace/after.txt", b"written after the restart")
            assert read(http, sb, "/workspace/after.txt") == b"written after the restart"
            # Nothing half-made counts against the team's quota, which holds one snapshot of this disk.
            for snap in listed["snapshots"]:
                ok(http.delete(f"/api/v1/sandbox-rootfs-snapshots/{snap['id']}"), 200)
            ok(http.post(f"{SB}/{sb}/snapshots"), 201)
            err(http.post(f"{SB}/{sb}/snapshots"), 507, "insufficient_storage")  # and a second does not
    finally:
        server.stop()


@pytest.mark.parametrize("call", ["snapshot", "fork"])
def test_kill_9_at_random_moments_of_reflinked_copies_leaves_each_done_or_gone(tmp_path, call):
    """In the disk pool a copy takes milliseconds: the calls run back to back and the server is
    killed at random moments among them; after each restart, what is on disk is what is listed."""
    import random
    import time
    rng = random.Random(27)
    data = tmp_path / "data"
    server = ServerProcess(data, token=TOKEN, runtime="bwrap", extra_args=["--disk-quota", "on"])
    server.start()
    try:
        with make_http(server.url) as http:
            sb = claim(http)
            write(http, sb, "/workspace/kept.txt", b"kept")
        for _ in range(4):
            stop = threading.Event()

            def copy_until_stopped():
                with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as c:
                    while not stop.is_set():
                        try:
                            c.post(f"{SB}/{sb}/snapshots" if call == "snapshot" else f"{SB}/{sb}/fork", json={})
                        except httpx.HTTPError:
                            return
            worker = threading.Thread(target=copy_until_stopped)
            worker.start()
            time.sleep(rng.uniform(0.2, 0.8))
            server.kill()
            stop.set()
            worker.join(15)
            server.start()
            with make_http(server.url) as http:
                assert temporaries(data) == [], "the start-up sweep left temporary copies"
                listed = {s["id"] for s in ok(http.get(f"{SB}/{sb}/snapshots"), 200)["snapshots"]}
                assert set(os.listdir(data / "disk-pool" / "snapshots")) == listed
                sandboxes = listed_sandbox_ids(http)  # back-to-back forks make more than a page
                # The new server's warm pool makes disks for sandboxes not claimed yet (.warm-…).
                disks = {n.removesuffix(".img") for n in os.listdir(data / "disk-pool" / "disks")
                         if not n.startswith(WARM_PREFIX)}
                assert disks == sandboxes
                assert set(os.listdir(data / "sandboxes")) == sandboxes
                assert read(http, sb, "/workspace/kept.txt") == b"kept"
    finally:
        server.stop()
