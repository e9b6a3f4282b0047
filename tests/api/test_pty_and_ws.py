"""PTY sessions, terminal resize and the session WebSocket (contract §1.10, §1.13, §5, §6.10, §6.11).

Black-box against a real server: the official ``sandbox0`` SDK where the issue asks for
it, a raw ``websockets`` client where frames, close codes and timing of reads matter.
"""
from __future__ import annotations

import base64
import json
import queue
import threading
import time
from contextlib import ExitStack

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from sandbox0 import SessionWebSocketOptions
from sandbox0.apispec.models.execution_session_io_mode import ExecutionSessionIOMode
from sandbox0.apispec.models.execution_session_spec import ExecutionSessionSpec
from sandbox0.apispec.models.execution_session_web_socket_input import ExecutionSessionWebSocketInput
from sandbox0.apispec.models.execution_session_web_socket_input_type import (
    ExecutionSessionWebSocketInputType,
)
from sandbox0.apispec.models.execution_session_web_socket_resize import ExecutionSessionWebSocketResize
from sandbox0.apispec.models.execution_session_web_socket_resize_type import (
    ExecutionSessionWebSocketResizeType,
)
from tests.helpers import (
    TOKEN, all_events, b64, create_session, err, get_session, ok, output_bytes, spath, wait_event,
    wait_exited, wait_for, write_input,
)
from tests.serverproc import ServerProcess

BASH = ["bash", "--noprofile", "--norc"]
PROMPT_ENV = {"PS1": "$ ", "HOME": "/tmp"}


def pty_spec(argv, rows=24, cols=80, term=None, **extra) -> dict:
    terminal = {"rows": rows, "cols": cols, **({"term": term} if term else {})}
    return {"command": argv, "io": {"mode": "pty", "terminal": terminal}, **extra}


def ws_url(server, sb, sid, after=None) -> str:
    url = server.url.replace("http://", "ws://") + spath(sb, sid, "/ws")
    return url if after is None else f"{url}?after={after}"


def ws_connect(server, sb, sid, after=None, token=TOKEN, **kw):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(ws_url(server, sb, sid, after), additional_headers=headers, open_timeout=10, **kw)


def recv_json(conn, timeout=10) -> dict:
    return json.loads(conn.recv(timeout=timeout))


def read_while(conn, done, timeout=10) -> list[dict]:
    """Messages until ``done(messages so far)`` holds, within a deadline."""
    deadline = time.monotonic() + timeout
    got: list[dict] = []
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"condition not met within {timeout}s; got {got[-8:]}"
        try:
            got.append(recv_json(conn, remaining))
        except TimeoutError:
            continue
        if done(got):
            return got


def read_until(conn, predicate, timeout=10) -> list[dict]:
    """Messages up to and including the first one matching ``predicate``."""
    return read_while(conn, lambda got: predicate(got[-1]), timeout)


def events_of(messages) -> list[dict]:
    return [m["event"] for m in messages if m["type"] == "event"]


def is_exit(message) -> bool:
    return message["type"] == "event" and message["event"]["type"] == "attempt.exited"


