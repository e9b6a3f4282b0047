"""Limits at the edge (issue 10): a value the store or the clock cannot hold, NUL bytes that
exec would cut, and unbounded sizes are refused with a 4xx naming the limit, and one
tenant's bad request never stops another tenant's writes.
"""
from __future__ import annotations

import base64
import socket
import time

import pytest

from tests.conftest import make_http
from tests.helpers import TOKEN, all_events, output_bytes, run_to_exit, wait_exited, claim_sandbox, create_session, err, ok, spath, wait_for, \
    write_input
from tests.serverproc import ServerProcess

MIB = 1024 * 1024
BIG = 2**63 - 1


@pytest.mark.parametrize("spec,needle", [
    ({"command": ["/bin/echo", "a\0b"]}, "NUL"),
    ({"command": ["/bin/true"], "cwd": "/tmp\0/x"}, "NUL"),
    ({"command": ["/bin/true"], "env": {"A\0B": "1"}}, "NUL"),
    ({"command": ["/bin/true"], "env": {"A": "1\0" + "2"}}, "NUL"),
    ({"command": ["/bin/true"] + ["x"] * 5000}, "4096 arguments"),
    ({"command": ["/bin/true"] + ["x" * (100 * 1024)] * 3}, "262144 bytes"),
    ({"command": ["/bin/true", "x" * (128 * 1024)]}, "longer than 131071 bytes"),
    ({"command": ["/bin/true"], "env": {"X": "x" * (128 * 1024 - 2)}}, "kernel's limit for one string"),
    ({"command": ["/bin/true"], "env": {f"K{i}": "v" for i in range(1100)}}, "1024 variables"),
    ({"command": ["/bin/true"], "lifecycle": {"idle_timeout_seconds": BIG}}, "out of range"),
    ({"command": ["/bin/true"], "lifecycle": {"max_lifetime_seconds": 2**40}}, "out of range"),
    ({"command": ["/bin/true"], "event_retention": {"max_age_seconds": BIG}}, "out of range"),
])
def test_a_spec_outside_the_limits_is_refused_with_a_400_naming_it(http, sandbox_id, spec, needle):
    body = err(http.post(spath(sandbox_id), json=spec), 400, "invalid_request")
    assert needle in body["message"]
    assert ok(http.get(spath(sandbox_id)), 200)["sessions"] == []


def test_an_argument_and_a_variable_just_under_the_kernels_one_string_limit_run(http, sandbox_id):
    # The largest each may be (KEY=value and its NUL in 32 pages): the process starts and sees them.
    value = "v" * (128 * 1024 - 3)
    script = 'printf "%s %s" "${#1}" "${#X}"'
    session = create_session(http, sandbox_id, {"command": ["/bin/sh", "-c", script, "sh", "a" * (128 * 1024 - 1)],
                                                "env": {"X": value}})["id"]
    exited = wait_exited(http, sandbox_id, session, 30)
    assert exited["exit_code"] == 0, exited
    output = output_bytes(all_events(http, sandbox_id, session))
    assert output == f"{128 * 1024 - 1} {len(value)}".encode()


def test_a_context_command_or_variable_over_the_kernels_one_string_limit_is_a_400(http, sandbox_id):
    url = f"/api/v1/sandboxes/{sandbox_id}/contexts"
    body = err(http.post(url, json={"type": "cmd", "cmd": {"command": ["/bin/echo", "x" * (128 * 1024)]}}), 400)
    assert "131071 bytes" in body["message"]
    body = err(http.post(url, json={"type": "cmd", "cmd": {"command": ["/bin/true"]},
                                    "env_vars": {"X": "x" * (128 * 1024)}}), 400)
    assert "131071 bytes" in body["message"]


