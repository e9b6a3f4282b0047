"""A full disk is an expected state (issue 10): writes answer 507 in the
envelope, output waits (never dropped), stop and KILL still act, writes resume by
themselves once space is free, and a restart loads every sandbox with no seq gap.

Each test mounts its own small tmpfs for the data dir (it runs as root, as CI does) and
unmounts it at the end; the server's log lives outside it.
"""
from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tests.conftest import make_http
from tests.helpers import all_events, create_session, err, ok, spath, tmpfs, wait_event, wait_for, write_input
from tests.serverproc import ServerProcess

TOKEN = "fault-token"
MIB = 1024 * 1024

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


class LoggedOutside(ServerProcess):
    """A server whose log is not on the disk the test fills; no disk reserve, so the disk's last
    bytes are the stores' to hit (tests/bounds/test_disk_reserve.py tests the reserve)."""

    def __init__(self, data_dir: Path, log_dir: Path) -> None:
        super().__init__(data_dir, token=TOKEN, runtime="host", extra_args=["--disk-reserve", "0"])
        self._log_dir = log_dir

    @property
    def log_path(self) -> Path:
        return self._log_dir / "server.log"


@pytest.fixture
def small_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "40m") as mount:
        yield mount


@pytest.fixture
def disk_server(small_disk, tmp_path):
    server = LoggedOutside(small_disk / "data", tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def fill(path: Path, leave: int = 0) -> int:
    """Write a ballast file until the filesystem is full (or ``leave`` bytes remain)."""
    written = 0
    block = b"\0" * MIB
    with open(path, "wb") as ballast:
        while True:
            stats = os.statvfs(path)
            room = stats.f_bavail * stats.f_frsize - leave
            if room <= 0:
                break
            try:
                written += ballast.write(block[:min(len(block), room)])
                ballast.flush()
            except OSError:
                break
    return written


def echoed(http, sb, sid) -> bytes:
    return b"".join(base64.b64decode(e["data_base64"]) for e in all_events(http, sb, sid)
                    if e["type"] == "output")


def assert_no_gap(events: list[dict]) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"seq gap in {seqs}"


def test_a_full_disk_answers_507_keeps_output_and_recovers_without_a_restart(disk_server, small_disk):
    with make_http(disk_server.url, TOKEN) as http:
        sb = ok(http.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]
        cat = create_session(http, sb, {"command": ["cat"]})["id"]
        write_input(http, sb, cat, "before", b"before the disk filled\n")
        wait_for(lambda: b"before the disk filled" in echoed(http, sb, cat))
        other = ok(http.post("/api/v1/sandboxes", json={"template": "default"}), 201)["sandbox_id"]

        fill(small_disk / "ballast", leave=4 * MIB)  # the flood below takes the rest
        flood = create_session(http, other, {"command": ["cat", "/dev/urandom"]})["id"]
        wait_for(lambda: http.get("/healthz").status_code == 503, timeout=30,
                 describe=lambda: http.get("/healthz").text)
        assert "insufficient_storage" not in http.get("/healthz").text  # the reason, not a code
        assert ok(http.get("/healthz"), 503)["status"] == "store_unwritable"

        acknowledged = ["before"]
        refused = http.post(spath(sb, cat, "/inputs"),
                            json={"input_id": "while-full", "data_base64": "d2hpbGUgZnVsbAo="})
        if refused.status_code == 202:  # this sandbox's own store may still have had a page free
            acknowledged.append("while-full")
        else:
            err(refused, 507, "insufficient_storage")
        err(http.post(spath(other), json={"command": ["true"]}), 507, "insufficient_storage")
        err(http.post(spath(other, flood, "/inputs"), json={"input_id": "x", "eof": True}), 507,
            "insufficient_storage")
        err(http.post(f"/api/v1/sandboxes/{other}/pause"), 507, "insufficient_storage")
        claim = http.post("/api/v1/sandboxes", json={"template": "default"})
        err(claim, 507, "insufficient_storage")
        assert ok(http.get("/api/v1/sandboxes"), 200)["count"] == 2, "a refused claim leaves nothing"

        pid = ok(http.get(spath(other, flood)), 200)["attempt"]["pid"]
        killed = http.post(spath(other, flood, "/signals"), json={"signal": "KILL"})
        assert killed.status_code in (202, 507), killed.text
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), timeout=10,
                 describe=lambda: "the flood survived KILL on a full disk")

        (small_disk / "ballast").unlink()  # space is free again: no restart
        wait_for(lambda: http.get("/healthz").status_code == 200, timeout=15,
                 describe=lambda: http.get("/healthz").text)
        write_input(http, sb, cat, "after", b"after space came back\n")
        acknowledged.append("after")
        wait_for(lambda: b"after space came back" in echoed(http, sb, cat), timeout=10)
        wait_event(http, other, flood, lambda e: e["type"] == "attempt.exited", timeout=15)
        create_session(http, other, {"command": ["true"]})

    disk_server.stop()
    disk_server.start()
    with make_http(disk_server.url, TOKEN) as http:
        listed = {s["id"] for s in ok(http.get("/api/v1/sandboxes"), 200)["sandboxes"]}
        assert listed == {sb, other}
        for sandbox, session in ((sb, cat), (other, flood)):
            journal = all_events(http, sandbox, session)
            assert_no_gap(journal)
        journal = all_events(http, sb, cat)
        accepted = {e["input_id"] for e in journal if e["type"] == "input.accepted"}
        assert set(acknowledged) <= accepted
        out = echoed(http, sb, cat)
        assert b"before the disk filled" in out and b"after space came back" in out
        assert "while-full" not in acknowledged or b"while full" in out


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_claim_with_less_than_16_mib_free_is_refused_and_leaves_nothing(disk_server, small_disk):
    with make_http(disk_server.url, TOKEN) as http:
        fill(small_disk / "ballast", leave=8 * MIB)  # room for a store, not for a sandbox's work
        refused = err(http.post("/api/v1/sandboxes", json={"template": "default"}), 507, "insufficient_storage")
        assert "free space" in refused["message"]
        assert ok(http.get("/api/v1/sandboxes"), 200)["count"] == 0
        assert not list((small_disk / "data" / "sandboxes").glob("sb-*"))
        (small_disk / "ballast").unlink()
        ok(http.post("/api/v1/sandboxes", json={"template": "default"}), 201)
    disk_server.stop()
