"""Logs and events read from the journal, through the official Python SDK (and raw HTTP for the
errors): a session's output lines in order, a new line on a watch within a second, the claim, a
session start and a pause among the events, cursors that page on."""
from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
from sandbox0.apispec.models.sandbox_observability_event_type import SandboxObservabilityEventType
from sandbox0.apispec.models.sandbox_observability_log_stream import SandboxObservabilityLogStream
from sandbox0.sandbox_observability import (
    SandboxObservabilityEventOptions,
    SandboxObservabilityLogOptions,
    SandboxObservabilityLogWatchOptions,
)

from tests.helpers import TOKEN, create_session, err, ok, wait_exited, wait_for

LINES = [f"line {i}" for i in range(25)]


@pytest.fixture
def sb(sdk):
    sandbox = sdk.sandboxes.claim("default")
    yield sandbox
    sdk.sandboxes.delete(sandbox.id)


def run(http, sandbox_id, script: str) -> str:
    session = create_session(http, sandbox_id, {"command": ["sh", "-c", script]})
    wait_exited(http, sandbox_id, session["id"])
    return session["id"]


def test_list_logs_returns_a_sessions_lines_in_order_with_their_stream(sb, http):
    sid = run(http, sb.id, "for i in $(seq 0 24); do echo line $i; done; echo oops >&2")
    page = sb.list_logs()
    messages = [entry.message for entry in page.logs if entry.context_id == sid]
    assert messages[:25] == LINES and messages[25:] == ["oops"]
    assert page.logs[0].stream == SandboxObservabilityLogStream.STDOUT and page.logs[-1].stream.value == "stderr"
    assert page.logs[0].sandbox_id == sb.id and page.logs[0].process_id.startswith("att-")
    only_err = sb.list_logs(SandboxObservabilityLogOptions(stream=SandboxObservabilityLogStream.STDERR))
    assert [e.message for e in only_err.logs] == ["oops"]


def test_a_cursor_pages_through_the_logs_without_repeats_or_holes(sb, http):
    run(http, sb.id, "for i in $(seq 0 24); do echo line $i; done")
    seen, cursor = [], None
    for _ in range(10):
        page = sb.list_logs(SandboxObservabilityLogOptions(limit=7, cursor=cursor))
        seen += [e.message for e in page.logs]
        if not isinstance(page.next_cursor, str):
            break
        cursor = page.next_cursor
    assert seen == LINES
    later = sb.list_logs(SandboxObservabilityLogOptions(cursor=page.watermark))
    assert later.logs == []  # the watermark is the resume point: nothing new yet


def test_time_filters_select_lines(sb, http):
    run(http, sb.id, "echo early")
    middle = datetime.now(timezone.utc)
    time.sleep(0.05)
    run(http, sb.id, "echo late")
    after = [e.message for e in sb.list_logs(SandboxObservabilityLogOptions(start_time=middle)).logs]
    before = [e.message for e in sb.list_logs(SandboxObservabilityLogOptions(end_time=middle)).logs]
    assert after == ["late"] and before == ["early"]


def test_watch_logs_streams_a_new_line_within_a_second(sb, http):
    sid = create_session(http, sb.id, {"command": ["/bin/cat"]})["id"]
    got: list = []
    with sb.watch_logs(SandboxObservabilityLogWatchOptions()) as stream:
        assert stream.response.headers["content-type"].startswith("application/x-ndjson")

        def read():
            for line in stream.iter_lines():
                if line.type_.value == "log":
                    got.append((time.monotonic(), line.data.message))
                    return
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(0.3)
        sent = time.monotonic()
        ok(http.post(f"/api/v1/sandboxes/{sb.id}/sessions/{sid}/inputs",
                     json={"input_id": "i1", "data_base64": "aGVsbG8gd2F0Y2gK"}), 202)
        reader.join(5)
    assert got and got[0][1] == "hello watch"
    assert got[0][0] - sent < 1.0, f"the line arrived after {got[0][0] - sent:.2f} s"


def test_events_show_the_claim_a_session_start_and_a_pause(sb, http, sdk):
    run(http, sb.id, "true")
    sdk.sandboxes.pause(sb.id)
    events = sb.list_observability_events().events  # read from the paused sandbox's sealed journal
    actions = [e.action for e in events]
    assert actions[0] == "sandbox.claimed"
    assert "attempt.started" in actions and actions[-1] == "sandbox.paused"
    started = events[actions.index("attempt.started")]
    assert started.event_type == SandboxObservabilityEventType.PROCESS and started.outcome.value == "succeeded"
    assert started.integrity.signature_status.value == "unavailable" and started.schema_version.value == 2
    lifecycle = sb.list_observability_events(SandboxObservabilityEventOptions(
        event_type=SandboxObservabilityEventType.LIFECYCLE)).events
    assert [e.action for e in lifecycle] == ["sandbox.claimed", "sandbox.paused"]
    one = sb.list_observability_events(SandboxObservabilityEventOptions(event_id=started.event_id)).events
    assert [e.event_id for e in one] == [started.event_id]


def test_a_network_policy_change_is_an_event(sb, http):
    ok(http.put(f"/api/v1/sandboxes/{sb.id}/network", json={"mode": "block-all"}), 200)
    events = ok(http.get(f"/api/v1/sandboxes/{sb.id}/observability/events",
                         params={"event_type": "network_audit"}), 200)["events"]
    assert [(e["action"], e["attributes"]["mode"]) for e in events] == [("network.policy_changed", "block-all")]


def test_bad_queries_are_400(http, sandbox_id):
    base = f"/api/v1/sandboxes/{sandbox_id}/observability"
    for path, params in [("/logs", {"start_time": "yesterday"}), ("/logs", {"stream": "stdin"}),
                         ("/logs", {"cursor": "nope"}), ("/logs", {"limit": "0"}),
                         ("/logs", {"watch": "true", "end_time": "2026-01-01T00:00:00Z"}),
                         ("/events", {"event_type": "nope"}), ("/events", {"event_id": "not-a-uuid"}),
                         ("/events", {"event_id": "6b1f0e5c-32a4-4f59-9c0e-0d2f6a3c9e11", "source": "manager"}),
                         ("/logs", {"start_time": "2026-01-02T00:00:00Z", "end_time": "2026-01-01T00:00:00Z"})]:
        err(http.get(base + path, params=params), 400, "bad_request")
    err(http.get("/api/v1/sandboxes/sb-nope/observability/logs"), 404, "not_found")


def test_a_naive_start_time_is_utc(http, sandbox_id):
    naive = (datetime.now(timezone.utc) - timedelta(minutes=1)).replace(tzinfo=None).isoformat()
    ok(http.get(f"/api/v1/sandboxes/{sandbox_id}/observability/logs", params={"start_time": naive}), 200)


def test_a_contexts_output_is_in_the_logs_with_its_context_id(sb, http):
    context = sb.cmd("sh -c 'echo from a context; echo and its stderr >&2'")
    assert context.exit_code == 0
    logs = [e for e in sb.list_logs().logs if e.context_id.startswith("ctx-")]
    assert sorted((e.message, e.stream.value) for e in logs) == [("and its stderr", "stderr"),
                                                                 ("from a context", "stdout")]
    assert logs[0].attributes.to_dict()["context_id"] == logs[0].context_id
