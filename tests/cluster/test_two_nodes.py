"""Issue 15's acceptance, on two real ``sessiond`` nodes sharing one PostgreSQL database and one
checkpoint dir: a sandbox claimed on one node is used through the other (forwarded HTTP, SSE and
WebSockets), moves with pause and resume, and is taken over when its node dies; the dead node,
restarted, runs none of it and writes nothing into its journal."""
from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from tests.helpers import (b64, claim_sandbox, create_session, get_session, ok, output_bytes, wait_for,
                           workspace_dir, write_input)

from .conftest import LEASE_SECONDS, TOKEN, node


def ancestors(pid: int) -> list[int]:
    """The parent chain of a process (which node's server started it)."""
    chain = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
        chain.append(pid)
    return chain


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def journal(http: httpx.Client, sb: str, sid: str) -> list[dict]:
    return ok(http.get(f"/api/v1/sandboxes/{sb}/sessions/{sid}/events", params={"after": 0, "limit": 10000}), 200)["events"]


def types(events: list[dict]) -> list[str]:
    return [e["type"] + (f":{e['reason']}" if e.get("reason") else "") for e in events]


def wait_output(http, sb, sid, needle: bytes, timeout=15):
    return wait_for(lambda: needle in output_bytes(journal(http, sb, sid)), timeout=timeout,
                    describe=lambda: types(journal(http, sb, sid)))


def test_a_sandbox_claimed_on_one_node_is_fully_usable_through_the_other(two_nodes):
    a, b = two_nodes
    with a.client() as on_a, b.client() as on_b:
        sb = claim_sandbox(on_a)
        session = create_session(on_b, sb, {"command": ["/bin/cat"]})  # created through B, runs on A
        sid = session["id"]
        assert a.server.proc.pid in ancestors(get_session(on_b, sb, sid)["attempt"]["pid"])
        write_input(on_b, sb, sid, "through-b", b"hello from b\n")
        wait_output(on_b, sb, sid, b"hello from b\n")
        page = ok(on_b.get(f"/api/v1/sandboxes/{sb}/sessions/{sid}/events", params={"after": 0}), 200)
        assert "input.accepted" in types(page["events"]) and page["cursor"]["latest"] >= 5

        # SSE through B: the replay of what A committed, then live events.
        with on_b.stream("GET", f"/api/v1/sandboxes/{sb}/sessions/{sid}/events/stream",
                         params={"after": 0}, timeout=15) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            seen = b""
            for chunk in stream.iter_bytes():
                seen += chunk
                if b"event: output" in seen:
                    break
        assert b"event: session.created" in seen and b"event: input.accepted" in seen

        # The Sandbox0 WebSocket through B: an input frame acked, its echo as an event frame.
        url = b.url.replace("http", "ws") + f"/api/v1/sandboxes/{sb}/sessions/{sid}/ws?after=0"
        with ws_connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=10) as ws:
            ws.send(json.dumps({"type": "input", "request_id": "r1", "input_id": "ws-b",
                                "data_base64": b64(b"over the websocket\n")}))
            deadline = time.monotonic() + 15
            acked = echoed = False
            while not (acked and echoed):
                frame = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
                acked |= frame.get("type") == "ack" and frame.get("request_id") == "r1"
                event = frame.get("event") or {}
                echoed |= event.get("type") == "output" and b"over the websocket" in __import__("base64").b64decode(
                    event.get("data_base64", ""))

        # AeroLVM attach through B: stdin in, stdout frames out, on A's process.
        attach = b.url.replace("http", "ws") + f"/v1/sandboxes/{sb}/sessions/{sid}/attach"
        with ws_connect(attach, additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=10) as ws:
            ws.send(b"attached\n")
            got = b""
            deadline = time.monotonic() + 15
            while b"attached\n" not in got:
                message = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
                if isinstance(message, bytes) and message[:1] == b"\x01":
                    got += message[1:]
        assert b"attached\n" in output_bytes(journal(on_a, sb, sid))
        ok(on_b.delete(f"/api/v1/sandboxes/{sb}"), 202)
        assert on_a.get(f"/api/v1/sandboxes/{sb}").status_code == 404


