"""The warm pool hands each sandbox parts made for it alone: claims racing for a full pool get
network namespaces, uids and cgroups no other sandbox has, a deleted sandbox's parts never come
back, and a kill -9 with a full pool leaves nothing on the host once the server has started
again and stopped."""
from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

from session_supervisor.infra.cgroups import Cgroups, group_name
from session_supervisor.infra.instance import instance_tag

from tests.conftest import make_http
from tests.helpers import TOKEN, ok, wait_for
from tests.security.test_shutdown_leftovers import leftovers, nothing_left
from tests.serverproc import ServerProcess

U = "/api/v1/sandboxes"
SLEEP = {"command": ["sleep", "600"]}


def pool_server(data_dir: Path, size: int) -> ServerProcess:
    return ServerProcess(data_dir, token=TOKEN, runtime="bwrap",
                         extra_args=["--network", "netns", "--warm-pool", str(size)])


def pool_metrics(http) -> dict[tuple[str, str], float]:
    """(series, part) -> value of every sessiond_warm_pool_* sample."""
    found = {}
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("sessiond_warm_pool_"):
            name, value = line.rsplit(" ", 1)
            series, _, labels = name.partition("{")
            found[(series, labels.split('"')[1])] = float(value)
    return found


def wait_until_full(http, size: int) -> None:
    def full():
        got = pool_metrics(http)
        parts = [part for series, part in got if series == "sessiond_warm_pool_ready"]
        return len(parts) == 3 and all(got[("sessiond_warm_pool_ready", p)] >= size for p in parts)
    wait_for(full, timeout=60, interval=0.1, describe=lambda: pool_metrics(http))


def netns_inode(data_dir: Path, sandbox_id: str) -> int:
    return os.stat(f"/run/netns/sessiond-{instance_tag(str(data_dir))}-{sandbox_id}").st_ino


def processes_of(data_dir: Path, sandbox_id: str) -> set[int]:
    """The pids in the sandbox's own cgroup (the pids controller's, like every controller's)."""
    base = Cgroups.detect(group_name(str(data_dir))).bases["pids"]
    found: set[int] = set()
    for root, _dirs, files in os.walk(os.path.join(base, sandbox_id)):
        if "cgroup.procs" in files:
            found |= {int(line) for line in Path(root, "cgroup.procs").read_text().split()}
    return found


def host_view(pid: int) -> tuple[int, int]:
    """(real uid, network namespace inode) of a host pid."""
    uid = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("Uid:"))
    return uid, os.stat(f"/proc/{pid}/ns/net").st_ino


def workspace_owner(data_dir: Path, sandbox_id: str) -> int:
    base = data_dir / "sandboxes" / sandbox_id
    workspace = base / "disk" / "workspace" if (base / "disk" / "workspace").exists() else base / "workspace"
    return workspace.stat().st_uid


def test_sandboxes_claimed_at_once_from_a_full_pool_each_run_in_their_own_namespace_uid_and_cgroups(tmp_path):
    server = pool_server(tmp_path / "data", 4).start()
    try:
        with make_http(server.url) as http:
            wait_until_full(http, 4)
            claimed: list[str] = []
            lock = threading.Lock()

            def claim():
                with make_http(server.url) as client:
                    sandbox = ok(client.post(U, json={"template": "default"}), 201)["sandbox_id"]
                    ok(client.post(f"{U}/{sandbox}/sessions", json=SLEEP), 201)
                    with lock:
                        claimed.append(sandbox)
            racers = [threading.Thread(target=claim) for _ in range(8)]
            for racer in racers:
                racer.start()
            for racer in racers:
                racer.join(60)
            assert len(claimed) == 8
            taken = pool_metrics(http)
            assert all(taken[("sessiond_warm_pool_taken_total", part)] >= 4
                       for part in ("network", "cgroups", "directory")), taken
            seen_uids, seen_nets, seen_pids = {}, {}, {}
            for sandbox in claimed:
                pids = wait_for(lambda: processes_of(server.data_dir, sandbox), timeout=30)
                own_net = netns_inode(server.data_dir, sandbox)
                own_uid = workspace_owner(server.data_dir, sandbox)
                for pid in pids:
                    uid, net = host_view(pid)
                    assert (uid, net) == (own_uid, own_net), (sandbox, pid)
                    assert pid not in seen_pids, f"{pid} is in the cgroups of {sandbox} and {seen_pids.get(pid)}"
                    seen_pids[pid] = sandbox
                assert own_uid not in seen_uids, f"{sandbox} and {seen_uids.get(own_uid)} share uid {own_uid}"
                assert own_net not in seen_nets, f"{sandbox} and {seen_nets.get(own_net)} share a namespace"
                seen_uids[own_uid], seen_nets[own_net] = sandbox, sandbox
    finally:
        server.stop()