def test_variables_setenv_cannot_export_are_dropped_at_launch_and_the_session_still_starts(http):
    # Keys that are empty or hold '=' (the sandbox's env_vars as well as the spec's): bwrap's
    # setenv refuses them, which used to end every launch in that sandbox before its command.
    claimed = ok(http.post("/api/v1/sandboxes", json={"template": "default", "config": {
        "env_vars": {"A=B": "sandbox", " ": "blank", "FROM_SANDBOX": "1"}}}), 201, allow_nulls=True)
    sb = claimed["sandbox_id"]
    try:
        exited, out = run_to_exit(http, sb, ["/bin/sh", "-c", 'echo "$FROM_SANDBOX"; env | grep -c "^A=B" || true'])
        assert exited["exit_code"] == 0 and exited.get("reason") != "start_failed", exited
        assert out == b"1\n0\n"
        sid = create_session(http, sb, {"command": ["/bin/sh", "-c", 'echo "$OK"'], "env": {"X=Y": "1", "OK": "2"}})["id"]
        assert wait_exited(http, sb, sid, 30)["exit_code"] == 0
        assert output_bytes(all_events(http, sb, sid)) == b"2\n"
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_a_50_mb_name_is_refused_and_the_list_stays_small(http, sandbox_id):
    body = err(http.post(spath(sandbox_id), json={"name": "n" * 50_000_000, "command": ["/bin/true"]}),
               400, "invalid_request")
    assert "name is longer than 1024 bytes" in body["message"]
    assert len(http.get(spath(sandbox_id)).content) < 1000


@pytest.mark.parametrize("config,needle", [
    ({"ttl": 2**62}, "ttl must be at most"),
    ({"ttl": BIG}, "ttl must be at most"),
    ({"hard_ttl": 2**40}, "hard_ttl must be at most"),
    ({"env_vars": {"A": "x\0y"}}, "NUL"),
])
def test_a_sandbox_config_the_clock_cannot_hold_is_refused(http, sandbox_id, config, needle):
    claimed = err(http.post("/api/v1/sandboxes", json={"template": "default", "config": config}), 400,
                  "bad_request")
    assert needle in claimed["message"]
    updated = err(http.put(f"/api/v1/sandboxes/{sandbox_id}", json={"config": config}), 400, "bad_request")
    assert needle in updated["message"]


def test_a_refresh_longer_than_the_clock_holds_is_refused(http, sandbox_id):
    body = err(http.post(f"/api/v1/sandboxes/{sandbox_id}/refresh", json={"duration": BIG}), 400,
               "bad_request")
    assert "duration must be at most" in body["message"]


