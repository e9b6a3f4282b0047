"""Raw-HTTP pins of the Sandbox0 session contract (§7.3 statuses and envelopes, §0.3 errors)."""
from __future__ import annotations

import json
import threading

import httpx
import pytest

from tests.conftest import make_http
from tests.helpers import (
    ATTEMPT_ID_RE, SESSION_ID_RE, SSEReader, all_events, assert_timestamp, b64,
    create_session, err, find_nulls, get_session, ok, output_bytes, show, spath, wait_event,
    wait_exited, write_input,
)

CAT = {"command": ["/bin/cat"]}
NORMALIZED_CAT_SPEC = {  # contract §2.4, verbatim
    "command": ["/bin/cat"],
    "io": {"mode": "pipes"},
    "lifecycle": {"desired_state": "running",
                  "restart": {"policy": "never", "max_restarts": 5, "window_seconds": 60,
                              "initial_backoff_ms": 250, "max_backoff_ms": 5000},
                  "runtime_recovery": "restart", "stop_grace_period_seconds": 10},
    "readiness": {"type": "process", "timeout_ms": 30000},
    "event_retention": {"max_bytes": 67108864, "max_age_seconds": 86400},
}
PHASES = {"pending", "starting", "running", "paused", "stopping", "stopped", "exited",
          "backoff", "failed", "suspended"}
EVENT_KEYS = {"seq", "session_id", "runtime_generation", "type", "occurred_at"}
NO_SUCH_SESSION = "ses-00000000-000"


@pytest.fixture
def cat(http, sandbox_id):
    return create_session(http, sandbox_id, CAT)


def assert_session_shape(s):
    for key in ("id", "spec", "spec_version", "phase", "runtime_generation", "restart_count",
                "cursor", "created_at", "updated_at", "last_activity_at"):
        assert key in s, f"session lacks {key}: {s}"
    assert SESSION_ID_RE.match(s["id"]), s["id"]
    assert s["phase"] in PHASES
    assert set(s["cursor"]) == {"earliest", "latest"}
    for key in ("created_at", "updated_at", "last_activity_at"):
        assert_timestamp(s[key], key)
    if "attempt" in s:
        att = s["attempt"]
        assert ATTEMPT_ID_RE.match(att["id"]), att
        assert isinstance(att["number"], int) and isinstance(att["runtime_generation"], int)
        for key in ("started_at", "finished_at"):
            if key in att:
                assert_timestamp(att[key], key)


def assert_event_shape(e, sid):
    assert EVENT_KEYS <= set(e), e
    assert e["session_id"] == sid and isinstance(e["seq"], int)
    assert "attempt_id" not in e or ATTEMPT_ID_RE.match(e["attempt_id"]), e
    assert_timestamp(e["occurred_at"], "occurred_at")
    assert ("stream" in e) == (e["type"] == "output"), e
    if "stream" in e:
        assert e["stream"] in ("stdout", "stderr", "pty")


def types(evs):
    return [e["type"] for e in evs]


