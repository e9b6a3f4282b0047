"""Input round trip: POST an input to a ``cat`` session, time until its echo is seen on SSE.

The 202 comes after ``input.accepted`` is committed and the echo reaches subscribers
only after its ``output`` event is committed (D4), so one round trip holds two durable
commits. Measured in the same run: the pipe floor (a Python parent writing to ``cat``
and reading back, users-and-baselines.md §4.5), one HTTP request to the same server
(GET /healthz), and one SQLite commit with ``synchronous=FULL`` (WAL) on the data disk.
"""
from __future__ import annotations

import base64
import http.client
import os
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import orjson

from tests.helpers import TOKEN, spath

from .common import BenchServer, Report, percentile

HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


def pipe_floor(count: int) -> list[float]:
    child = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    samples = []
    try:
        for i in range(count):
            line = b"%08d\n" % i
            started = time.perf_counter()
            os.write(child.stdin.fileno(), line)
            got = b""
            while len(got) < len(line):
                got += os.read(child.stdout.fileno(), 64)
            samples.append(time.perf_counter() - started)
    finally:
        child.stdin.close()
        child.wait()
    return samples


def commit_floor(directory: Path, count: int) -> list[float]:
    path = directory / "commit-floor.sqlite"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS t (x BLOB)")
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        db.execute("BEGIN")
        db.execute("INSERT INTO t VALUES (?)", (b"x" * 200,))
        db.execute("COMMIT")
        samples.append(time.perf_counter() - started)
    db.close()
    return samples


class SSEWatch:
    """A raw SSE connection read on demand in this thread (no reader thread to wake)."""

    def __init__(self, url: str, path: str, after: int) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(f"GET {path}?after={after} HTTP/1.1\r\nHost: {host}\r\n"
                          f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n".encode())
        self.buffer = b""
        self.wait_for(b": heartbeat")

    def wait_for(self, marker: bytes, timeout: float = 30.0) -> None:
        self.sock.settimeout(timeout)
        while marker not in self.buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("SSE stream ended")
            self.buffer = self.buffer[-256:] + chunk
        self.buffer = self.buffer[self.buffer.index(marker) + len(marker):]

    def close(self) -> None:
        self.sock.close()


def echo_round_trips(server: BenchServer, sb: str, count: int,
                     warmup: int) -> tuple[list[float], list[float], list[float]]:
    """Round trips, HTTP GETs, and the POST-to-202 share of each round trip."""
    sid = server.create(sb, {"command": ["cat"]})
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))
    latest = orjson.loads(server.http.get(spath(sb, sid)).content)["data"]["cursor"]["latest"]
    watch = SSEWatch(server.url, spath(sb, sid, "/events/stream"), latest)
    samples, http_samples, accepted = [], [], []
    try:
        for i in range(warmup + count):
            line = b"%08d\n" % i
            body = orjson.dumps({"input_id": f"e{i}", "data_base64": base64.b64encode(line).decode()})
            started = time.perf_counter()
            conn.request("POST", spath(sb, sid, "/inputs"), body=body, headers=HEADERS)
            response = conn.getresponse()
            response.read()
            answered = time.perf_counter()
            assert response.status == 202, response.status
            watch.wait_for(base64.b64encode(line))
            if i >= warmup:
                samples.append(time.perf_counter() - started)
                accepted.append(answered - started)
            started = time.perf_counter()
            conn.request("GET", "/healthz", headers=HEADERS)
            conn.getresponse().read()
            if i >= warmup:
                http_samples.append(time.perf_counter() - started)
    finally:
        watch.close()
        conn.close()
    return samples, http_samples, accepted


def echo_latency(work: Path, count: int, warmup: int) -> Report:
    report = Report(f"Input POST to echo seen on SSE through cat ({count} round trips)")
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        ours, http_rtt, accepted = echo_round_trips(server, sb, count, warmup)
    floor = pipe_floor(count + warmup)[warmup:]
    commits = commit_floor(work, count + warmup)[warmup:]
    rows = [("pipe floor (write/read cat)", floor), ("HTTP GET /healthz", http_rtt),
            ("SQLite FULL commit", commits), ("ours: POST input to SSE echo", ours),
            ("ours: POST input to its 202 (1 commit)", accepted),
            ("ours: 202 to the echo on SSE (1 commit)", [a - b for a, b in zip(ours, accepted)])]
    for q in (50, 99):
        for name, samples in rows:
            baseline = ("pipe floor (write/read cat) p%d" % q, "SQLite FULL commit p%d" % q) \
                if name.startswith("ours") else ()
            report.figure(f"{name} p{q}", "ms", baseline=baseline, higher_is_better=False).runs.append(
                percentile(samples, q) * 1000)
    report.notes.append("ours holds two durable commits per round trip (input.accepted before the "
                        "202, the echo's output before SSE): its floor is 2x the commit row")
    return report
