"""Sandbox lifecycle through the official SDK and plain HTTP: update, refresh, pause, resume,
auto-resume, ttl, hard_ttl, delete (sandboxes contract §1, §4, §5).

Tests that restart the server live in ``test_sandbox_restarts.py``; these share one server.
"""
from __future__ import annotations

import os

import httpx
import pytest
from sandbox0.apispec.models.sandbox_config import SandboxConfig
from sandbox0.apispec.models.sandbox_lifecycle_status import SandboxLifecycleStatus
from sandbox0.apispec.models.sandbox_refresh_request import SandboxRefreshRequest
from sandbox0.apispec.models.sandbox_update_config import SandboxUpdateConfig
from sandbox0.apispec.models.sandbox_update_request import SandboxUpdateRequest
from sandbox0.apispec.types import Unset
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.helpers import TOKEN, all_events, create_session, err, get_session, ok, process_state, spath, wait_for

SLEEP = {"command": ["sleep", "600"]}
RUNNING, PAUSED = SandboxLifecycleStatus.RUNNING, SandboxLifecycleStatus.PAUSED


def gone(pid: int) -> bool:
    """True once the process has ended (no /proc entry, or only a zombie left)."""
    return process_state(pid) in (None, "Z", "X")


def sandbox_json(http, sb) -> dict:
    return ok(http.get(f"/api/v1/sandboxes/{sb}"), 200)


def claim(http, config=None) -> str:
    body = {"template": "default", **({"config": config} if config is not None else {})}
    return ok(http.post("/api/v1/sandboxes", json=body), 201)["sandbox_id"]


@pytest.fixture
def claimed(sdk):
    created = []

    def _claim(config=None):
        sb = sdk.sandboxes.claim("default", config=config)
        created.append(sb.id)
        return sb

    yield _claim
    for sandbox_id in created:
        try:
            sdk.sandboxes.delete(sandbox_id)
        except Exception:
            pass  # deleted by the test itself


def test_the_sdk_reads_updates_and_refreshes_a_sandbox(sdk, claimed):
    sb = claimed(SandboxConfig(ttl=300, hard_ttl=3600))
    got = sdk.sandboxes.get(sb.id)
    assert (got.status, got.paused, got.runtime_generation, got.auto_resume) == (RUNNING, False, 1, True)
    assert got.runtime_id and not isinstance(got.expires_at, Unset)
    assert sb.id in [s.id for s in sdk.sandboxes.list()]
    assert sb.id not in [s.id for s in sdk.sandboxes.list(paused=True)]
    assert sdk.sandboxes.status(sb.id).status == RUNNING

    updated = sdk.sandboxes.update(sb.id, SandboxUpdateRequest(
        config=SandboxUpdateConfig(ttl=600, auto_resume=False)))
    assert updated.auto_resume is False and updated.expires_at > got.expires_at
    assert updated.runtime_generation == 1

    refreshed = sdk.sandboxes.refresh(sb.id, SandboxRefreshRequest(duration=60))
    assert refreshed.sandbox_id == sb.id
    assert refreshed.hard_expires_at >= got.hard_expires_at  # refresh re-arms the hard deadline too


def test_update_and_refresh_reject_bad_input_with_bad_request(http, sandbox_id):
    base = f"/api/v1/sandboxes/{sandbox_id}"
    err(http.put(base, json={}), 400, "bad_request")
    err(http.put(base, json={"config": {"ttl": -1}}), 400, "bad_request")
    err(http.put(base, json={"config": {"ttl": 10, "hard_ttl": 5}}), 400, "bad_request")
    err(http.put(base, json={"config": {"resources": {"memory": "12Mi"}}}), 400, "bad_request")
    err(http.put(base, content=b"{nope"), 400, "bad_request")
    err(http.post(f"{base}/refresh", json={"duration": -5}), 400, "bad_request")
    err(http.post(f"{base}/pause", json={"memory": True}), 400, "bad_request")
    err(http.post("/api/v1/sandboxes/sb-missing/pause", json={}), 404, "not_found")
    err(http.post("/api/v1/sandboxes/sb-missing/resume", json={}), 404, "not_found")
    err(http.post("/api/v1/sandboxes/sb-missing/refresh", json={}), 404, "not_found")
    err(http.put("/api/v1/sandboxes/sb-missing", json={"config": {"ttl": 1}}), 404, "not_found")