class TestListAndCreate:
    def test_list_of_a_fresh_sandbox_is_an_empty_array(self, http, sandbox_id):
        assert ok(http.get(spath(sandbox_id)), 200) == {"sessions": []}

    def test_list_returns_sessions_in_creation_order(self, http, sandbox_id):
        ids = [create_session(http, sandbox_id, CAT)["id"] for _ in range(3)]
        listed = ok(http.get(spath(sandbox_id)), 200)["sessions"]
        assert [s["id"] for s in listed] == ids
        for s in listed:
            assert_session_shape(s)

    def test_create_answers_201_with_the_normalized_spec_and_a_running_first_attempt(
            self, http, sandbox_id):
        s = create_session(http, sandbox_id, CAT)
        assert_session_shape(s)
        assert s["spec"] == NORMALIZED_CAT_SPEC
        assert (s["spec_version"], s["phase"], s["restart_count"]) == (1, "running", 0)
        assert s["attempt"]["number"] == 1 and "pid" in s["attempt"]
        evs = all_events(http, sandbox_id, s["id"])
        assert types(evs)[:2] == ["session.created", "attempt.starting"]
        assert evs[0]["seq"] == 1 and "attempt_id" not in evs[0]
        assert evs[1]["reason"] == "created" and evs[1]["attempt_id"] == s["attempt"]["id"]
        for e in evs:
            assert_event_shape(e, s["id"])

    def test_replay_with_the_same_key_answers_200_with_the_same_session(self, http, sandbox_id):
        first = create_session(http, sandbox_id, CAT, key="k-replay")
        again = create_session(http, sandbox_id, CAT, key="k-replay", status=200)
        assert again["id"] == first["id"] and again["attempt"]["id"] == first["attempt"]["id"]
        explicit = {**CAT, "io": {"mode": "pipes", "terminal": {"rows": 24, "cols": 80}},
                    "lifecycle": {"restart": {"max_restarts": 5}, "stop_grace_period_seconds": 0}}
        assert create_session(http, sandbox_id, explicit, key="k-replay", status=200)["id"] == first["id"]

    def test_the_same_key_with_a_different_spec_conflicts_and_the_message_names_the_key(self, http, sandbox_id):
        first = create_session(http, sandbox_id, CAT, key="k-conflict")
        resp = http.post(spath(sandbox_id), json={"command": ["/bin/cat", "-u"]},
                         headers={"Idempotency-Key": "k-conflict"})
        message = err(resp, 409, "session_conflict")["message"]
        assert message.startswith("session already exists")  # the reference's words come first
        assert "'k-conflict'" in message and first["id"] in message

    def test_32_concurrent_creates_with_one_key_make_exactly_one_session(self, http, sandbox_id):
        barrier, results = threading.Barrier(32), []

        def create():
            barrier.wait(10)
            results.append(http.post(spath(sandbox_id), json=CAT,
                                     headers={"Idempotency-Key": "k-race"}))

        threads = [threading.Thread(target=create) for _ in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200] * 31 + [201], [show(r) for r in results if r.status_code >= 300]
        assert len({r.json()["data"]["id"] for r in results}) == 1
        assert len(ok(http.get(spath(sandbox_id)), 200)["sessions"]) == 1


class TestGetUpdateDelete:
    def test_get_returns_the_session(self, http, sandbox_id, cat):
        s = get_session(http, sandbox_id, cat["id"])
        assert_session_shape(s)
        assert s["id"] == cat["id"] and s["spec"] == NORMALIZED_CAT_SPEC

    def test_update_bumps_spec_version_and_journals_session_updated(self, http, sandbox_id, cat):
        s = ok(http.put(spath(sandbox_id, cat["id"]), json={**CAT, "name": " renamed "}), 200)
        assert s["spec_version"] == 2 and s["spec"]["name"] == "renamed"
        assert s["attempt"]["id"] == cat["attempt"]["id"] and s["phase"] == "running"
        updated = [e for e in all_events(http, sandbox_id, cat["id"]) if e["type"] == "session.updated"]
        assert len(updated) == 1 and updated[0]["attempt_id"] == cat["attempt"]["id"]

    def test_update_validates_the_body_before_looking_up_the_session(self, http, sandbox_id):
        err(http.put(spath(sandbox_id, NO_SUCH_SESSION), json={"command": []}), 400, "invalid_request")

    def test_delete_answers_deleted_true_and_then_the_session_is_gone(self, http, sandbox_id, cat):
        assert ok(http.delete(spath(sandbox_id, cat["id"])), 200) == {"deleted": True}
        err(http.get(spath(sandbox_id, cat["id"])), 404, "session_not_found")
        err(http.delete(spath(sandbox_id, cat["id"])), 404, "session_not_found")
        assert ok(http.get(spath(sandbox_id)), 200) == {"sessions": []}


