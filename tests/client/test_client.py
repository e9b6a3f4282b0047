"""``api.client.Client`` against a real server: every route, typed results, and the input helper."""
from __future__ import annotations

import httpx
import pytest

from session_supervisor.client import (Attempt, Claim, Client, Conflict, CursorExpired, Event, EventPage, InputResult,
                        InvalidRequest, NotFound, Sandbox, Session, Unauthorized)
from tests.helpers import TOKEN, wait_for

CAT = {"command": ["/bin/cat"]}


def wait_event(client, sb, sid, kind, count=1, timeout=15):
    def seen():
        events = [e for e in client.iter_events(sb, sid, follow=False, skip_gap=True) if e.type == kind]
        return events if len(events) >= count else None
    return wait_for(seen, timeout=timeout)


def wait_exit(client, sb, sid, timeout=15):
    """From the never-trimmed history, so it works whatever retention removed."""
    return wait_for(lambda: [e for e in client.history(sb, sid).events if e.type == "attempt.exited"],
                    timeout=timeout)


def output_of(client, sb, sid) -> bytes:
    return b"".join(e.data for e in client.iter_events(sb, sid, follow=False) if e.type == "output")


def test_sandbox_routes_return_typed_results(client):
    claim = client.claim_sandbox("default", config={"ttl": 600})
    assert isinstance(claim, Claim) and claim.status == "running" and claim.template == "default"
    sandbox = client.get_sandbox(claim.sandbox_id)
    assert isinstance(sandbox, Sandbox) and sandbox.runtime_generation == 1 and not sandbox.paused
    assert claim.sandbox_id in [b.id for b in client.list_sandboxes()]
    assert client.sandbox_status(claim.sandbox_id).status == "running"
    assert client.update_sandbox(claim.sandbox_id, {"ttl": 900}).expires_at is not None
    assert client.refresh_sandbox(claim.sandbox_id, duration=60).sandbox_id == claim.sandbox_id
    paused = client.pause_sandbox(claim.sandbox_id)
    assert paused.sandbox_id == claim.sandbox_id
    wait_for(lambda: client.get_sandbox(claim.sandbox_id).paused)
    assert client.resume_sandbox(claim.sandbox_id).resumed
    assert client.get_sandbox(claim.sandbox_id).runtime_generation == 2
    assert client.delete_sandbox(claim.sandbox_id).raw == {"message": "sandbox terminated successfully"}
    with pytest.raises(NotFound) as caught:
        client.get_sandbox(claim.sandbox_id)
    assert caught.value.status == 404 and caught.value.code == "not_found"


def test_session_routes_return_typed_results(client, sandbox):
    session = client.create_session(sandbox, {**CAT, "name": "cat"}, idempotency_key="typed-1")
    assert isinstance(session, Session) and session.phase == "running" and session.name == "cat"
    assert isinstance(session.attempt, Attempt) and session.attempt_id.startswith("att-")
    assert client.create_session(sandbox, {**CAT, "name": "cat"}, idempotency_key="typed-1").id == session.id
    assert [s.id for s in client.list_sessions(sandbox)] == [session.id]
    assert client.list_sessions(sandbox).raw["sessions"][0]["id"] == session.id
    assert client.get_session(sandbox, session.id).spec["command"] == ["/bin/cat"]

    stopped = client.stop_session(sandbox, session.id)
    assert stopped.desired_state == "stopped"
    started = client.start_session(sandbox, session.id)
    assert started.attempt.number == 2
    replaced = client.create_attempt(sandbox, session.id, replace_current=True)
    assert replaced.attempt.number == 3
    with pytest.raises(Conflict):
        client.create_attempt(sandbox, session.id)
    updated = client.update_session(sandbox, session.id, {"command": ["/bin/cat", "-u"], "name": "cat2"})
    assert updated.spec_version > session.spec_version and updated.name == "cat2"

    result = client.send_input(sandbox, session.id, b"hello\n", attempt_id=updated.attempt_id)
    assert isinstance(result, InputResult) and result.accepted and not result.duplicate
    assert result.input_id.startswith("in-")
    wait_for(lambda: b"hello\n" in output_of(client, sandbox, session.id))
    assert client.send_signal(sandbox, session.id, "TERM").raw == {"accepted": True}

    page = client.list_events(sandbox, session.id, after=0, limit=3)
    assert isinstance(page, EventPage) and [e.seq for e in page.events] == [1, 2, 3]
    assert all(isinstance(e, Event) for e in page.events) and page.cursor.latest >= 3
    assert [a.number for a in client.list_attempts(sandbox, session.id)] == [1, 2, 3, 4]
    history = client.history(sandbox, session.id)
    assert {e.type.split(".")[0] for e in history.events} <= {"session", "attempt"}
    assert client.delete_session(sandbox, session.id).raw == {"deleted": True}