class SdkMessages:
    """``iter_messages()`` of the official SDK, read in a thread so every wait is bounded."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self.items: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for message in self.conn.iter_messages():
                self.items.put(message)
        except Exception as exc:  # the connection was closed by the test
            self.items.put(exc)
        self.items.put(None)

    def until(self, predicate, timeout=10) -> list:
        deadline = time.monotonic() + timeout
        got = []
        while True:
            try:
                message = self.items.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no matching message within {timeout}s; got {got[-8:]}") from None
            assert message is not None and not isinstance(message, Exception), f"stream ended: {message!r}"
            got.append(message)
            if predicate(message):
                return got

    def close(self) -> None:
        self.conn.close()
        self.thread.join(5)


def pty_text(messages) -> bytes:
    return b"".join(base64.b64decode(m.event.data_base64) for m in messages
                    if m.type == "event" and m.event.type_ == "output")


# ---- the sandbox0 SDK acceptance line ---------------------------------------------------------
def test_sdk_pty_bash_session_acks_resize_and_input_and_stty_shows_the_new_size(sdk, sandbox_id):
    sandbox = sdk.sandbox(sandbox_id)
    spec = ExecutionSessionSpec.from_dict(pty_spec(BASH, rows=24, cols=80, env=PROMPT_ENV))
    session = sandbox.create_session(spec)
    assert session.spec.io.mode == ExecutionSessionIOMode.PTY
    conn = sandbox.connect_session(session.id)
    stream = SdkMessages(conn)
    try:
        conn.send(ExecutionSessionWebSocketResize(
            rows=37, cols=101, type_=ExecutionSessionWebSocketResizeType.RESIZE, request_id="resize-1"))
        conn.send(ExecutionSessionWebSocketInput(
            input_id="typed-1", type_=ExecutionSessionWebSocketInputType.INPUT, request_id="input-1",
            data_base64=b64("stty size; echo mark-$((6*7))\n")))
        seen = _until_text(stream, b"mark-42", replies=2)
    finally:
        stream.close()
    replies = [(m.type, m.request_id) for m in seen if m.type != "event"]
    assert replies == [("ack", "resize-1"), ("ack", "input-1")]
    outputs = [m.event for m in seen if m.type == "event" and m.event.type_ == "output"]
    assert outputs and {str(e.stream) for e in outputs} == {"pty"}
    text = pty_text(seen)
    assert b"stty size; echo mark-$((6*7))" in text  # the terminal's echo of what was typed
    assert b"37 101" in text and b"mark-42" in text
    types = [m.event.type_ for m in seen if m.type == "event"]
    assert "terminal.resized" in types and "input.accepted" in types

    middle = next(m.event.seq for m in seen if m.type == "event" and m.event.type_ == "terminal.resized")
    latest = sandbox.get_session(session.id).cursor.latest
    again = SdkMessages(sandbox.connect_session(session.id, SessionWebSocketOptions(after=middle)))
    try:
        replayed = again.until(lambda m: m.type == "event" and m.event.seq >= latest)
    finally:
        again.close()
    seqs = [m.event.seq for m in replayed if m.type == "event"]
    assert seqs == list(range(middle + 1, latest + 1))


def _until_text(stream: SdkMessages, needle: bytes, replies=0, timeout=15) -> list:
    got: list = []

    def found(message) -> bool:
        got.append(message)
        return needle in pty_text(got) and sum(m.type != "event" for m in got) >= replies
    stream.until(found, timeout)
    return got


# ---- PTY semantics ----------------------------------------------------------------------------
def test_pty_session_exports_term_starts_at_its_size_and_eof_hangs_it_up(http, sandbox_id):
    argv = ["sh", "-c", "echo TERM=$TERM; stty size; exec cat"]
    sid = create_session(http, sandbox_id, pty_spec(argv, rows=31, cols=97, term="vt100"))["id"]
    wait_for(lambda: b"31 97" in output_bytes(all_events(http, sandbox_id, sid)))
    write_input(http, sandbox_id, sid, "eof-1", eof=True)
    exited = wait_exited(http, sandbox_id, sid)
    evs = all_events(http, sandbox_id, sid)
    assert b"TERM=vt100" in output_bytes(evs)
    assert {e["stream"] for e in evs if e["type"] == "output"} == {"pty"}
    # Closing the master is a hang-up, not a ^D: cat is killed by SIGHUP.
    assert exited["signal"] == "HUP" and exited["exit_code"] == -1
    accepted = [e["seq"] for e in evs if e["type"] == "input.accepted"]
    assert accepted and accepted[-1] < exited["seq"]


def test_pty_output_is_coalesced_into_few_large_events(http, sandbox_id):
    argv = ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\0' x; echo; echo done"]
    sid = create_session(http, sandbox_id, pty_spec(argv))["id"]
    wait_exited(http, sandbox_id, sid, timeout=30)
    outputs = [e for e in all_events(http, sandbox_id, sid) if e["type"] == "output"]
    data = output_bytes(outputs)
    assert data.count(b"x") == 2_000_000 and data.endswith(b"done\r\n")
    # The kernel hands out ~4 KiB per PTY read: ~490 reads became far fewer journal events.
    assert len(outputs) < 2_000_000 // 4096 // 2


def test_signals_reach_the_whole_process_group_of_a_pty_session(http, sandbox_id):
    argv = ["sh", "-c", "sleep 300 & sleep 301; wait"]
    sid = create_session(http, sandbox_id, pty_spec(argv))["id"]
    ok(http.post(spath(sandbox_id, sid, "/signals"), json={"signal": "TERM"}), 202)
    exited = wait_exited(http, sandbox_id, sid)
    assert exited["signal"] == "TERM"


def test_resize_with_a_stale_attempt_is_409_and_the_last_size_is_reapplied(http, sandbox_id):
    argv = ["sh", "-c", "stty size; exec cat"]
    session = create_session(http, sandbox_id, pty_spec(argv, rows=24, cols=80))
    sid, first = session["id"], session["attempt"]["id"]
    wait_for(lambda: b"24 80" in output_bytes(all_events(http, sandbox_id, sid)))
    resized = ok(http.put(spath(sandbox_id, sid, "/terminal"),
                          json={"rows": 50, "cols": 132, "expected_attempt_id": first}), 200)
    assert resized == {"resized": True}
    wait_event(http, sandbox_id, sid, lambda e: e["type"] == "terminal.resized")
    second = ok(http.post(spath(sandbox_id, sid, "/attempts"), json={"replace_current": True}), 201)
    assert second["attempt"]["id"] != first
    assert second["spec"]["io"]["terminal"]["rows"] == 24  # the spec keeps the initial size
    stale = err(http.put(spath(sandbox_id, sid, "/terminal"),
                         json={"rows": 10, "cols": 10, "expected_attempt_id": first}), 409, "session_conflict")
    assert stale["message"] == "session attempt mismatch"
    wait_for(lambda: b"50 132" in output_bytes(
        [e for e in all_events(http, sandbox_id, sid) if e.get("attempt_id") == second["attempt"]["id"]]))


def test_resize_of_a_pipes_session_is_409_pty_not_available(http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    error = err(http.put(spath(sandbox_id, sid, "/terminal"), json={"rows": 30, "cols": 90}),
                409, "session_conflict")
    assert error["message"] == "pty not available"
    err(http.put(spath(sandbox_id, sid, "/terminal"), json={"rows": 0, "cols": 90}), 400, "invalid_request")


# ---- the WebSocket duplex -------------------------------------------------------------------
def test_ws_errors_before_the_upgrade_are_json_envelopes(server, http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    cases = [(ws_url(server, sandbox_id, sid, 999), TOKEN, 400, "invalid_request"),
             (ws_url(server, sandbox_id, sid, "x"), TOKEN, 400, "invalid_request"),
             (ws_url(server, sandbox_id, sid) + "?limit=0", TOKEN, 400, "invalid_request"),
             (ws_url(server, sandbox_id, "ses-00000000-000"), TOKEN, 404, "session_not_found"),
             (ws_url(server, "sb-nope", sid), TOKEN, 404, "not_found"),
             (ws_url(server, sandbox_id, sid), None, 401, "unauthorized"),
             (ws_url(server, sandbox_id, sid), "wrong", 401, "unauthorized"),
             (ws_url(server, sandbox_id, "ses-00000000-000", 999), None, 401, "unauthorized")]
    for url, token, status, code in cases:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with pytest.raises(InvalidStatus) as caught:
            connect(url, additional_headers=headers, open_timeout=10)
        response = caught.value.response
        assert response.status_code == status, (url, response.body)
        body = json.loads(bytes(response.body))
        assert body["success"] is False and body["error"]["code"] == code, (url, body)


def test_ws_replays_then_streams_and_answers_each_request_once_in_order(server, http, sandbox_id):
    session = create_session(http, sandbox_id, {"command": ["cat"]})
    sid, attempt = session["id"], session["attempt"]["id"]
    with ws_connect(server, sandbox_id, sid) as conn:
        replay = read_until(conn, lambda m: m["type"] == "event" and m["event"]["type"] == "session.ready")
        assert [e["seq"] for e in events_of(replay)] == [1, 2, 3, 4]
        requests = [{"type": "input", "input_id": f"in-{i}", "data_base64": b64(f"line-{i}\n"),
                     "request_id": f"r{i}"} for i in range(10)]
        requests.insert(3, {"type": "eof", "request_id": "bad-type"})
        requests.insert(5, {"type": "signal", "signal": "NOPE", "request_id": "bad-signal"})
        requests.insert(7, {"type": "input", "input_id": "in-x", "data_base64": b64("x"),
                            "expected_attempt_id": "att-00000000-000", "request_id": "fenced"})
        requests.insert(8, {"type": "resize", "rows": 10, "cols": 10, "request_id": "pipes-resize"})
        for request in requests:
            conn.send(json.dumps(request))
        conn.send("not json")
        got = read_while(conn, lambda got: any(m["type"] == "error" and "request_id" not in m for m in got)
                         and b"line-9" in output_bytes(events_of(got)))
    replies = [m for m in got if m["type"] != "event"]
    assert [r.get("request_id") for r in replies] == [r["request_id"] for r in requests] + [None]
    errors = {r["request_id"]: r["error"] for r in replies[:-1] if r["type"] == "error"}
    assert errors == {"bad-type": "unsupported websocket message type", "bad-signal": "unsupported signal",
                      "fenced": "session attempt mismatch", "pipes-resize": "pty not available"}
    assert output_bytes(events_of(got)) == b"".join(f"line-{i}\n".encode() for i in range(10))
    seqs = [e["seq"] for e in events_of(replay + got)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert get_session(http, sandbox_id, sid)["attempt"]["id"] == attempt


def test_a_client_that_disconnects_mid_stream_and_reconnects_with_after_misses_nothing(
        server, http, sandbox_id):
    script = "i=0; while [ $i -lt 40 ]; do echo line-$i; i=$((i+1)); sleep 0.02; done"
    sid = create_session(http, sandbox_id, {"command": ["sh", "-c", script]})["id"]
    with ws_connect(server, sandbox_id, sid) as conn:
        first = read_until(conn, lambda m: b"line-5" in output_bytes(events_of([m])))
    last = events_of(first)[-1]["seq"]
    wait_exited(http, sandbox_id, sid)
    with ws_connect(server, sandbox_id, sid, after=last) as conn:
        rest = read_until(conn, is_exit)
    seqs = [e["seq"] for e in events_of(first + rest)]
    assert seqs == list(range(1, seqs[-1] + 1))
    data = output_bytes(events_of(first + rest))
    assert data == b"".join(f"line-{i}\n".encode() for i in range(40))
    exited = events_of(rest)[-1]
    assert exited["exit_code"] == 0 and exited["reason"] == "stopped"


def test_closing_a_websocket_never_sends_eof_nor_stops_the_session(server, http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    with ws_connect(server, sandbox_id, sid) as conn:
        conn.send(json.dumps({"type": "input", "input_id": "a", "data_base64": b64("one\n"), "request_id": "a"}))
        read_until(conn, lambda m: m["type"] == "ack")
    with ws_connect(server, sandbox_id, sid) as conn:
        conn.close_socket()  # an abrupt drop, no close frame
    write_input(http, sandbox_id, sid, "b", "two\n")
    wait_for(lambda: output_bytes(all_events(http, sandbox_id, sid)) == b"one\ntwo\n")
    session = get_session(http, sandbox_id, sid)
    assert session["phase"] == "running" and "finished_at" not in session["attempt"]


def test_three_concurrent_attachments_share_events_and_get_only_their_own_replies(
        server, http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    with ExitStack() as stack:
        conns = [stack.enter_context(ws_connect(server, sandbox_id, sid)) for _ in range(3)]
        for conn in conns:
            read_until(conn, lambda m: m["type"] == "event" and m["event"]["type"] == "session.ready")
        for n, conn in enumerate(conns):
            conn.send(json.dumps({"type": "input", "input_id": f"c{n}", "data_base64": b64(f"from-{n}\n"),
                                  "request_id": f"req-{n}"}))
        seen = [read_while(conn, lambda got: output_bytes(events_of(got)).count(b"from-") == 3
                           and any(m["type"] == "ack" for m in got)) for conn in conns]
    streams = [[e["seq"] for e in events_of(msgs)] for msgs in seen]
    assert streams[0] == streams[1] == streams[2]
    for n, msgs in enumerate(seen):
        assert [m["request_id"] for m in msgs if m["type"] == "ack"] == [f"req-{n}"]
    assert sorted(output_bytes(events_of(seen[0])).splitlines()) == [b"from-0", b"from-1", b"from-2"]
    assert get_session(http, sandbox_id, sid)["phase"] == "running"


# ---- close codes (decisions at the top of the contract) --------------------------------------
def close_code(conn, timeout=15) -> tuple[int, list[dict]]:
    """Read until the server closes; return its close code and what arrived before."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got.append(recv_json(conn, max(0.01, deadline - time.monotonic())))
        except TimeoutError:
            continue
        except ConnectionClosed as closed:
            assert closed.rcvd is not None, "the server dropped the connection without a close frame"
            return closed.rcvd.code, got
    raise AssertionError(f"the server did not close within {timeout}s")