class TestDesiredStateAndAttempts:
    def test_desired_state_stopped_stops_the_attempt_and_journals_why(self, http, sandbox_id, cat):
        sid = cat["id"]
        s = ok(http.put(spath(sandbox_id, sid, "/desired-state"), json={"state": "stopped"}), 200)
        assert s["phase"] == "stopped" and s["spec_version"] == 2
        assert s["spec"]["lifecycle"]["desired_state"] == "stopped"
        evs = all_events(http, sandbox_id, sid)
        assert {(e["type"], e.get("reason")) for e in evs} >= {
            ("session.desired_state", "stopped"), ("attempt.stopping", "desired_state_stopped"),
            ("attempt.exited", "desired_state_stopped")}
        s = ok(http.put(spath(sandbox_id, sid, "/desired-state"), json={"state": "running"}), 200)
        assert (s["phase"], s["spec_version"], s["attempt"]["number"]) == ("running", 3, 2)

    def test_a_new_attempt_while_one_runs_conflicts_without_replace_current(self, http, sandbox_id, cat):
        resp = http.post(spath(sandbox_id, cat["id"], "/attempts"), json={"replace_current": False})
        err(resp, 409, "session_conflict")

    def test_replace_current_starts_the_next_attempt_number(self, http, sandbox_id, cat):
        s = ok(http.post(spath(sandbox_id, cat["id"], "/attempts"), json={"replace_current": True}), 201)
        assert s["attempt"]["number"] == 2 and s["attempt"]["id"] != cat["attempt"]["id"]
        assert (s["phase"], s["spec_version"]) == ("running", 2)
        evs = all_events(http, sandbox_id, cat["id"])
        seen = {(e["type"], e.get("reason"), e.get("attempt_id")) for e in evs}
        assert ("attempt.exited", "attempt_replaced", cat["attempt"]["id"]) in seen
        assert ("attempt.starting", "attempt_created", s["attempt"]["id"]) in seen

    def test_an_empty_attempts_body_starts_a_new_attempt_after_exit(self, http, sandbox_id, cat):
        write_input(http, sandbox_id, cat["id"], "eof", eof=True)
        wait_exited(http, sandbox_id, cat["id"])
        s = ok(http.post(spath(sandbox_id, cat["id"], "/attempts"), content=b""), 201)
        assert s["attempt"]["number"] == 2 and s["phase"] == "running"


class TestInputsAndSignals:
    def test_input_is_accepted_with_four_keys_and_journaled_once(self, http, sandbox_id, cat):
        sid, att = cat["id"], cat["attempt"]["id"]
        first = write_input(http, sandbox_id, sid, "i1", "hi\n", expected_attempt_id=att)
        assert first == {"input_id": "i1", "attempt_id": att, "accepted": True, "duplicate": False}
        retry = write_input(http, sandbox_id, sid, "i1", "hi\n", expected_attempt_id=att)
        assert retry == {**first, "duplicate": True}
        assert types(all_events(http, sandbox_id, sid)).count("input.accepted") == 1
        wait_event(http, sandbox_id, sid, lambda e: e["type"] == "output")
        assert output_bytes(all_events(http, sandbox_id, sid)) == b"hi\n"

    def test_reusing_an_input_id_with_different_content_conflicts(self, http, sandbox_id, cat):
        write_input(http, sandbox_id, cat["id"], "i1", "a")
        resp = http.post(spath(sandbox_id, cat["id"], "/inputs"),
                         json={"input_id": "i1", "data_base64": b64("b")})
        err(resp, 409, "session_conflict")

    def test_a_stale_expected_attempt_id_conflicts(self, http, sandbox_id, cat):
        resp = http.post(spath(sandbox_id, cat["id"], "/inputs"), json={
            "input_id": "i1", "data_base64": b64("a"), "expected_attempt_id": "att-00000000-000"})
        err(resp, 409, "session_conflict")

    def test_term_signal_is_accepted_and_the_attempt_reports_it(self, http, sandbox_id, cat):
        sid = cat["id"]
        resp = http.post(spath(sandbox_id, sid, "/signals"),
                         json={"signal": "sigterm", "expected_attempt_id": cat["attempt"]["id"]})
        assert ok(resp, 202) == {"accepted": True}
        exited = wait_exited(http, sandbox_id, sid)
        assert (exited["exit_code"], exited["reason"], exited.get("signal")) == (-1, "killed", "TERM")
        sent = [e for e in all_events(http, sandbox_id, sid) if e["type"] == "signal.sent"]
        assert len(sent) == 1 and sent[0]["reason"] == "terminated"
        att = get_session(http, sandbox_id, sid)["attempt"]
        assert (att["exit_code"], att.get("signal"), "pid" in att) == (-1, "TERM", False)

    def test_signalling_a_session_that_is_not_running_conflicts(self, http, sandbox_id):
        sid = create_session(http, sandbox_id, {"command": ["/bin/true"]})["id"]
        wait_exited(http, sandbox_id, sid)
        err(http.post(spath(sandbox_id, sid, "/signals"), json={"signal": "TERM"}), 409, "session_conflict")


