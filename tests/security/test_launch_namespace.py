"""A sandbox's processes start in a mount namespace of its own (its launch namespace), where the
data dir and every other sandbox's disk and network namespace handle are gone: bwrap reads
every mount it can see for each bind it makes, and a copy of the host's table kept by each
sandbox grew with every sandbox live. The namespace goes with the sandbox, and with the server."""
from __future__ import annotations

from pathlib import Path

from tests.conftest import make_http
from tests.helpers import TOKEN, ok, wait_for
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"


def mount_points_of(pid: int) -> list[str]:
    return [line.split()[4] for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()]


def test_a_sandboxs_launcher_sees_no_mount_of_the_data_dir_or_of_any_namespace_handle(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap", extra_args=["--network", "netns"]).start()
    try:
        with make_http(server.url) as http:
            pids = []
            for _ in range(3):
                sandbox = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
                sid = ok(http.post(f"{U}/{sandbox}/sessions", json={"command": ["sleep", "600"]}), 201)["id"]
                attempt = wait_for(lambda: ok(http.get(f"{U}/{sandbox}/sessions/{sid}"), 200)["attempt"].get("pid"),
                                   timeout=30)
                pids.append(attempt)
            data = str(server.data_dir.resolve())
            host_below = [p for p in mount_points_of(1) if p.startswith(data + "/") or p.startswith("/run/netns/")]
            assert len(host_below) >= 6, host_below  # the host has every sandbox's disk and handle
            for pid in pids:  # the outer bwrap of each sandbox's attempt
                seen = mount_points_of(pid)
                assert not [p for p in seen if p == data or p.startswith(data + "/")], (pid, seen)
                assert not [p for p in seen if p.startswith("/run/netns/")], (pid, seen)
                assert "/run/sessiond/workspace" in seen, (pid, seen)  # its own directories, staged
                assert len(seen) <= len(mount_points_of(1)) - len(host_below) + 5, (pid, seen)
    finally:
        server.stop()
    with open("/proc/self/mountinfo") as f:
        assert not [line for line in f if str(server.data_dir.resolve()) in line], "the data dir's bind is undone"