def test_deleting_the_session_closes_its_websockets_with_1000(server, http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["cat"]})["id"]
    with ws_connect(server, sandbox_id, sid) as conn:
        read_until(conn, lambda m: m["type"] == "event" and m["event"]["type"] == "session.ready")
        ok(http.delete(spath(sandbox_id, sid)), 200)
        code, got = close_code(conn)
    assert code == 1000
    assert [e["type"] for e in events_of(got)][-2:] == ["attempt.stopping", "attempt.exited"]


def test_server_shutdown_closes_websockets_with_1001(tmp_path):
    from tests.conftest import make_http
    with ServerProcess(tmp_path / "data", token=TOKEN, runtime="host") as own:
        with make_http(own.url) as client:
            sb = ok(client.post("/api/v1/sandboxes", json={"template": "default"}), 201,
                    allow_nulls=True)["sandbox_id"]
            sid = create_session(client, sb, {"command": ["cat"]})["id"]
        with ws_connect(own, sb, sid) as conn:
            read_until(conn, lambda m: m["type"] == "event" and m["event"]["type"] == "session.ready")
            own.stop()
            code, _ = close_code(conn)
    assert code == 1001


def test_a_slow_subscriber_is_detached_with_1013_and_resumes_with_after(server, http, sandbox_id):
    # Megabytes the client does not read block the server's sends; the small events
    # after them then overflow the subscriber's 256-event buffer.
    script = ("head -c 24000000 /dev/zero; i=0; "
              "while [ $i -lt 400 ]; do echo tick-$i; i=$((i+1)); sleep 0.005; done")
    sid = create_session(http, sandbox_id, {"command": ["sh", "-c", script]})["id"]
    with ws_connect(server, sandbox_id, sid, max_queue=1) as conn:
        wait_exited(http, sandbox_id, sid, timeout=60)
        code, first = close_code(conn, timeout=60)
    assert code == 1013
    last = events_of(first)[-1]["seq"]
    with ws_connect(server, sandbox_id, sid, after=last) as conn:
        rest = read_until(conn, is_exit, timeout=30)
    seqs = [e["seq"] for e in events_of(first + rest)]
    assert seqs == list(range(1, seqs[-1] + 1))
    data = output_bytes(events_of(first + rest))
    assert len(data) == 24_000_000 + sum(len(f"tick-{i}\n") for i in range(400))