def test_pause_on_one_node_and_resume_through_the_other_moves_the_sandbox_with_its_workspace(two_nodes):
    a, b = two_nodes
    with a.client() as on_a, b.client() as on_b:
        sb = claim_sandbox(on_a)
        sid = create_session(on_a, sb, {"command": ["sh", "-c", "echo kept > note.txt; exec cat"]})["id"]
        wait_for(lambda: (workspace_dir(a.server.data_dir, sb) / "note.txt").exists())
        before = get_session(on_a, sb, sid)
        old_pid, generation = before["attempt"]["pid"], before["runtime_generation"]
        latest = journal(on_a, sb, sid)[-1]["seq"]
        ok(on_a.post(f"/api/v1/sandboxes/{sb}/pause"), 200)
        wait_for(lambda: not alive(old_pid), timeout=10)
        ok(on_b.post(f"/api/v1/sandboxes/{sb}/resume"), 200)

        after = wait_for(lambda: (s := get_session(on_b, sb, sid))["phase"] == "running" and s, timeout=15)
        assert after["runtime_generation"] == generation + 1
        assert b.server.proc.pid in ancestors(after["attempt"]["pid"])
        assert a.server.proc.pid not in ancestors(after["attempt"]["pid"])
        assert (workspace_dir(b.server.data_dir, sb) / "note.txt").read_text() == "kept\n"
        events = journal(on_a, sb, sid)
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1)) and events[-1]["seq"] > latest
        assert "attempt.exited:runtime_replaced" in types(events)
        write_input(on_a, sb, sid, "through-a", b"to b's process\n")  # forwarded from A to B
        wait_output(on_a, sb, sid, b"to b's process\n")
        ok(on_a.delete(f"/api/v1/sandboxes/{sb}"), 202)


def test_a_killed_owner_is_taken_over_after_its_lease_expires_and_keeps_every_acknowledged_input(two_nodes):
    a, b = two_nodes
    with a.client() as on_a, b.client() as on_b:
        sb = claim_sandbox(on_b)
        sid = create_session(on_b, sb, {"command": ["/bin/cat"]})["id"]
        acknowledged = [f"in-{n}" for n in range(20)]
        for input_id in acknowledged:
            write_input(on_b, sb, sid, input_id, f"{input_id}\n".encode())
        old = get_session(on_b, sb, sid)
        b.server.kill()
        killed_at = time.monotonic()
        # The first call through A after the lease ran out takes the sandbox over.
        recovered = wait_for(lambda: (r := on_a.get(f"/api/v1/sandboxes/{sb}/sessions/{sid}")).status_code == 200
                             and r.json()["data"]["runtime_generation"] > old["runtime_generation"]
                             and r.json()["data"], timeout=LEASE_SECONDS * 6, interval=0.2)
        assert time.monotonic() - killed_at >= LEASE_SECONDS * 0.5  # not before the lease ran out
        assert a.server.proc.pid in ancestors(recovered["attempt"]["pid"])
        events = journal(on_a, sb, sid)
        accepted = [e["input_id"] for e in events if e["type"] == "input.accepted"]
        assert accepted == acknowledged
        assert "attempt.exited:runtime_replaced" in types(events)
        assert types(events)[-3:] == ["attempt.starting:runtime_recovered", "attempt.started", "session.ready"]


def test_the_killed_node_restarted_runs_nothing_that_was_taken_over_and_forwards_to_the_new_owner(two_nodes):
    a, b = two_nodes
    with a.client() as on_a:
        sb = claim_sandbox(on_a)
        sid = create_session(on_a, sb, {"command": ["/bin/cat"]})["id"]
        a.server.kill()
        with b.client() as on_b:
            wait_for(lambda: on_b.get(f"/api/v1/sandboxes/{sb}/sessions/{sid}").json().get("data", {})
                     .get("runtime_generation", 0) >= 2, timeout=LEASE_SECONDS * 6, interval=0.2)
            latest = journal(on_b, sb, sid)[-1]["seq"]
            a.server.restart()
            time.sleep(LEASE_SECONDS)  # a renewal round of the restarted node
            now = get_session(on_b, sb, sid)
            assert b.server.proc.pid in ancestors(now["attempt"]["pid"])
            assert not (a.server.data_dir / "sandboxes" / sb).exists() or a.server.proc.pid not in \
                ancestors(now["attempt"]["pid"])
            assert journal(on_b, sb, sid)[-1]["seq"] == latest  # the restarted node wrote nothing
            write_input(on_a, sb, sid, "via-restarted-a", b"forwarded\n")  # it forwards to B
            wait_output(on_b, sb, sid, b"forwarded\n")


def taken_over(http, sb, sid, stale_attempt):
    try:
        response = http.get(f"/api/v1/sandboxes/{sb}/sessions/{sid}")
    except httpx.TimeoutException:
        return None
    if response.status_code != 200 or response.json()["data"]["attempt"]["id"] == stale_attempt:
        return None
    return response.json()["data"]