class TestEvents:
    def test_page_has_events_and_cursor_and_honours_after_and_limit(self, http, sandbox_id, cat):
        sid = cat["id"]
        page = ok(http.get(spath(sandbox_id, sid, "/events")), 200)
        assert set(page) == {"events", "cursor"}
        latest = page["cursor"]["latest"]
        assert page["cursor"]["earliest"] == 1 and [e["seq"] for e in page["events"]] == list(
            range(1, latest + 1))
        one = ok(http.get(spath(sandbox_id, sid, "/events"), params={"after": 1, "limit": 1}), 200)
        assert [e["seq"] for e in one["events"]] == [2]
        tail = ok(http.get(spath(sandbox_id, sid, "/events"), params={"after": latest}), 200)
        assert tail["events"] == []

    def test_sse_frames_carry_id_event_and_the_bare_event_as_data(self, server, http, sandbox_id, cat):
        sid = cat["id"]
        write_input(http, sandbox_id, sid, "x", "x", eof=True)
        with SSEReader(server.url, spath(sandbox_id, sid, "/events/stream")) as sse:
            assert sse.response.status_code == 200
            assert sse.response.headers["content-type"].startswith("text/event-stream")
            frames = sse.read_until(lambda e: e["type"] == "attempt.exited")
        for frame in frames:
            assert set(frame) == {"id", "event", "data", "comments"} and not frame["comments"]
            event = json.loads(frame["data"])
            assert frame["id"] == str(event["seq"]) and frame["event"] == event["type"]
            assert_event_shape(event, sid)
            assert not find_nulls(event), event
        assert [int(f["id"]) for f in frames] == list(range(1, len(frames) + 1))

    def test_last_event_id_wins_over_the_after_parameter(self, server, http, sandbox_id, cat):
        with SSEReader(server.url, spath(sandbox_id, cat["id"], "/events/stream"),
                       params={"after": 0}, headers={"Last-Event-ID": "2"}) as sse:
            assert sse.next_frame()["id"] == "3"

    def test_sse_with_nothing_to_replay_sends_headers_at_once_then_live_events(
            self, server, http, sandbox_id, cat):
        latest = get_session(http, sandbox_id, cat["id"])["cursor"]["latest"]
        # SSEReader fails if the status line and headers do not arrive within 10 s.
        with SSEReader(server.url, spath(sandbox_id, cat["id"], "/events/stream"),
                       params={"after": latest}) as sse:
            write_input(http, sandbox_id, cat["id"], "live", "live\n")
            assert sse.next_frame()["id"] == str(latest + 1)

    def test_sse_replays_then_goes_live_without_gap_or_duplicate(self, server, http, sandbox_id, cat):
        sid = cat["id"]

        def writer():
            for i in range(40):
                write_input(http, sandbox_id, sid, f"w{i}", f"line {i}\n")
            write_input(http, sandbox_id, sid, "w-eof", eof=True)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            with SSEReader(server.url, spath(sandbox_id, sid, "/events/stream")) as sse:
                frames = sse.read_until(lambda e: e["type"] == "attempt.exited", timeout=20)
        finally:
            thread.join(30)
        streamed = [int(f["id"]) for f in frames]
        journal = [e["seq"] for e in all_events(http, sandbox_id, sid)]
        assert streamed == journal[: len(streamed)] == list(range(1, len(streamed) + 1))
        assert output_bytes(json.loads(f["data"]) for f in frames) == b"".join(
            f"line {i}\n".encode() for i in range(40))


