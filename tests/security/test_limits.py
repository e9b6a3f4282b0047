"""Resource limits of a hardened sandbox, tried for real: a fork bomb and a memory hog.

Timings here are not benchmarks: the bounds are generous (the VM is shared) and only say
"another tenant was not starved", which is what the limits are for.
"""
from __future__ import annotations

import os
import time

import httpx

from tests.helpers import (claim_sandbox, create_session, events, ok, output_bytes, run_to_exit, wait_event, wait_for,
                           workspace_dir)

FORK_BOMB = r'''
import subprocess, time
children = []
for i in range(3000):
    try:
        children.append(subprocess.Popen(["sleep", "300"]))
    except OSError as exc:
        print("refused_at", len(children), exc.errno, flush=True)
        break
print("started", len(children), flush=True)
time.sleep(300)
'''


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    found.append(int(entry))
            except FileNotFoundError:
                pass
    return found


def claim(http, **config) -> str:
    body = {"template": "default", "config": config} if config else {"template": "default"}
    return ok(http.post("/api/v1/sandboxes", json=body), 201)["sandbox_id"]


def test_a_fork_bomb_stops_at_the_pids_cap_and_leaves_nothing_behind(hardened, http):
    bomb, calm = claim_sandbox(http), claim_sandbox(http)
    uid = workspace_dir(hardened.data_dir, bomb).stat().st_uid
    sid = create_session(http, bomb, {"command": ["/usr/bin/python3", "-c", FORK_BOMB]})["id"]
    wait_event(http, bomb, sid, lambda e: b"started" in output_bytes(events(http, bomb, sid)), timeout=90)
    out = output_bytes(events(http, bomb, sid)).decode()
    started = int(out.split("started ")[1].split()[0])
    print(out.strip())
    assert started < 1024, out  # pids.max 1024 counts every process of the sandbox
    assert "refused_at" in out, out

    began = time.monotonic()  # meanwhile the other sandbox works as usual
    exited, echoed = run_to_exit(http, calm, ["echo", "still-fast"], timeout=30)
    assert (exited["exit_code"], echoed) == (0, b"still-fast\n")
    assert time.monotonic() - began < 15
    usage = ok(http.get(f"/api/v1/sandboxes/{bomb}/status"), 200)["resource_usage"]
    assert usage["pids"] >= started

    assert http.delete(f"/api/v1/sandboxes/{bomb}").status_code == 202
    wait_for(lambda: not processes_of(uid), timeout=30, describe="the bomb's processes to be reaped")


def test_a_sandbox_with_256mi_cannot_allocate_a_gibibyte_and_the_server_lives_on(hardened, http):
    sb = claim(http, resources={"memory": "256Mi"})
    assert ok(http.get(f"/api/v1/sandboxes/{sb}"), 200)["resources"] == {"memory": "256Mi"}
    usage = ok(http.get(f"/api/v1/sandboxes/{sb}/status"), 200)["resource_usage"]
    assert usage["container_memory_limit"] == 256 * 2**20
    hog = ["/usr/bin/python3", "-c", "b = b'x' * (1 << 30); print('allocated', len(b))"]
    exited, out = run_to_exit(http, sb, hog, timeout=60)
    assert b"allocated" not in out
    assert (exited["exit_code"], exited["signal"], exited["reason"]) == (-1, "KILL", "oom_killed"), exited
    assert httpx.get(f"{hardened.url}/healthz").status_code == 200
    assert hardened.proc.poll() is None  # the server was not the OOM killer's victim
    exited, out = run_to_exit(http, sb, ["echo", "after"])  # and the sandbox still works
    assert (exited["exit_code"], out) == (0, b"after\n")


def test_updating_memory_applies_the_new_limit_to_the_sandbox(hardened, http):
    sb = claim(http, resources={"memory": "256Mi"})
    ok(http.put(f"/api/v1/sandboxes/{sb}", json={"config": {"resources": {"memory": "512Mi"}}}), 200)
    usage = ok(http.get(f"/api/v1/sandboxes/{sb}/status"), 200)["resource_usage"]
    assert usage["container_memory_limit"] == 512 * 2**20
    exited, out = run_to_exit(http, sb, ["/usr/bin/python3", "-c", "b = b'x' * (300 << 20); print('ok')"],
                              timeout=60)
    assert (exited["exit_code"], out) == (0, b"ok\n"), exited


def test_status_reports_the_workspace_disk_usage(hardened, http):
    sb = claim_sandbox(http)
    exited, _ = run_to_exit(http, sb, ["sh", "-c", "head -c 3000000 /dev/urandom > /workspace/blob"])
    assert exited["exit_code"] == 0
    usage = ok(http.get(f"/api/v1/sandboxes/{sb}/status"), 200)["resource_usage"]
    assert usage["workspace_bytes"] >= 3_000_000


def test_pause_and_resume_keep_the_sandbox_uid_and_its_limits(hardened, http):
    sb = claim(http, resources={"memory": "256Mi"})
    uid = workspace_dir(hardened.data_dir, sb).stat().st_uid
    sid = create_session(http, sb, {"command": ["sleep", "600"],
                                    "lifecycle": {"runtime_recovery": "restart"}})["id"]
    ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
    wait_for(lambda: not processes_of(uid), timeout=30, describe="the paused runtime's processes to end")
    ok(http.post(f"/api/v1/sandboxes/{sb}/resume", json={}), 200)
    wait_event(http, sb, sid, lambda e: e["type"] == "attempt.started" and e["runtime_generation"] == 2,
               timeout=30)
    wait_for(lambda: processes_of(uid), timeout=30, describe="the resumed attempt to run as the same uid")
    usage = ok(http.get(f"/api/v1/sandboxes/{sb}/status"), 200)["resource_usage"]
    assert usage["container_memory_limit"] == 256 * 2**20
    assert workspace_dir(hardened.data_dir, sb).stat().st_uid == uid



SMALL_BOMB = FORK_BOMB.replace("range(3000)", "range(200)").replace("time.sleep(300)", "")


def test_the_operator_sets_the_pids_cap_with_a_serve_flag(tmp_path):
    """``sessiond serve --sandbox-pids-max 64``: a sandbox's processes stop at 64, counted
    from inside by a real probe (the cap is every process of the sandbox, bwrap included)."""
    from tests.conftest import make_http
    from tests.helpers import TOKEN
    from tests.serverproc import ServerProcess

    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="bwrap",
                       extra_args=["--sandbox-pids-max", "64"]) as server, make_http(server.url) as api:
        sb = claim_sandbox(api)
        exited, out = run_to_exit(api, sb, ["/usr/bin/python3", "-c", SMALL_BOMB], timeout=60)
        started = int(out.decode().split("started ")[1].split()[0])
        assert "refused_at" in out.decode() and started < 64, out
        assert api.delete(f"/api/v1/sandboxes/{sb}").status_code == 202
