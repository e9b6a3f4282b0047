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

import httpx
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


class RawEcho:
    """A ``cat`` session driven by http.client for the POST and a raw socket for the SSE."""

    def __init__(self, server: BenchServer, sb: str, tag: str = "r") -> None:
        self.sb, self.tag = sb, tag
        self.sid = server.create(sb, {"command": ["cat"]})
        host, port = server.url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port))
        latest = orjson.loads(server.http.get(spath(sb, self.sid)).content)["data"]["cursor"]["latest"]
        self.watch = SSEWatch(server.url, spath(sb, self.sid, "/events/stream"), latest)

    def round_trip(self, i: int) -> tuple[float, float]:
        """Seconds to the echo on SSE, and to the 202."""
        line = b"%s%08d\n" % (self.tag.encode(), i)
        body = orjson.dumps({"input_id": f"{self.tag}{i}", "data_base64": base64.b64encode(line).decode()})
        started = time.perf_counter()
        self.conn.request("POST", spath(self.sb, self.sid, "/inputs"), body=body, headers=HEADERS)
        response = self.conn.getresponse()
        response.read()
        answered = time.perf_counter()
        assert response.status == 202, response.status
        self.watch.wait_for(base64.b64encode(line))
        return time.perf_counter() - started, answered - started

    def healthz(self) -> float:
        started = time.perf_counter()
        self.conn.request("GET", "/healthz", headers=HEADERS)
        self.conn.getresponse().read()
        return time.perf_counter() - started

    def close(self) -> None:
        self.watch.close()
        self.conn.close()


class HttpxEcho:
    """A ``cat`` session driven the way the SDKs drive one: one keep-alive ``httpx.Client``,
    the SSE stream opened once (``send(stream=True)``, read with ``iter_lines``), then for
    each input a POST and the stream read on until the echo's event."""

    def __init__(self, server: BenchServer, sb: str, tag: str = "h") -> None:
        self.sb, self.tag = sb, tag
        self.sid = server.create(sb, {"command": ["cat"]})
        self.client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                   timeout=30.0)
        latest = self.client.get(spath(sb, self.sid)).json()["data"]["cursor"]["latest"]
        request = self.client.build_request("GET", spath(sb, self.sid, "/events/stream"),
                                            params={"after": str(latest)},
                                            headers={"Accept": "text/event-stream"})
        self.stream = self.client.send(request, stream=True)
        self.lines = self.stream.iter_lines()

    def round_trip(self, i: int) -> tuple[float, float]:
        line = b"%s%08d\n" % (self.tag.encode(), i)
        encoded = base64.b64encode(line).decode()
        body = {"input_id": f"{self.tag}{i}", "data_base64": encoded}
        started = time.perf_counter()
        response = self.client.post(spath(self.sb, self.sid, "/inputs"), json=body)
        answered = time.perf_counter()
        assert response.status_code == 202, response.status_code
        for text in self.lines:
            if text.startswith("data:") and encoded in text:
                break
        return time.perf_counter() - started, answered - started

    def healthz(self) -> float:
        started = time.perf_counter()
        self.client.get("/healthz")
        return time.perf_counter() - started

    def close(self) -> None:
        self.stream.close()
        self.client.close()


def echo_round_trips(server: BenchServer, sb: str, count: int,
                     warmup: int) -> tuple[list[float], list[float], list[float]]:
    """Round trips, HTTP GETs, and the POST-to-202 share of each round trip."""
    echo = RawEcho(server, sb)
    samples, http_samples, accepted = [], [], []
    try:
        for i in range(warmup + count):
            total, answered = echo.round_trip(i)
            get = echo.healthz()
            if i >= warmup:
                samples.append(total)
                accepted.append(answered)
                http_samples.append(get)
    finally:
        echo.close()
    return samples, http_samples, accepted


def interleaved_round_trips(server: BenchServer, sb: str, count: int, warmup: int) -> dict[str, list[float]]:
    """The raw-socket and the httpx client, each on its own ``cat`` session, one round trip
    of each in turn (and a GET /healthz), so both see the same machine."""
    raw, sdk = RawEcho(server, sb), HttpxEcho(server, sb)
    out: dict[str, list[float]] = {k: [] for k in ("raw", "raw 202", "httpx", "httpx 202", "get", "httpx get")}
    try:
        for i in range(warmup + count):
            total, answered = raw.round_trip(i)
            get = raw.healthz()
            sdk_total, sdk_answered = sdk.round_trip(i)
            sdk_get = sdk.healthz()
            if i >= warmup:
                for key, value in (("raw", total), ("raw 202", answered), ("httpx", sdk_total),
                                   ("httpx 202", sdk_answered), ("get", get), ("httpx get", sdk_get)):
                    out[key].append(value)
    finally:
        raw.close()
        sdk.close()
    return out


def echo_latency(work: Path, count: int, warmup: int) -> Report:
    report = Report(f"Input POST to echo seen on SSE through cat ({count} round trips)")
    with BenchServer(work / "ours") as server:
        sb = server.sandbox()
        measured = interleaved_round_trips(server, sb, count, warmup)
    ours, http_rtt, accepted = measured["raw"], measured["get"], measured["raw 202"]
    sdk, sdk_accepted = measured["httpx"], measured["httpx 202"]
    floor = pipe_floor(count + warmup)[warmup:]
    commits = commit_floor(work, count + warmup)[warmup:]
    floors = ("pipe floor (write/read cat)", "SQLite FULL commit")
    raw_total, raw_202, raw_echo = ("ours: POST input to SSE echo", "ours: POST input to its 202 (1 commit)",
                                    "ours: 202 to the echo on SSE (1 commit)")
    rows = [(floors[0], floor, ()), ("HTTP GET /healthz", http_rtt, ()),
            # what the client itself adds: the same GET through httpx
            ("HTTP GET /healthz through httpx", measured["httpx get"], ("HTTP GET /healthz",)), (floors[1], commits, ()),
            (raw_total, ours, floors), (raw_202, accepted, floors),
            (raw_echo, [a - b for a, b in zip(ours, accepted)], floors),
            # the httpx rows against the same step of the raw-socket client
            ("ours, httpx client: POST input to SSE echo", sdk, (raw_total, *floors)),
            ("ours, httpx client: POST input to its 202", sdk_accepted, (raw_202,)),
            ("ours, httpx client: 202 to the echo on SSE", [a - b for a, b in zip(sdk, sdk_accepted)], (raw_echo,))]
    for q in (50, 99):
        for name, samples, baselines in rows:
            report.figure(f"{name} p{q}", "ms", baseline=tuple(f"{b} p{q}" for b in baselines),
                          higher_is_better=False).runs.append(percentile(samples, q) * 1000)
    report.notes.append("ours holds two durable commits per round trip (input.accepted before the "
                        "202, the echo's output before SSE): its floor is 2x the commit row")
    return report
