"""Lifecycle behaviour against a real server with real processes and the real clock.

These are integration checks, so they may bound elapsed time, always loosely; unit and
service tests never assert timings (they run on the fake clock).
"""
from __future__ import annotations

import base64
import threading
import time

from tests.conftest import make_http
from tests.helpers import all_events, create_session, get_session, journal_tail, ok, spath, wait_for, write_input

LONG = ["/bin/sh", "-c", "echo up; exec sleep 600"]
# TERM is ignored by the shell and, across exec, by sleep: only the KILL after the grace ends it.
TERM_PROOF = ["/bin/sh", "-c", "trap '' TERM; echo up; exec sleep 600"]


def phase_of(http, sb, sid) -> str:
    return get_session(http, sb, sid)["phase"]


def test_a_2s_max_lifetime_session_is_stopped_within_3s_with_exactly_one_expired(http, sandbox_id):
    began = time.monotonic()
    sid = create_session(http, sandbox_id, {"command": LONG, "lifecycle": {"max_lifetime_seconds": 2}})["id"]
    wait_for(lambda: phase_of(http, sandbox_id, sid) == "stopped", timeout=3.0, interval=0.05,
             describe=lambda: journal_tail(http, sandbox_id, sid))
    stopped_after = time.monotonic() - began
    assert 1.9 <= stopped_after < 3.0
    session = get_session(http, sandbox_id, sid)
    assert session["attempt"]["reason"] == "session_expired"
    assert session["spec"]["lifecycle"]["desired_state"] == "stopped"
    time.sleep(0.6)  # a few more sweeps: the expiry must not repeat
    types = [e["type"] for e in all_events(http, sandbox_id, sid)]
    assert types.count("session.expired") == 1
    assert types[-3:] == ["session.expired", "attempt.stopping", "attempt.exited"]


def test_a_slow_stop_of_one_session_does_not_delay_another_sessions_calls(server, http, sandbox_id):
    slow = create_session(http, sandbox_id, {"command": TERM_PROOF,
                                             "lifecycle": {"stop_grace_period_seconds": 5}})["id"]
    other = create_session(http, sandbox_id, {"command": ["/bin/cat"]})["id"]
    wait_for(lambda: b"up" in b"".join(_outputs(http, sandbox_id, slow)), timeout=10)
    outcome = {}

    def stop_slow():
        with make_http(server.url) as own:
            started = time.monotonic()
            outcome["response"] = own.put(spath(sandbox_id, slow, "/desired-state"), json={"state": "stopped"})
            outcome["took"] = time.monotonic() - started

    stopper = threading.Thread(target=stop_slow)
    stopper.start()
    try:
        wait_for(lambda: phase_of(http, sandbox_id, slow) == "stopping", timeout=5)
        for number, call in enumerate(_other_session_calls(http, sandbox_id, other)):
            started = time.monotonic()
            call(number)
            assert time.monotonic() - started < 2.0, f"call {number} waited for the other session's stop"
        assert stopper.is_alive(), "the stop should still be in its grace period"
    finally:
        stopper.join(timeout=30)
    ok(outcome["response"], 200)
    assert outcome["took"] >= 4.5  # TERM ignored: the grace period ran out before KILL
    session = get_session(http, sandbox_id, slow)
    assert (session["phase"], session["attempt"]["reason"]) == ("stopped", "desired_state_stopped")
    assert session["attempt"].get("signal") == "KILL"


def _other_session_calls(http, sb, sid):
    return [
        lambda n: get_session(http, sb, sid),
        lambda n: write_input(http, sb, sid, f"fast-{n}", "ping\n"),
        lambda n: ok(http.get(spath(sb, sid, "/events"), params={"after": 0}), 200),
        lambda n: ok(http.get(spath(sb)), 200),
        lambda n: ok(http.get("/healthz"), 200),
        lambda n: ok(http.post(spath(sb, sid, "/attempts"), json={"replace_current": True}), 201),
    ]


def _outputs(http, sb, sid) -> list[bytes]:
    return [base64.b64decode(e["data_base64"]) for e in all_events(http, sb, sid) if e["type"] == "output"]