def raw_request(url: str, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


def test_a_header_that_is_not_utf8_is_a_400_and_nothing_is_stored(server, http, sandbox_id):
    path = spath(sandbox_id).encode()
    head = (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
            b"\r\nContent-Type: application/json\r\nIdempotency-Key: k\xff\xfe\r\n")
    status, body = raw_request(server.url, head, b'{"command":["/bin/true"]}')
    assert status == 400 and b"invalid_request" in body and b"is not valid UTF-8" in body
    assert ok(http.get(spath(sandbox_id)), 200)["sessions"] == []
    too_long = http.post(spath(sandbox_id), json={"command": ["/bin/true"]},
                         headers={"Idempotency-Key": "k" * 300})
    assert "at most 256 bytes" in err(too_long, 400, "invalid_request")["message"]


# ---- the five poison requests of the issue, on a server of their own -----------------------
def poison_requests(http) -> list[tuple[str, int]]:
    """Each request that used to break every later write; returns (what, status)."""
    out = []
    sb = claim_sandbox(http)
    host, port = http.base_url.host, http.base_url.port
    head = (b"POST " + spath(sb).encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
            TOKEN.encode() + b"\r\nIdempotency-Key: \xff\r\n")
    status, _ = raw_request(f"http://{host}:{port}", head, b'{"command":["/bin/true"]}')
    out.append(("Idempotency-Key 0xff", status))
    out.append(("refresh duration 2^63-1", http.post(f"/api/v1/sandboxes/{sb}/refresh",
                                                     json={"duration": BIG}).status_code))
    out.append(("config.ttl 2^62", http.put(f"/api/v1/sandboxes/{sb}", json={"config": {"ttl": 2**62}}).status_code))
    claim = http.post("/api/v1/sandboxes", json={"template": "default", "config": {"ttl": BIG}})
    out.append(("claim ttl 2^63-1", claim.status_code))
    if claim.status_code == 201:
        out.append(("pause after it", http.post(f"/api/v1/sandboxes/{claim.json()['data']['sandbox_id']}/pause").status_code))
    idle = http.post(spath(sb), json={"command": ["sleep", "60"], "lifecycle": {"idle_timeout_seconds": BIG}})
    out.append(("idle_timeout_seconds 2^63-1", idle.status_code))
    if idle.status_code == 201:
        out.append(("pause after it", http.post(f"/api/v1/sandboxes/{sb}/pause").status_code))
    return out


def test_the_five_poison_requests_cost_a_4xx_and_every_other_write_goes_on(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url) as http:
            bystander = claim_sandbox(http)
            cat = create_session(http, bystander, {"command": ["cat"]})["id"]
            outcomes = poison_requests(http)
            assert all(400 <= status < 500 for _, status in outcomes), outcomes
            for i in range(10):
                write_input(http, bystander, cat, f"in-{i}", f"line {i}\n".encode())
            wait_for(lambda: all(f"line {i}\n".encode() in echoed(http, bystander, cat) for i in range(10)))
            create_session(http, bystander, {"command": ["/bin/true"]})
            claim_sandbox(http)
            listed = ok(http.get("/api/v1/sandboxes"), 200)["count"]
        for _ in range(2):
            server.stop()
            server.start()
        with make_http(server.url) as http:
            assert ok(http.get("/api/v1/sandboxes"), 200)["count"] == listed
            accepted = {e["input_id"] for e in all_events(http, bystander, cat) if e["type"] == "input.accepted"}
            assert {f"in-{i}" for i in range(10)} <= accepted
    finally:
        server.stop()


def echoed(http, sb, sid) -> bytes:
    return b"".join(base64.b64decode(e["data_base64"]) for e in all_events(http, sb, sid)
                    if e["type"] == "output")


# ---- memory and disk bounds ----------------------------------------------------------------
def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for row in status:
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) / 1024
    return 0.0


def test_queued_stdin_is_bounded_in_bytes_and_memory_stays_below_it(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url) as http:
            http.timeout = 120
            sb = claim_sandbox(http)
            sid = create_session(http, sb, {"command": ["sleep", "300"]})["id"]
            before = rss_mib(server.proc.pid)
            chunk = base64.b64encode(b"\x07" * (48 * MIB)).decode()
            statuses = [http.post(spath(sb, sid, "/inputs"), json={"input_id": f"big-{i}", "data_base64": chunk}).status_code
                        for i in range(8)]
            accepted = statuses.count(202)
            assert 429 in statuses and accepted * 48 < 256, statuses
            assert all(s in (202, 429) for s in statuses), statuses
            body = http.post(spath(sb, sid, "/inputs"), json={"input_id": "big-x", "data_base64": chunk})
            assert err(body, 429, "input_buffer_full")
            grown = rss_mib(server.proc.pid) - before
            assert grown < 256, f"RSS grew {grown:.0f} MiB with {accepted} x 48 MiB queued"
    finally:
        server.stop()


def test_retention_keeps_the_store_on_disk_within_its_limit_after_400_mib_of_output(tmp_path):
    server = ServerProcess(tmp_path / "data", token=TOKEN, runtime="host").start()
    try:
        with make_http(server.url) as http:
            sb = claim_sandbox(http)
            sid = create_session(http, sb, {"command": ["head", "-c", str(400 * MIB), "/dev/urandom"]})["id"]
            wait_for(lambda: any(e["type"] == "attempt.exited" for e in
                                 ok(http.get(spath(sb, sid, "/history")), 200)["events"]), timeout=240)
            state = tmp_path / "data" / "sandboxes" / sb / "state"

            def on_disk() -> int:
                return sum(p.stat().st_blocks * 512 for p in state.iterdir())
            deadline = time.monotonic() + 60  # the sweep after the last trim
            while on_disk() >= 128 * MIB and time.monotonic() < deadline:
                time.sleep(0.5)
            assert on_disk() < 128 * MIB, f"store is {on_disk() / MIB:.0f} MiB on disk"
    finally:
        server.stop()