def test_a_stale_owner_that_wakes_up_after_a_takeover_is_refused_by_the_epoch_and_ends_its_processes(two_nodes):
    """SIGSTOP the owner (a long GC pause, a partition): its lease runs out, the other node takes
    the sandbox over; when it wakes up its buffered output's commit is refused by the epoch, its
    lease renewal fails, and it kills what it was running. The journal holds nothing of it after
    the takeover."""
    a, b = two_nodes
    with a.client() as on_a, b.client() as on_b:
        sb = claim_sandbox(on_b)
        sid = create_session(on_b, sb, {"command": ["sh", "-c", "while :; do echo tick; sleep 0.1; done"]})["id"]
        wait_output(on_b, sb, sid, b"tick")
        stale = get_session(on_b, sb, sid)["attempt"]
        os.kill(b.server.proc.pid, signal.SIGSTOP)
        try:
            # Until its lease runs out the stopped node still owns the sandbox: calls forwarded
            # to it wait (so each try here is short); then A takes the sandbox over.
            with a.client(timeout=1.0) as polling:
                taken = wait_for(lambda: taken_over(polling, sb, sid, stale["id"]), timeout=LEASE_SECONDS * 8,
                                 interval=0.2)
            takeover = [e for e in journal(on_a, sb, sid) if e["type"] == "attempt.exited"][-1]["seq"]
        finally:
            os.kill(b.server.proc.pid, signal.SIGCONT)
        wait_for(lambda: not alive(stale["pid"]), timeout=LEASE_SECONDS * 4)  # the stale node ended it
        wait_output(on_a, sb, sid, b"tick", timeout=10)
        later = [e for e in journal(on_a, sb, sid) if e["seq"] > takeover]
        assert later and all(e.get("attempt_id") in (None, taken["attempt"]["id"]) for e in later), types(later)
        assert all(e["runtime_generation"] == taken["runtime_generation"] for e in later)
        # Its next renewal round says so (a round in flight when it was stopped ends first).
        wait_for(lambda: "lease was taken over by another node" in b.server.log_path.read_text(),
                 timeout=LEASE_SECONDS * 2)


@pytest.mark.parametrize("through", ["node-a", "node-b"])
def test_the_official_sdk_quickstart_passes_against_either_node(two_nodes, through):
    import base64

    import sandbox0
    from sandbox0.apispec.models.execution_session_input_request import ExecutionSessionInputRequest
    from sandbox0.apispec.models.execution_session_spec import ExecutionSessionSpec
    from sandbox0.sandbox import Sandbox

    a, b = two_nodes
    near = a if through == "node-a" else b
    far = b if near is a else a
    claimer = sandbox0.Client(token=TOKEN, base_url=far.url, timeout=15.0)
    client = sandbox0.Client(token=TOKEN, base_url=near.url, timeout=15.0)
    try:
        claimed = claimer.sandboxes.claim("default")  # runs on the far node, used through the near one
        sandbox = Sandbox(id=claimed.id, client=client, template=claimed.template, cluster_id=None,
                          runtime_id=claimed.runtime_id, status=claimed.status)
        session = sandbox.create_session(ExecutionSessionSpec(command=["/bin/cat"]))
        with sandbox.watch_session_events(session.id) as stream:
            sandbox.write_session_input(session.id, ExecutionSessionInputRequest(
                input_id="i1", data_base64=base64.b64encode(b"hello\n").decode(), eof=True,
                expected_attempt_id=session.attempt.id))
            seen = []
            for event in stream.iter_events():
                seen.append(event)
                if event.type_ == "attempt.exited":
                    break
        assert b"".join(base64.b64decode(e.data_base64) for e in seen if e.type_ == "output") == b"hello\n"
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1)) and seen[-1].exit_code == 0
        client.sandboxes.delete(sandbox.id)
    finally:
        client.close()
        claimer.close()


def test_a_second_node_alone_refuses_to_start_without_a_checkpoint_dir(tmp_path, pg_url):
    from tests.serverproc import ServerError

    lonely = node("node-c", tmp_path, pg_url, tmp_path / "missing")
    lonely.server.start_timeout = 5
    with pytest.raises(ServerError, match="checkpoint dir"):
        lonely.server.start()


def test_a_node_that_cannot_renew_its_leases_says_so_on_healthz_and_recovers(two_nodes, pg_cluster, pg_url):
    a, _b = two_nodes
    database = pg_url.split("?")[0].rsplit("/", 1)[1]
    with httpx.Client(base_url=a.url, timeout=5) as http:
        assert ok(http.get("/healthz"), 200) == {"status": "ok", "node": "node-a"}
        pg_cluster.sql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
        try:
            pg_cluster.sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
            down = wait_for(lambda: (r := http.get("/healthz")).status_code == 503 and r.json()["data"],
                            timeout=LEASE_SECONDS * 4)
            assert down["status"] == "database_unreachable" and down["node"] == "node-a"
        finally:
            pg_cluster.sql(f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        wait_for(lambda: http.get("/healthz").status_code == 200, timeout=LEASE_SECONDS * 4)
