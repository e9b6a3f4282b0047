"""What sandbox-made trees cost the file API: depth, width, watches. Each test prints its figure."""
from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import threading
import time

import pytest
from websockets.sync.client import connect

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, ok, run_to_exit, wait_for
from tests.serverproc import ServerProcess

from .memory import MIB, PeakSampler, inotify_instances, open_fds, rss_bytes

PY = "/usr/bin/python3"
DEEP = """
import os, sys
os.makedirs("/workspace/deep", exist_ok=True)
os.chdir("/workspace/deep")
for i in range(int(sys.argv[1])):
    os.mkdir("d")
    os.chdir("d")
    with open("f", "w") as f:
        f.write("x")
print("depth", i + 1, flush=True)
"""
WIDE = """
import os, sys
os.makedirs("/workspace/wide", exist_ok=True)
for i in range(int(sys.argv[1])):
    os.close(os.open("/workspace/wide/entry-%06d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
print("made", i + 1, flush=True)
"""


def make_deep(http, sb: str, depth: int) -> None:
    exited, out = run_to_exit(http, sb, [PY, "-c", DEEP, str(depth)], timeout=120)
    assert exited["exit_code"] == 0 and f"depth {depth}".encode() in out, out


def test_a_1500_deep_directory_is_statused_deleted_and_goes_with_its_sandbox(hardened, http):
    sb = claim_sandbox(http)
    make_deep(http, sb, 1500)
    usage = ok(http.get(f"/api/v1/sandboxes/{sb}/status"), 200)["resource_usage"]
    print(f"\n1,500-deep tree: status 200, workspace_bytes {usage['workspace_bytes']}")
    assert usage["workspace_bytes"] >= 1500 * 4096
    ok(http.delete(f"/api/v1/sandboxes/{sb}/files", params={"path": "/workspace/deep"}), 200)
    assert ok(http.get(f"/api/v1/sandboxes/{sb}/files/list", params={"path": "/workspace"}), 200)["entries"] == []
    make_deep(http, sb, 1500)  # again, and this time the sandbox goes with it
    assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202
    sandboxes = hardened.data_dir / "sandboxes"
    wait_for(lambda: not (sandboxes / sb).exists(), timeout=30)  # removed after the answer
    assert not [p.name for p in sandboxes.iterdir() if p.name.startswith(".removing-")]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def stat_latencies(http, sb: str, count: int) -> list[float]:
    out = []
    for _ in range(count):
        began = time.perf_counter()
        ok(http.get(f"/api/v1/sandboxes/{sb}/files/stat", params={"path": "/workspace/probe"}), 200)
        out.append(time.perf_counter() - began)
        time.sleep(0.01)
    return out


def list_all(url: str, sb: str, path: str) -> int:
    """Page through a listing; the number of entries. Run in a process of its own: decoding a
    page of 100,000 entries holds this interpreter's GIL, which would delay the stat timings."""
    after, count = "", 0
    with make_http(url) as http:
        while True:
            data = ok(http.get(f"/api/v1/sandboxes/{sb}/files/list", params={"path": path, "after": after},
                               timeout=300), 200)
            count += len(data["entries"])
            if not data.get("has_more"):
                return count
            after = data["next_after"]


@pytest.mark.timeout(900)
def test_eight_listings_of_300000_entries_cost_little_memory_and_do_not_slow_another_sandbox(tmpfs):
    # Its own server, over a tmpfs: 300,000 files on this VM's disk take minutes to make.
    with ServerProcess(tmpfs / "data", token=TOKEN, runtime="bwrap") as server, make_http(server.url) as http:
        http.timeout = 120.0
        listings_next_to_stats(server, http)