def test_a_deleted_sandboxs_namespace_cgroups_and_directory_are_removed_not_pooled_again(tmp_path):
    server = pool_server(tmp_path / "data", 2).start()
    try:
        with make_http(server.url) as http:
            wait_until_full(http, 2)
            sandbox = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
            ok(http.post(f"{U}/{sandbox}/sessions", json=SLEEP), 201)
            cgroup_dirs = [os.path.join(base, sandbox)
                           for base in Cgroups.detect(group_name(str(server.data_dir))).bases.values()]
            namespace = f"/run/netns/sessiond-{instance_tag(str(server.data_dir))}-{sandbox}"
            assert os.path.exists(namespace) and all(os.path.isdir(d) for d in cgroup_dirs)
            made = pool_metrics(http)
            ok(http.delete(f"{U}/{sandbox}"), 202)
            wait_until_full(http, 2)
            assert not os.path.exists(namespace)
            assert not any(os.path.isdir(d) for d in cgroup_dirs)
            assert not (server.data_dir / "sandboxes" / sandbox).exists()
            after = pool_metrics(http)
            for part in ("network", "cgroups", "directory"):  # refilled by making, one each
                assert after[("sessiond_warm_pool_made_total", part)] == made[("sessiond_warm_pool_made_total", part)] + 1
    finally:
        server.stop()


def test_a_kill_9_with_a_full_pool_leaves_nothing_on_the_host_after_the_next_start(tmp_path):
    server = pool_server(tmp_path / "data", 3).start()
    try:
        with make_http(server.url) as http:
            wait_until_full(http, 3)
        tag = instance_tag(str(server.data_dir))
        warm_names = [n for n in _netns_names() if n.startswith(f"sessiond-{tag}-warm-")]
        assert len(warm_names) == 3
        assert len(_mounts_under(server.data_dir / "warm")) == 3  # each warm directory's disk
        server.kill()
        assert leftovers(server.data_dir)["netns"], "the killed server's pool is still on the host"
        server.start()
        assert not set(warm_names) & set(_netns_names()), "the killed server's warm namespaces are gone"
        log = server.log_path.read_text()
        assert "warm sandbox directories left by an earlier server" in log, server.log_tail()
        server.stop()
        assert nothing_left(server.data_dir), leftovers(server.data_dir)
        assert _mounts_under(server.data_dir) == []
        assert not _is_mount_point(server.data_dir), "the data dir's bind onto itself is undone at stop"
        assert list((server.data_dir / "warm").iterdir()) == []
    finally:
        server.stop()


def test_a_server_with_a_pool_of_zero_makes_nothing_ahead(tmp_path):
    server = pool_server(tmp_path / "data", 0).start()
    try:
        with make_http(server.url) as http:
            sandbox = ok(http.post(U, json={"template": "default"}), 201)["sandbox_id"]
            assert pool_metrics(http) == {}
            tag = instance_tag(str(server.data_dir))
            assert [n for n in _netns_names() if n.startswith(f"sessiond-{tag}-")] == [f"sessiond-{tag}-{sandbox}"]
            assert list((server.data_dir / "warm").iterdir()) == []
    finally:
        server.stop()


def _netns_names() -> list[str]:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout.split()


def _is_mount_point(path: Path) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(Path(path).resolve()) for line in f)


def _mounts_under(data_dir: Path) -> list[str]:
    root = str(Path(data_dir).resolve()) + "/"
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(root)]