NS = NO_SUCH_SESSION
BAD_REQUESTS = [  # (name, method, path under the sandbox's sessions, body, status, code, message)
    ("create undecodable json", "POST", "", b"{", 400, "invalid_request", None),
    ("create body is an array", "POST", "", b"[]", 400, "invalid_request", None),
    ("create command as string", "POST", "", {"command": "/bin/cat"}, 400, "invalid_request", None),
    ("create empty command", "POST", "", {"command": []}, 400, "invalid_request", None),
    ("create blank command", "POST", "", {"command": ["  "]}, 400, "invalid_request", None),
    ("create command of ints", "POST", "", {"command": [1]}, 400, "invalid_request", None),
    ("create bad io mode", "POST", "", {**CAT, "io": {"mode": "tty"}}, 400, "invalid_request", None),
    ("create rows as string", "POST", "", {**CAT, "io": {"mode": "pty", "terminal": {"rows": "x"}}},
     400, "invalid_request", None),
    ("create rows too big", "POST", "", {**CAT, "io": {"mode": "pty", "terminal": {"rows": 70000}}},
     400, "invalid_request", None),
    ("create env value int", "POST", "", {**CAT, "env": {"A": 1}}, 400, "invalid_request", None),
    ("create bad policy", "POST", "", {**CAT, "lifecycle": {"restart": {"policy": "sometimes"}}},
     400, "invalid_request", None),
    ("create negative idle", "POST", "", {**CAT, "lifecycle": {"idle_timeout_seconds": -1}},
     400, "invalid_request", None),
    ("create backoff inverted", "POST", "", {**CAT, "lifecycle": {"restart": {
        "initial_backoff_ms": 1000, "max_backoff_ms": 500}}}, 400, "invalid_request", None),
    ("create output readiness without token", "POST", "", {**CAT, "readiness": {"type": "output"}},
     400, "invalid_request", None),
    ("create negative retention", "POST", "", {**CAT, "event_retention": {"max_bytes": -1}},
     400, "invalid_request", None),
    ("update undecodable json", "PUT", "/{sid}", b"{", 400, "invalid_request", None),
    ("desired state unknown", "PUT", "/{sid}/desired-state", {"state": "paused"}, 400,
     "invalid_request", "invalid desired state"),
    ("desired state missing", "PUT", "/{sid}/desired-state", {}, 400, "invalid_request", None),
    ("desired state before lookup", "PUT", f"/{NS}/desired-state", {"state": "x"}, 400,
     "invalid_request", None),
    ("attempts replace_current string", "POST", "/{sid}/attempts", {"replace_current": "yes"},
     400, "invalid_request", None),
    ("input undecodable json", "POST", "/{sid}/inputs", b"{", 400, "invalid_request", None),
    ("input without id", "POST", "/{sid}/inputs", {"data_base64": "aGk="}, 400,
     "invalid_request", "input_id is required"),
    ("input blank id", "POST", "/{sid}/inputs", {"input_id": " ", "eof": True}, 400,
     "invalid_request", "input_id is required"),
    ("input id int", "POST", "/{sid}/inputs", {"input_id": 5, "eof": True}, 400, "invalid_request", None),
    ("input bad base64", "POST", "/{sid}/inputs", {"input_id": "i", "data_base64": "!!!"}, 400,
     "invalid_request", "data_base64 is invalid"),
    ("input unpadded base64", "POST", "/{sid}/inputs", {"input_id": "i", "data_base64": "aGk"}, 400,
     "invalid_request", "data_base64 is invalid"),
    ("input empty", "POST", "/{sid}/inputs", {"input_id": "i", "eof": False}, 400,
     "invalid_request", "data_base64 or eof is required"),
    ("input eof string", "POST", "/{sid}/inputs", {"input_id": "i", "eof": "yes"}, 400,
     "invalid_request", None),
    ("signal unknown", "POST", "/{sid}/signals", {"signal": "SIGFOO"}, 400, "invalid_request", None),
    ("signal missing", "POST", "/{sid}/signals", {}, 400, "invalid_request", None),
    ("signal zero", "POST", "/{sid}/signals", {"signal": "0"}, 400, "invalid_request", None),
    ("signal 65", "POST", "/{sid}/signals", {"signal": "65"}, 400, "invalid_request", None),
    ("signal int", "POST", "/{sid}/signals", {"signal": 9}, 400, "invalid_request", None),
    ("signal before lookup", "POST", f"/{NS}/signals", {"signal": "SIGFOO"}, 400, "invalid_request", None),
    ("terminal on pipes", "PUT", "/{sid}/terminal", {"rows": 30, "cols": 100}, 409, "session_conflict", None),
    ("terminal rows string", "PUT", "/{sid}/terminal", {"rows": "x", "cols": 80}, 400, "invalid_request", None),
    ("events after negative", "GET", "/{sid}/events?after=-1", None, 400, "invalid_request", None),
    ("events after text", "GET", "/{sid}/events?after=abc", None, 400, "invalid_request", None),
    ("events after non-ascii digit", "GET", "/{sid}/events?after=\u0663", None, 400, "invalid_request", None),
    ("events after beyond latest", "GET", "/{sid}/events?after=99999", None, 400, "invalid_request", None),
    ("events limit zero", "GET", "/{sid}/events?limit=0", None, 400, "invalid_request", None),
    ("events limit too big", "GET", "/{sid}/events?limit=10001", None, 400, "invalid_request", None),
    ("events limit text", "GET", "/{sid}/events?limit=x", None, 400, "invalid_request", None),
    ("stream after negative", "GET", "/{sid}/events/stream?after=-1", None, 400, "invalid_request", None),
    ("stream after beyond latest", "GET", "/{sid}/events/stream?after=99999", None, 400,
     "invalid_request", None),
    ("stream bad last-event-id", "GET", "/{sid}/events/stream?lei=abc", None, 400, "invalid_request", None),
    ("get unknown", "GET", f"/{NS}", None, 404, "session_not_found", None),
    ("get malformed id", "GET", "/nope", None, 404, "session_not_found", None),
    ("update unknown", "PUT", f"/{NS}", CAT, 404, "session_not_found", None),
    ("delete unknown", "DELETE", f"/{NS}", None, 404, "session_not_found", None),
    ("desired state unknown id", "PUT", f"/{NS}/desired-state", {"state": "running"}, 404,
     "session_not_found", None),
    ("attempts unknown", "POST", f"/{NS}/attempts", {"replace_current": False}, 404, "session_not_found", None),
    ("input unknown", "POST", f"/{NS}/inputs", {"input_id": "i", "eof": True}, 404, "session_not_found", None),
    ("signal unknown id", "POST", f"/{NS}/signals", {"signal": "TERM"}, 404, "session_not_found", None),
    ("events unknown", "GET", f"/{NS}/events", None, 404, "session_not_found", None),
    ("stream unknown", "GET", f"/{NS}/events/stream", None, 404, "session_not_found", None),
]


