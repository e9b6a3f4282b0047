"""Slow subscribers (contract §6.13): one stalled stream never slows the server or grows
its memory; it is detached, and the journal still holds every byte."""
from __future__ import annotations

import base64
import hashlib
import socket
import time

from tests.conftest import make_http
from tests.helpers import TOKEN, claim_sandbox, create_session, get_session, ok, spath, wait_for, write_input
from tests.serverproc import ServerProcess

MIB = 1024 * 1024
TOTAL = 60 * MIB
LINE = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def expected_digest() -> str:
    line = (LINE + "\n").encode()
    return hashlib.sha256((line * (TOTAL // len(line) + 1))[:TOTAL]).hexdigest()


def rss_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith(field + ":"):
                return int(row.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def stalled_stream(url: str, path: str) -> tuple[socket.socket, bytes]:
    """An SSE client that reads up to the first heartbeat, then never reads again."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(20)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path}?after=0 HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
                 "Accept: text/event-stream\r\nConnection: close\r\n\r\n".encode())
    head = b""
    while b"\n\n" not in head.partition(b": heartbeat")[2]:  # replayed and subscribed
        chunk = sock.recv(4096)
        assert chunk, head
        head += chunk
    assert head.startswith(b"HTTP/1.1 200"), head
    return sock, head


def read_to_end(sock: socket.socket, deadline: float) -> bytes:
    got = b""
    while time.monotonic() < deadline:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return got
        got += chunk
    raise AssertionError("the detached stream did not end")


def journal_output(http, sb, sid) -> bytes:
    out, after = [], 0
    while True:
        page = ok(http.get(spath(sb, sid, "/events"), params={"after": after, "limit": 10000}), 200)
        out += [base64.b64decode(e["data_base64"]) for e in page["events"] if e["type"] == "output"]
        if not page["events"] or page["events"][-1]["seq"] >= page["cursor"]["latest"]:
            return b"".join(out)
        after = page["events"][-1]["seq"]


def test_a_subscriber_that_never_reads_while_60_mib_stream_past_costs_nothing_and_loses_nothing(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url) as http:
            sb = claim_sandbox(http)
            spec = {"command": ["sh", "-c", f"read go; yes {LINE} | head -c {TOTAL}"],
                    "event_retention": {"max_bytes": 256 * MIB}}
            sid = create_session(http, sb, spec)["id"]
            stalled, _head = stalled_stream(server.url, spath(sb, sid, "/events/stream"))
            baseline = rss_kib(server.proc.pid, "VmRSS")
            write_input(http, sb, sid, "go", data="go\n")
            slowest = 0.0
            while True:  # other calls keep being answered while the output streams past
                started = time.monotonic()
                session = get_session(http, sb, sid)
                ok(http.get(spath(sb)), 200)
                slowest = max(slowest, time.monotonic() - started)
                if session["phase"] == "exited" and "finished_at" in session.get("attempt", {}):
                    break
                assert time.monotonic() - started < 120, session
            grown_mib = (rss_kib(server.proc.pid, "VmHWM") - baseline) / 1024
            print(f"slowest call {slowest * 1000:.0f} ms, peak RSS growth {grown_mib:.0f} MiB")
            assert slowest < 1.0, slowest
            assert grown_mib < 150, grown_mib
            wait_for(lambda: ok(http.get(spath(sb, sid, "/history")), 200)["events"][-1]["type"]
                     == "attempt.exited", timeout=30)
            output = journal_output(http, sb, sid)
            assert len(output) == TOTAL
            assert hashlib.sha256(output).hexdigest() == expected_digest()
            # The stalled stream was detached: once read, it ends instead of going on live.
            sock_data = read_to_end(stalled, time.monotonic() + 30)
            assert len(sock_data) < TOTAL, len(sock_data)
            stalled.close()
    finally:
        server.stop()


def test_an_idle_stream_says_how_far_the_journal_goes_in_its_heartbeat(server, http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    wait_for(lambda: get_session(http, sandbox_id, sid)["phase"] == "running")
    latest = get_session(http, sandbox_id, sid)["cursor"]["latest"]
    sock, head = stalled_stream(server.url, spath(sandbox_id, sid, "/events/stream"))
    sock.close()
    line = head.split(b": heartbeat ", 1)[1].split(b"\n", 1)[0]
    assert int(line) == latest  # caught up: a client can tell its cursor is current
