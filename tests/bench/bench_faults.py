"""The bounds of issue 10, measured: a flood next to a small writer, server memory after
abuse, and the store's size on disk against what retention keeps.

- ``fairness``: another sandbox's input-to-echo p50/p99 with and without a
  ``cat /dev/urandom`` flood running next to it (the ratio is the figure).
- ``rss``: server RSS after N GETs on unknown sandbox ids, and after an input storm of
  48 MiB inputs to ``sleep 300`` (most get 429: queued stdin is bounded in bytes).
- ``store``: incompressible output through a default-retention session; the store's
  files on disk against the logical bytes its window holds.
"""
from __future__ import annotations

import base64
import http.client
import time
from pathlib import Path

import orjson

from tests.helpers import spath

from .bench_echo import HEADERS, echo_round_trips
from .common import MIB, BenchServer, Report, percentile, rss_kib


def fairness(work: Path, count: int, warmup: int) -> Report:
    report = Report(f"Fairness: echo in one sandbox, alone and next to a cat /dev/urandom flood ({count} each)")
    with BenchServer(work / "fair") as server:
        quiet_sb, flood_sb = server.sandbox(), server.sandbox()
        alone = echo_round_trips(server, quiet_sb, count, warmup)[0]
        flood = server.create(flood_sb, {"command": ["cat", "/dev/urandom"]})
        time.sleep(1.0)  # the flood is at full speed before the first sample
        flooded = echo_round_trips(server, quiet_sb, count, warmup)[0]
        latest = orjson.loads(server.http.get(spath(flood_sb, flood)).content)["data"]["cursor"]["latest"]
        server.http.delete(spath(flood_sb, flood))
    for q in (50, 99):
        report.figure(f"echo alone p{q}", "ms", higher_is_better=False).runs.append(percentile(alone, q) * 1000)
        report.figure(f"echo next to a flood p{q}", "ms", baseline=f"echo alone p{q}",
                      higher_is_better=False).runs.append(percentile(flooded, q) * 1000)
    report.notes.append(f"the flood committed {latest} events meanwhile: while others write, its reader "
                        "pauses at 256 KiB uncommitted and a tick takes at most 256 KiB of it")
    return report


def _get_unknown(conn: http.client.HTTPConnection, i: int) -> int:
    conn.request("GET", f"/api/v1/sandboxes/sb-{i:08x}-404/sessions", headers=HEADERS)
    response = conn.getresponse()
    response.read()
    return response.status


def rss(work: Path, unknown_ids: int, storm_bytes: int) -> Report:
    report = Report(f"Server RSS: {unknown_ids:,} unknown-id requests; a {storm_bytes // MIB} MiB input storm")
    with BenchServer(work / "rss") as server:
        host, port = server.url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port))
        for i in range(200):  # warm the server's caches and allocator first
            _get_unknown(conn, 10**8 + i)
        start = rss_kib(server.pid) / 1024
        report.figure("RSS at start", "MiB", higher_is_better=False).runs.append(start)
        statuses = {_get_unknown(conn, i) for i in range(unknown_ids)}
        after_ids = rss_kib(server.pid) / 1024
        report.figure(f"RSS after {unknown_ids:,} unknown ids", "MiB", baseline="RSS at start",
                      higher_is_better=False).runs.append(after_ids)
        conn.close()
        sb = server.sandbox()
        sid = server.create(sb, {"command": ["sleep", "300"]})
        chunk = base64.b64encode(b"\x07" * (48 * MIB)).decode()
        answers: dict[int, int] = {}
        for i in range(max(1, storm_bytes // (48 * MIB))):
            body = {"input_id": f"storm-{i}", "data_base64": chunk}
            status = server.http.post(spath(sb, sid, "/inputs"), json=body).status_code
            answers[status] = answers.get(status, 0) + 1
        after_storm = rss_kib(server.pid) / 1024
        report.figure("RSS after the input storm", "MiB", baseline="RSS at start",
                      higher_is_better=False).runs.append(after_storm)
        peak = rss_kib(server.pid, "VmHWM") / 1024
        report.figure("peak RSS (VmHWM)", "MiB", baseline="RSS at start", higher_is_better=False).runs.append(peak)
    report.notes.append(f"unknown ids answered {sorted(statuses)}; storm answers {answers} "
                        "(one 48 MiB input queued, the rest 429 input_buffer_full)")
    return report


def store_size(work: Path, output_bytes: int) -> Report:
    report = Report(f"Store on disk after {output_bytes // MIB} MiB of /dev/urandom output, default retention")
    with BenchServer(work / "store") as server:
        sb = server.sandbox()
        sid = server.create(sb, {"command": ["head", "-c", str(output_bytes), "/dev/urandom"]})
        server.wait_exited(sb, sid, interval=0.1)
        state = server.proc.data_dir / "sandboxes" / sb / "state"
        on_disk = _settled_size(state)
        retained = _retained_bytes(server, sb, sid)
    report.figure("logical bytes retained (public JSONL)", "MiB").runs.append(retained / MIB)
    report.figure("store files on disk", "MiB", baseline="logical bytes retained (public JSONL)",
                  higher_is_better=False).runs.append(on_disk / MIB)
    report.notes.append("the journal holds raw bytes, the logical size counts them base64-encoded "
                        "(4/3); on top: up to 8 MiB of free pages kept, an 8 MiB WAL, and the "
                        "newest segment file of each session (output bytes out of line, up to 16 MiB)")
    return report


def _settled_size(state: Path, timeout: float = 60.0) -> int:
    """Allocated bytes of the store's files once retention's sweep has run (stable for 3 s)."""
    deadline = time.monotonic() + timeout
    last, stable_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = _allocated(state)
        if size != last:
            last, stable_since = size, time.monotonic()
        elif time.monotonic() - stable_since >= 3.0:
            break
        time.sleep(0.25)
    return last


def _allocated(directory: Path) -> int:
    """Allocated bytes of every file under ``directory`` (the journal, its WAL, segments/)."""
    total = 0
    for path in directory.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_blocks * 512
        except FileNotFoundError:  # retention unlinked it meanwhile
            pass
    return total


def _retained_bytes(server: BenchServer, sb: str, sid: str) -> int:
    cursor = orjson.loads(server.http.get(spath(sb, sid)).content)["data"]["cursor"]
    total, after = 0, cursor["earliest"] - 1
    while True:
        page = orjson.loads(server.http.get(spath(sb, sid, "/events"), params={"after": after}).content)["data"]
        for event in page["events"]:
            total += len(orjson.dumps(event)) + 1
        if not page["events"] or page["events"][-1]["seq"] >= page["cursor"]["latest"]:
            return total
        after = page["events"][-1]["seq"]
