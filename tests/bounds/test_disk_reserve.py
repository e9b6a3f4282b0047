"""One sandbox fills the (small, real) filesystem that holds the data dir, with no per-sandbox
quota (--disk-quota off): the server's own reserve keeps another sandbox's sessions, a pause and /healthz working,
and what would be written for a tenant (uploads, claims) is refused with 507 instead. Then, the
disk full for root too: every write path answers 507 (never 500), and all of it works again
once space is free.

The filesystem is an ext4 image the test makes and loop-mounts: ext4 keeps its reserved blocks
for root (the server), so the sandbox's processes, which run as unprivileged uids, stop there
(infra/disk_reserve.py)."""
from __future__ import annotations

import os
import shutil
import subprocess

import httpx
import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, create_session, ok, run_to_exit, wait_exited, wait_for
from tests.serverproc import ServerProcess

from .conftest import mounted
from .memory import MIB

IMAGE_MIB = 320
ROOT_RESERVED_PCT = 25      # what ext4 keeps for root: about 75 MiB of this image
SERVER_RESERVE = "48Mi"
# dd until ENOSPC, then small files for the last blocks ext4 had kept back for delayed allocation.
FILL = ("dd if=/dev/zero of=/workspace/fill bs=1M; dd if=/dev/zero of=/tmp/fill bs=1M; sync; "
        "i=0; while echo x > /workspace/small-$i 2>/dev/null && [ $i -lt 5000 ]; do i=$((i+1)); done; "
        "sync; echo small files $i; df -k /workspace")


