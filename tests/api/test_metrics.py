"""``GET /metrics``: Prometheus text that the official parser reads, counters that move."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import make_http
from tests.helpers import SSEReader, create_session, spath, wait_exited, wait_for, write_input


def scrape(http) -> dict:
    """{(sample name, frozenset(labels)): value} of one scrape."""
    resp = http.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


def total(samples: dict, name: str, **labels) -> float:
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_metrics_need_the_token(server):
    with make_http(server.url, token=None) as anonymous:
        assert anonymous.get("/metrics").status_code == 401


def test_the_counters_move_when_a_session_runs(server, http, sandbox_id):
    before = scrape(http)
    sid = create_session(http, sandbox_id, {"command": ["sh", "-c", "printf metrics-12345; cat"]})["id"]
    write_input(http, sandbox_id, sid, "m1", "x" * 100, eof=True)
    wait_exited(http, sandbox_id, sid)
    big = create_session(http, sandbox_id, {"command": ["head", "-c", "2000000", "/dev/zero"],
                                            "event_retention": {"max_bytes": 256 * 1024}})["id"]
    wait_for(lambda: any(e["type"] == "attempt.exited" for e in  # the audit view: the journal is trimmed
                         http.get(spath(sandbox_id, big, "/history")).json()["data"]["events"]), timeout=30)
    assert http.get(spath(sandbox_id, big, "/events"), params={"after": 0}).status_code == 410
    after = scrape(http)

    def moved(name, **labels):
        return total(after, name, **labels) - total(before, name, **labels)

    assert moved("sessiond_attempts_started_total", reason="created") == 2
    assert moved("sessiond_attempts_exited_total") == 2
    assert moved("sessiond_output_bytes_committed_total", stream="stdout") >= 2_000_000 + 13 + 100
    assert moved("sessiond_events_committed_total", type="input.accepted") == 1
    assert moved("sessiond_events_committed_total", type="session.created") == 2
    assert moved("sessiond_commit_seconds_count") >= 2
    assert moved("sessiond_cursor_expired_total") == 1
    assert moved("sessiond_http_responses_total", status="201") >= 1
    assert total(after, "sessiond_sessions") >= 1
    assert total(after, "sessiond_store_bytes", sandbox=sandbox_id) > 0
    assert ("sessiond_input_queue_depth", frozenset({("sandbox", sandbox_id)})) in after
    assert ("sessiond_oom_kills_total", frozenset()) in after


def test_live_subscribers_and_server_side_detaches_are_counted(server, http, sandbox_id):
    sid = create_session(http, sandbox_id, {"command": ["/bin/cat"]})["id"]
    before = scrape(http)
    with SSEReader(server.url, spath(sandbox_id, sid, "/events/stream"), params={"after": 0}) as reader:
        reader.read_until(lambda e: e["type"] == "attempt.started")
        assert total(scrape(http), "sessiond_subscribers") == total(before, "sessiond_subscribers") + 1
        http.delete(spath(sandbox_id, sid))  # the server ends the stream: one detach, reason deleted
        wait_for(lambda: total(scrape(http), "sessiond_subscriber_detaches_total")
                 > total(before, "sessiond_subscriber_detaches_total"))
    phases = {dict(ls).get("phase") for (n, ls) in scrape(http) if n == "sessiond_sessions"}
    assert phases <= {"starting", "running", "stopping", "stopped", "exited", "backoff", "failed", "paused",
                      "suspended", None}