def test_pause_and_resume_through_the_sdk_move_the_generation_and_recover_sessions(sdk, claimed, http):
    sb = claimed()
    session = create_session(http, sb.id, SLEEP)
    first_pid = session["attempt"]["pid"]

    paused = sdk.sandboxes.pause_and_wait(sb.id, timeout_sec=30)
    assert (paused.status, paused.paused, paused.runtime_id) == (PAUSED, True, "")
    assert paused.runtime_generation == 1
    assert gone(first_pid), "a paused sandbox keeps no process"
    assert sdk.sandboxes.pause(sb.id).paused is True  # pausing again is a no-op
    assert [s.id for s in sdk.sandboxes.list(paused=True) if s.id == sb.id] == [sb.id]

    resumed = sdk.sandboxes.resume_and_wait(sb.id, timeout_sec=30)
    assert (resumed.status, resumed.paused, resumed.runtime_generation) == (RUNNING, False, 2)
    assert sdk.sandboxes.resume(sb.id).resumed is True  # resuming a running sandbox is a no-op
    assert sdk.sandboxes.get(sb.id).runtime_generation == 2

    after = get_session(http, sb.id, session["id"])
    assert (after["attempt"]["number"], after["attempt"]["runtime_generation"]) == (2, 2)
    assert after["runtime_generation"] == 2 and not gone(after["attempt"]["pid"])
    kinds = [(e["type"], e.get("reason"), e["runtime_generation"])
             for e in all_events(http, sb.id, session["id"])]
    assert kinds[-5:-2] == [("session.paused", None, 1), ("attempt.exited", "runtime_replaced", 1),
                            ("attempt.starting", "runtime_recovered", 2)]


def test_a_session_call_on_a_paused_sandbox_resumes_it_when_auto_resume_is_on(http):
    sb = claim(http)
    try:
        sid = create_session(http, sb, SLEEP)["id"]
        ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={"memory": False}), 200)
        listed = ok(http.get(spath(sb)), 200)["sessions"]  # a read is a runtime call too
        assert [s["id"] for s in listed] == [sid] and listed[0]["runtime_generation"] == 2
        assert sandbox_json(http, sb)["status"] == "running"
        assert sandbox_json(http, sb)["runtime_generation"] == 2
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_a_session_call_on_a_paused_sandbox_gets_503_when_auto_resume_is_off(http, server):
    sb = claim(http, {"auto_resume": False})
    try:
        sid = create_session(http, sb, SLEEP)["id"]
        ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
        err(http.get(spath(sb, sid)), 503, "unavailable")
        err(http.post(spath(sb, sid, "/inputs"), json={"input_id": "x", "data_base64": "eA=="}),
            503, "unavailable")
        err(http.get(spath(sb, sid, "/events")), 503, "unavailable")
        with pytest.raises(InvalidStatus) as refused:  # a WebSocket upgrade is refused before the 101
            connect(server.url.replace("http", "ws", 1) + spath(sb, sid, "/ws"),
                    additional_headers={"Authorization": f"Bearer {TOKEN}"}, open_timeout=10).close()
        assert refused.value.response.status_code == 503
        assert sandbox_json(http, sb)["status"] == "paused"
        assert sandbox_json(http, sb)["runtime_generation"] == 1
        ok(http.post(f"/api/v1/sandboxes/{sb}/resume", json={}), 200)  # an explicit resume works
        assert get_session(http, sb, sid)["attempt"]["number"] == 2
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_an_unauthenticated_call_never_wakes_a_paused_sandbox(http, server):
    sb = claim(http)
    try:
        ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
        assert httpx.get(f"{server.url}{spath(sb)}", timeout=10).status_code == 401
        assert sandbox_json(http, sb)["status"] == "paused"
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_the_sdk_open_context_claims_and_deletes_even_with_auto_resume_off(sdk):
    with sdk.sandboxes.open("coding-agent", config=SandboxConfig(auto_resume=False)) as sb:
        assert sdk.sandboxes.get(sb.id).auto_resume is False
        sdk.sandboxes.pause_and_wait(sb.id, timeout_sec=30)
    with pytest.raises(Exception) as caught:
        sdk.sandboxes.get(sb.id)
    assert getattr(caught.value, "status_code", None) == 404