def test_resize_on_a_pty_session_and_errors_keep_the_envelope_code(client, sandbox):
    pty = client.create_session(sandbox, {"command": ["/bin/cat"], "io": {"mode": "pty"}})
    assert client.resize_terminal(sandbox, pty.id, 30, 100).raw == {"resized": True}
    with pytest.raises(Conflict) as stale:
        client.resize_terminal(sandbox, pty.id, 30, 100, expected_attempt_id="att-00000000-000")
    assert stale.value.message == "session attempt mismatch"
    with pytest.raises(InvalidRequest) as bad:
        client.create_session(sandbox, {"command": []})
    assert bad.value.code == "invalid_request"
    with pytest.raises(NotFound) as missing:
        client.get_session(sandbox, "ses-00000000-000")
    assert missing.value.code == "session_not_found"


def test_a_wrong_token_raises_unauthorized(server):
    with Client(server.url, "wrong") as client, pytest.raises(Unauthorized) as caught:
        client.list_sandboxes()
    assert caught.value.status == 401 and caught.value.code == "unauthorized"


class LoseFirstInputResponse(httpx.BaseTransport):
    """Lets the first input reach the server, then loses its response: an ambiguous failure."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.bodies: list[bytes] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/inputs"):
            self.bodies.append(request.content)
            if len(self.bodies) == 1:
                response.read()
                raise httpx.ReadTimeout("response lost", request=request)
        return response


def test_an_ambiguous_input_failure_is_retried_with_the_same_id_and_bytes_and_delivered_once(server, sandbox):
    transport = LoseFirstInputResponse()
    with Client(server.url, TOKEN, transport=transport) as flaky:
        session = flaky.create_session(sandbox, CAT)
        result = flaky.send_input(sandbox, session.id, b"exactly once\n")
        assert result.duplicate, "the retry must be recognised as the same input"
        assert len(transport.bodies) == 2 and transport.bodies[0] == transport.bodies[1]
        wait_for(lambda: b"exactly once\n" in output_of(flaky, sandbox, session.id))
        assert output_of(flaky, sandbox, session.id).count(b"exactly once") == 1
        assert len(wait_event(flaky, sandbox, session.id, "input.accepted")) == 1


def test_a_cursor_older_than_the_window_raises_cursor_expired_with_earliest_unless_skipping(client, sandbox):
    spec = {"command": ["head", "-c", "2000000", "/dev/zero"], "event_retention": {"max_bytes": 256 * 1024}}
    session = client.create_session(sandbox, spec)
    wait_exit(client, sandbox, session.id)
    with pytest.raises(CursorExpired) as caught:
        list(client.iter_events(sandbox, session.id, after=0, follow=False))
    earliest = caught.value.earliest
    assert earliest is not None and earliest > 1 and caught.value.latest >= earliest
    stream = client.iter_events(sandbox, session.id, after=0, follow=False, skip_gap=True)
    events = list(stream)
    assert events[0].seq == earliest and stream.gaps == [(1, earliest - 1)]
    assert [e.seq for e in events] == list(range(earliest, events[-1].seq + 1))


def test_the_websocket_replays_and_acks_each_request(client, sandbox):
    session = client.create_session(sandbox, CAT)
    with client.connect(sandbox, session.id, after=0) as socket:
        request_id = socket.send_input(b"over ws\n")
        seen, acked = b"", False
        while not (acked and b"over ws" in seen):
            message = socket.recv(timeout=10)
            assert message is not None, "the server closed the socket"
            if message["type"] == "ack" and message.get("request_id") == request_id:
                acked = True
            elif message["type"] == "event" and message["event"]["type"] == "output":
                seen += Event.from_api(message["event"]).data
    with pytest.raises(NotFound):
        client.connect(sandbox, "ses-00000000-000")


def test_the_aerolvm_facade_through_client_aero(client):
    aero = client.aero
    box = aero.create_sandbox("ubuntu", name="client-aero")
    assert box.id in [b.id for b in aero.list_sandboxes()]
    assert aero.get_sandbox(box.id).id == box.id
    echo = aero.create_session(box.id, command="echo from aero; echo oops >&2")
    wait_for(lambda: aero.get_session(box.id, echo.id).status == "exited")
    assert b"from aero" in aero.log(box.id, echo.id)
    attach = aero.attach(box.id, echo.id)
    frames = list(attach)
    attach.detach()
    assert b"from aero" in b"".join(data for kind, data in frames if kind in ("stdout", "stderr"))
    assert frames[-1] == ("exit", {"type": "exit", "code": 0})

    cat = aero.create_session(box.id, argv=["/bin/cat"])
    assert {s.id for s in aero.list_sessions(box.id)} == {echo.id, cat.id}
    assert aero.resize(box.id, cat.id, 100, 30).raw == {"status": "ok"}
    assert aero.signal(box.id, cat.id, "TERM").raw == {"status": "ok"}
    wait_for(lambda: aero.get_session(box.id, cat.id).status == "killed")
    aero.delete_session(box.id, cat.id)
    with pytest.raises(NotFound):
        aero.get_session(box.id, cat.id)
    aero.delete_sandbox(box.id)
