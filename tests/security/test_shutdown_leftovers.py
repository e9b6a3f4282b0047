"""A server on the hardened runtime stops fast and leaves nothing of its data dir on the host:
no process, network namespace, veth pair, nftables table or cgroup directory carrying its tag
(a hash of the data dir). After a kill -9, even in the middle of a pause, the next start
removes whatever the killed server left, and says how much it found."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import httpx

from session_supervisor.infra.cgroups import Cgroups, group_name
from session_supervisor.infra.netns import instance_tag

from tests.conftest import make_http
from tests.helpers import TOKEN, ok, wait_for
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"


def leftovers(data_dir: Path) -> dict[str, list[str]]:
    """Everything on this host that carries the data dir's tag."""
    tag = instance_tag(str(data_dir))
    found: dict[str, list[str]] = {}
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    found["netns"] = [n for n in netns if n.startswith(f"sessiond-{tag}-")]
    ifaces = []
    for iface in os.listdir("/sys/class/net"):
        try:
            alias = Path(f"/sys/class/net/{iface}/ifalias").read_text().strip()
        except OSError:
            continue
        if alias == f"sessiond-{tag}":
            ifaces.append(iface)
    found["veth"] = ifaces
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    found["nft"] = [line for line in tables.splitlines() if f"sessiond_{tag}" in line]
    group = group_name(str(data_dir))
    dirs = []
    for base in Cgroups.detect(group).bases.values():
        if os.path.isdir(base):
            dirs.append(base)
    found["cgroups"] = sorted(set(dirs))
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if f"/{group}/" in Path(f"/proc/{pid}/cgroup").read_text():
                procs.append(pid)
        except OSError:
            pass
    found["processes"] = procs
    return found


def nothing_left(data_dir: Path) -> bool:
    return not any(leftovers(data_dir).values())


def sandboxes_with_sessions(http, sandboxes: int, sessions: int) -> list[tuple[str, list[str]]]:
    out = []
    for _ in range(sandboxes):
        sb = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
        ids = [ok(http.post(f"{U}/{sb}/sessions", json={"command": ["sleep", "600"]}), 201)["id"]
               for _ in range(sessions)]
        out.append((sb, ids))
    for sb, ids in out:
        wait_for(lambda: all(ok(http.get(f"{U}/{sb}/sessions/{sid}"), 200)["phase"] == "running"
                             for sid in ids), timeout=30)
    return out


def test_sigterm_with_twelve_live_attempts_exits_within_three_seconds_and_leaves_nothing(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap", extra_args=["--network", "netns"])
    server.start()
    try:
        with make_http(server.url) as http:
            sandboxes_with_sessions(http, 2, 6)
        assert len(leftovers(server.data_dir)["cgroups"]) >= 2, "the sandboxes' cgroups carry the data dir's tag"
        started = time.monotonic()
        server.proc.terminate()
        server.proc.wait(timeout=30)
        took = time.monotonic() - started
        print(f"\nSIGTERM with 2 sandboxes x 6 live attempts: exited in {took * 1000:.0f} ms")
        assert server.proc.returncode == 0, server.log_tail()
        assert took <= 3.0, server.log_tail()
        assert leftovers(server.data_dir) == {k: [] for k in leftovers(server.data_dir)}
    finally:
        server.stop()


def test_the_start_after_a_kill_9_during_a_pause_removes_what_the_killed_server_left(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap", extra_args=["--network", "netns"])
    server.start()
    try:
        with make_http(server.url) as http:
            (sb, _ids), = sandboxes_with_sessions(http, 1, 6)
        pausing = threading.Thread(target=lambda: _post_quietly(server.url, f"{U}/{sb}/pause"))
        pausing.start()
        time.sleep(0.03)
        server.kill()  # mid-pause: frozen cgroups, namespaces, the table are all left behind
        pausing.join(10)
        assert any(leftovers(server.data_dir).values())
        server.start()
        log = server.log_path.read_text()
        assert "left by an earlier server" in log, server.log_tail()
        server.stop()
        assert nothing_left(server.data_dir), leftovers(server.data_dir)
    finally:
        server.stop()


def test_five_kill_9_rounds_do_not_grow_the_cgroup_directories(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap", extra_args=["--network", "netns"])
    server.start()
    counts = []
    try:
        with make_http(server.url) as http:
            (sb, _ids), = sandboxes_with_sessions(http, 1, 3)
        for _ in range(5):
            server.kill()
            server.start()
            with make_http(server.url) as http:
                wait_for(lambda: ok(http.get(f"{U}/{sb}"), 200)["status"] == "running", timeout=30)
            counts.append(_cgroup_dirs(server.data_dir))
        print(f"\ncgroup directories after each of 5 kill -9 rounds: {counts}")
        assert max(counts) == counts[0], counts
    finally:
        server.stop()


def _cgroup_dirs(data_dir: Path) -> int:
    total = 0
    for base in Cgroups.detect(group_name(str(data_dir))).bases.values():
        for _root, dirs, _files in os.walk(base):
            total += len(dirs)
    return total


def _post_quietly(base_url: str, path: str) -> None:
    try:
        httpx.post(base_url + path, json={}, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    except httpx.HTTPError:
        pass