def test_updating_a_paused_sandbox_changes_only_its_record(http):
    sb = claim(http)
    try:
        ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
        updated = ok(http.put(f"/api/v1/sandboxes/{sb}", json={"config": {"auto_resume": False}}), 200)
        assert (updated["status"], updated["auto_resume"]) == ("paused", False)
        assert updated["runtime_generation"] == 1
        refreshed = ok(http.post(f"/api/v1/sandboxes/{sb}/refresh", json={}), 200)
        # No ttl configured: both deadlines stay disabled (the zero time, which every SDK parses).
        assert refreshed == {"sandbox_id": sb, "expires_at": "0001-01-01T00:00:00Z",
                             "hard_expires_at": "0001-01-01T00:00:00Z"}
        resumed = ok(http.post(f"/api/v1/sandboxes/{sb}/resume", json={}), 200)
        assert resumed == {"sandbox_id": sb, "resumed": True}
        assert sandbox_json(http, sb)["auto_resume"] is False
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_a_memory_change_is_a_runtime_replacement(http):
    sb = claim(http)
    try:
        sid = create_session(http, sb, SLEEP)["id"]
        updated = ok(http.put(f"/api/v1/sandboxes/{sb}",
                              json={"config": {"resources": {"memory": "512Mi"}}}), 200)
        assert updated["runtime_generation"] == 2 and updated["resources"] == {"memory": "512Mi"}
        attempt = get_session(http, sb, sid)["attempt"]
        assert (attempt["number"], attempt["runtime_generation"]) == (2, 2)
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")


def test_ttl_pauses_and_hard_ttl_deletes_even_a_paused_sandbox(http, server):
    sb = claim(http, {"ttl": 1, "hard_ttl": 4})
    sid = create_session(http, sb, SLEEP)["id"]
    pid = get_session(http, sb, sid)["attempt"]["pid"]
    states = []

    def status():
        resp = http.get(f"/api/v1/sandboxes/{sb}")
        states.append(resp.json()["data"]["status"] if resp.status_code == 200 else resp.status_code)
        return states[-1]

    wait_for(lambda: status() == "paused", timeout=10, interval=0.1, describe=lambda: states[-5:])
    assert gone(pid)
    wait_for(lambda: status() == 404, timeout=15, interval=0.1, describe=lambda: states[-5:])
    # The sandbox leaves the registry first (no call may reach it while it is torn down),
    # then its directory goes.
    directory = server.data_dir / "sandboxes" / sb
    wait_for(lambda: not directory.exists(), timeout=10, describe=lambda: str(directory))
    err(http.post(f"/api/v1/sandboxes/{sb}/resume", json={}), 404, "not_found")


def test_deleting_a_paused_sandbox_removes_its_directory_and_store(http, server):
    sb = claim(http)
    create_session(http, sb, SLEEP)
    ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
    state = server.data_dir / "sandboxes" / sb / "state"
    assert (state / "checkpoint.json.zst").exists() and not os.path.exists(state / "journal.sqlite-wal")
    assert ok(http.delete(f"/api/v1/sandboxes/{sb}"), 202) == {"message": "sandbox terminated successfully"}
    err(http.get(f"/api/v1/sandboxes/{sb}"), 404, "not_found")  # refused at once; removed right after
    wait_for(lambda: not (server.data_dir / "sandboxes" / sb).exists(), describe=lambda: "directory still there")
    err(http.get(spath(sb)), 404, "not_found")


def test_a_corrupt_checkpoint_manifest_fails_the_resume_and_keeps_the_sandbox_paused(http, server):
    sb = claim(http)
    try:
        ok(http.post(f"/api/v1/sandboxes/{sb}/pause", json={}), 200)
        (server.data_dir / "sandboxes" / sb / "state" / "checkpoint.json.zst").write_bytes(b"not zstd")
        err(http.post(f"/api/v1/sandboxes/{sb}/resume", json={}), 503, "sandbox_resume_failed")
        err(http.get(spath(sb)), 503, "sandbox_resume_failed")
        assert sandbox_json(http, sb)["status"] == "paused"
    finally:
        http.delete(f"/api/v1/sandboxes/{sb}")