@pytest.fixture
def small_ext4(tmp_path):
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None or shutil.which("bwrap") is None:
        pytest.skip("needs root, mkfs.ext4 (e2fsprogs) and bubblewrap")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(IMAGE_MIB * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", str(ROOT_RESERVED_PCT), str(image)], check=True, timeout=60)
    with mounted(["-o", "loop"], str(image), tmp_path / "disk") as where:
        yield where


class LoggedOutside(ServerProcess):
    """Its log is not on the disk the test fills."""

    def __init__(self, data_dir, log_dir, **kwargs) -> None:
        super().__init__(data_dir, **kwargs)
        self._log_dir = log_dir

    @property
    def log_path(self):
        return self._log_dir / "server.log"


def space(path) -> str:
    stats = os.statvfs(path)
    return (f"{stats.f_bavail * stats.f_frsize / MIB:.1f} MiB free for unprivileged writers, "
            f"{stats.f_bfree * stats.f_frsize / MIB:.1f} MiB for root")


def echo_works(http, sb: str, word: str) -> bool:
    exited, out = run_to_exit(http, sb, ["echo", word], timeout=30)
    return exited["exit_code"] == 0 and out == f"{word}\n".encode()


@pytest.mark.timeout(600)
def test_a_sandbox_filling_the_disk_leaves_the_others_working_from_the_servers_reserve(small_ext4, tmp_path):
    server = LoggedOutside(small_ext4 / "data", tmp_path, token=TOKEN, runtime="bwrap",
                           extra_args=["--disk-reserve", SERVER_RESERVE, "--disk-quota", "off"])
    with server, make_http(server.url) as http:
        http.timeout = 120.0
        filler, other = claim_sandbox(http), claim_sandbox(http)
        before = space(small_ext4)
        exited, out = run_to_exit(http, filler, ["sh", "-c", FILL], timeout=300)
        after = space(small_ext4)
        print(f"\nbefore the fill: {before}\nafter the sandbox's dd: {after}\n{out.decode().strip()[-300:]}")
        assert b"No space left on device" in out

        assert httpx.get(f"{server.url}/healthz").status_code == 200
        assert echo_works(http, other, "still-here")          # another sandbox's session
        sid = create_session(http, other, {"command": ["cat"]})["id"]
        ok(http.post(f"/api/v1/sandboxes/{other}/sessions/{sid}/inputs",
                     json={"input_id": "i1", "data_base64": "aGkK", "eof": True}), 202)
        assert wait_exited(http, other, sid)["exit_code"] == 0
        ok(http.post(f"/api/v1/sandboxes/{other}/pause", json={}), 200)      # a pause, from the reserve
        ok(http.post(f"/api/v1/sandboxes/{other}/resume", json={}), 200)
        assert echo_works(http, other, "after-resume")

        refused = {
            "upload": http.post(f"/api/v1/sandboxes/{other}/files", params={"path": "/workspace/up"},
                                content=b"u" * MIB),
            "upload (filler)": http.post(f"/api/v1/sandboxes/{filler}/files", params={"path": "/workspace/up"},
                                         content=b"u" * 65536),
            "mkdir": http.post(f"/api/v1/sandboxes/{other}/files", params={"path": "/workspace/d", "mkdir": "true"}),
            "claim": http.post("/api/v1/sandboxes", json={"template": "default"}),
        }
        print({name: resp.status_code for name, resp in refused.items()})
        assert all(resp.status_code == 507 for resp in refused.values())
        assert all(resp.json()["error"]["code"] == "insufficient_storage" for resp in refused.values())
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        print(f"at the end: {space(small_ext4)}")

        ok(http.delete(f"/api/v1/sandboxes/{filler}/files", params={"path": "/workspace/fill"}), 200)
        ok(http.post(f"/api/v1/sandboxes/{other}/files", params={"path": "/workspace/up"}, content=b"u"), 200)
        for sb in (filler, other):
            assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202


def fill_as_root(path) -> None:
    """A ballast file as root: it takes the root-only blocks too, so nothing at all is left."""
    block = b"\0" * MIB
    with open(path, "wb") as ballast:
        while True:
            try:
                ballast.write(block)
                ballast.flush()
            except OSError:
                break
        while True:  # the last blocks, a page at a time
            try:
                ballast.write(block[:4096])
                ballast.flush()
            except OSError:
                return


@pytest.mark.timeout(600)
def test_on_a_disk_full_for_root_too_every_write_path_answers_507(small_ext4, tmp_path):
    server = LoggedOutside(small_ext4 / "data", tmp_path, token=TOKEN, runtime="bwrap",
                           extra_args=["--disk-reserve", SERVER_RESERVE, "--disk-quota", "off"])
    with server, make_http(server.url) as http:
        http.timeout = 120.0
        sb, paused = claim_sandbox(http), claim_sandbox(http)
        sid = create_session(http, sb, {"command": ["cat"]})["id"]
        ballast = small_ext4 / "ballast"
        fill_as_root(ballast)
        print(f"\nfull: {space(small_ext4)}")
        base = f"/api/v1/sandboxes/{sb}"
        calls = {
            "claim": ("POST", "/api/v1/sandboxes", {"json": {"template": "default"}}),
            "update sandbox": ("PUT", base, {"json": {"config": {"env_vars": {"A": "1"}}}}),
            "network": ("PUT", f"{base}/network", {"json": {"mode": "block-all"}}),
            "session": ("POST", f"{base}/sessions", {"json": {"command": ["echo", "x"]}}),
            "input": ("POST", f"{base}/sessions/{sid}/inputs", {"json": {"input_id": "f", "data_base64": "eAo="}}),
            "new attempt": ("POST", f"{base}/sessions/{sid}/attempts", {"json": {}}),
            "context": ("POST", f"{base}/contexts", {"json": {"type": "cmd", "cmd": {"command": ["true"]}}}),
            "upload": ("POST", f"{base}/files", {"params": {"path": "/workspace/u"}, "content": b"u" * 65536}),
            "upload, no length": ("POST", f"{base}/files", {"params": {"path": "/workspace/v"},
                                                            "content": iter([b"v" * 65536] * 4)}),
            "mkdir": ("POST", f"{base}/files", {"params": {"path": "/workspace/d", "mkdir": "true"}}),
            "pause": ("POST", f"/api/v1/sandboxes/{paused}/pause", {"json": {}}),
        }
        answers = {name: http.request(method, path, **kw) for name, (method, path, kw) in calls.items()}
        codes = {name: resp.status_code for name, resp in answers.items()}
        print(codes)
        # A context keeps nothing on disk but its launch file: it starts when that still fits.
        assert codes.pop("context") in (201, 507)
        assert codes == {name: 507 for name in codes}
        assert all(answers[name].json()["error"]["code"] == "insufficient_storage" for name in codes)
        ballast.unlink()
        ok(http.post(f"{base}/files", params={"path": "/workspace/u"}, content=b"u"), 200)
        # The refused batches are retried every 0.25 s: the stores recover by themselves.
        wait_for(lambda: httpx.get(f"{server.url}/healthz").status_code == 200, timeout=30)
        assert echo_works(http, sb, "writes-again")
        ok(http.post(f"/api/v1/sandboxes/{paused}/pause", json={}), 200)


def test_the_server_warns_when_the_filesystem_keeps_less_than_its_reserve_for_root(tmp_path, small_ext4):
    """tmpfs keeps nothing for root: sandbox processes could fill it past the reserve, and the
    start-up check says so; the test's ext4 image keeps about 75 MiB for root, more than 48 MiB."""
    from session_supervisor.infra.disk_reserve import DiskReserve
    with mounted(["-t", "tmpfs", "-o", "size=64m"], "tmpfs", tmp_path / "tmpfs") as plain:
        warning = DiskReserve(str(plain), 48 << 20).startup_check(sandboxes_unprivileged=True)
    print(f"\ntmpfs: {warning}")
    assert warning is not None and "tune2fs" in warning
    assert DiskReserve(str(small_ext4), 48 << 20).startup_check(sandboxes_unprivileged=True) is None
    assert "server's own user" in DiskReserve(str(small_ext4), 48 << 20).startup_check(sandboxes_unprivileged=False)