def listings_next_to_stats(hardened, http) -> None:
    big, other = claim_sandbox(http), claim_sandbox(http)
    began = time.monotonic()
    exited, out = run_to_exit(http, big, [PY, "-c", WIDE, "300000"], timeout=600)
    assert exited["exit_code"] == 0 and b"made 300000" in out, out
    print(f"\n300,000 files made in {time.monotonic() - began:.1f} s")
    ok(http.post(f"/api/v1/sandboxes/{other}/files", params={"path": "/workspace/probe"}, content=b"x"), 200)
    alone = stat_latencies(http, other, 200)
    pid = hardened.proc.pid
    start = rss_bytes(pid)
    latencies: list[float] = []
    done = threading.Event()

    def stat_meanwhile():
        while not done.is_set():
            began = time.perf_counter()
            ok(http.get(f"/api/v1/sandboxes/{other}/files/stat", params={"path": "/workspace/probe"}), 200)
            latencies.append(time.perf_counter() - began)
            time.sleep(0.01)

    prober = threading.Thread(target=stat_meanwhile)
    spawn = multiprocessing.get_context("spawn")
    with PeakSampler(pid) as peak, concurrent.futures.ProcessPoolExecutor(8, mp_context=spawn) as pool:
        prober.start()
        began = time.monotonic()
        counts = list(pool.map(list_all, [hardened.url] * 8, [big] * 8, ["/workspace/wide"] * 8))
        took = time.monotonic() - began
        done.set()
        prober.join()
    p99, p99_alone = percentile(latencies, 0.99), percentile(alone, 0.99)
    print(f"\n8 x 300,000-entry listings in {took:.1f} s: server RSS {start / MIB:.0f} -> peak "
          f"{peak.max / MIB:.0f} MiB (+{(peak.max - start) / MIB:.0f}); the other sandbox's stat: "
          f"{len(latencies)} calls, p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.1f} ms (alone before: p50 {percentile(alone, 0.5) * 1000:.1f} ms, "
          f"p99 {p99_alone * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f})")
    assert counts == [300000] * 8
    assert peak.max - start <= 256 * MIB
    # The target is 100 ms, printed above. What this asserts is that no listing holds the server:
    # a listing that did stalls the other sandbox for the listing's whole length (seconds). The
    # prober shares 2 CPUs with 8 listing clients, so its own scheduling makes 100 ms a figure to
    # read, not a bound to assert (it measured 105 ms on a quiet CI run): the bound is 250 ms or
    # five times the same run's p99 alone.
    assert p99 <= max(0.250, 5 * p99_alone)
    for sb in (big, other):
        assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202


def watch_socket(hardened, sb: str):
    url = hardened.url.replace("http://", "ws://") + f"/api/v1/sandboxes/{sb}/files/watch"
    # max_queue=None: the client takes in every frame, so its close never waits behind unread events
    return connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=10, max_queue=None)


def subscribe(ws, path: str, recursive: bool = False) -> dict:
    ws.send(json.dumps({"action": "subscribe", "path": path, "recursive": recursive}))
    while True:
        reply = json.loads(ws.recv(timeout=60))
        if reply.get("type") != "event":
            return reply


def test_200_watch_subscriptions_share_one_inotify_instance(hardened, http):
    sb = claim_sandbox(http)
    pid = hardened.proc.pid
    before = inotify_instances(pid)
    with watch_socket(hardened, sb) as ws:
        replies = [subscribe(ws, "/workspace") for _ in range(200)]
        during = inotify_instances(pid)
        assert all(r["type"] == "subscribed" for r in replies), replies[:3]
        ok(http.post(f"/api/v1/sandboxes/{sb}/files", params={"path": "/workspace/seen"}, content=b"1"), 200)
        event = json.loads(ws.recv(timeout=10))
        assert event["type"] == "event" and event["path"] == "/workspace/seen", event
    print(f"\n200 subscriptions: server inotify instances {before} before, {during} with them open")
    assert during <= 2
    assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202


def test_a_recursive_watch_of_a_300_deep_tree_holds_few_descriptors(hardened, http):
    sb = claim_sandbox(http)
    make_deep(http, sb, 300)
    pid = hardened.proc.pid
    before = open_fds(pid)
    with PeakSampler(pid, open_fds, every_s=0.005) as peak, watch_socket(hardened, sb) as ws:
        reply = subscribe(ws, "/workspace", recursive=True)
        assert reply["type"] == "subscribed", reply
        exited, _ = run_to_exit(http, sb, ["sh", "-c", "cd /workspace/deep && mkdir -p new/a/b && touch new/a/b/f"])
        assert exited["exit_code"] == 0
        seen = set()
        deadline = time.monotonic() + 20
        while "/workspace/deep/new/a/b/f" not in seen and time.monotonic() < deadline:
            seen.add(json.loads(ws.recv(timeout=20)).get("path"))
        held = open_fds(pid)
    print(f"\n300-deep recursive watch: server fds {before} before, peak {peak.max}, {held} while watching")
    assert "/workspace/deep/new/a/b/f" in seen
    assert peak.max <= 2000
    assert http.delete(f"/api/v1/sandboxes/{sb}").status_code == 202