@pytest.mark.parametrize("name,method,tail,body,status,code,message", BAD_REQUESTS,
                         ids=[c[0].replace(" ", "-") for c in BAD_REQUESTS])
def test_bad_requests_get_their_4xx_envelope_never_a_500(
        http, sandbox_id, cat, name, method, tail, body, status, code, message):
    headers = {}
    if "?lei=" in tail:  # "lei" stands for a Last-Event-ID header, not a query parameter
        tail, _, value = tail.partition("?lei=")
        headers["Last-Event-ID"] = value
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body} if body is not None else {}
    resp = http.request(method, spath(sandbox_id) + tail.format(sid=cat["id"]), headers=headers, **kwargs)
    error = err(resp, status, code)
    if message:
        assert message in error["message"], show(resp)


@pytest.mark.parametrize("method,tail", [("GET", ""), ("POST", ""), ("GET", f"/{NS}"),
                                         ("GET", f"/{NS}/events")])
def test_an_unknown_sandbox_is_not_found(http, method, tail):
    resp = http.request(method, spath("sb-does-not-exist") + tail, json=CAT if method == "POST" else None)
    err(resp, 404, "not_found")


def test_timestamps_are_utc_with_trailing_zeros_trimmed(http, sandbox_id, cat):
    write_input(http, sandbox_id, cat["id"], "e", "x", eof=True)
    wait_exited(http, sandbox_id, cat["id"])
    s = get_session(http, sandbox_id, cat["id"])
    stamps = [s["created_at"], s["updated_at"], s["last_activity_at"], s["attempt"]["started_at"],
              s["attempt"]["finished_at"]] + [e["occurred_at"] for e in all_events(http, sandbox_id, s["id"])]
    for stamp in stamps:
        assert_timestamp(stamp)
        assert not (("." in stamp) and stamp.endswith("0Z")), f"fraction not trimmed: {stamp}"


class TestAuth:
    def test_a_missing_authorization_header_is_unauthorized(self, server):
        with make_http(server.url, token=None) as anon:
            err(anon.get("/api/v1/sandboxes/x/sessions"), 401, "unauthorized")
            err(anon.post("/api/v1/sandboxes", json={"template": "default"}), 401, "unauthorized")

    @pytest.mark.parametrize("value", ["Bearer wrong-token", "Basic dGVzdDp0ZXN0", "test-token"])
    def test_a_wrong_token_or_scheme_is_unauthorized(self, server, value):
        with httpx.Client(base_url=server.url, headers={"Authorization": value}) as client:
            err(client.get("/api/v1/sandboxes/x/sessions"), 401, "unauthorized")

    def test_healthz_needs_no_authorization(self, server):
        with make_http(server.url, token=None) as anon:
            assert anon.get("/healthz").status_code == 200
