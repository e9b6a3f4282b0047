"""Sandboxes across server restarts: a user pause stays paused, a clean shutdown checkpoints,
a crash (SIGKILL) is a runtime replacement that loses nothing acknowledged (issue 6).

Each test runs its own server on its own data directory.
"""
from __future__ import annotations

import sandbox0
from sandbox0.apispec.models.execution_session_lifecycle_spec import ExecutionSessionLifecycleSpec
from sandbox0.apispec.models.execution_session_phase import ExecutionSessionPhase
from sandbox0.apispec.models.execution_session_runtime_recovery_policy import (
    ExecutionSessionRuntimeRecoveryPolicy as RecoveryPolicy,
)
from sandbox0.apispec.models.execution_session_spec import ExecutionSessionSpec
from sandbox0.apispec.models.sandbox_lifecycle_status import SandboxLifecycleStatus

from tests.api.test_sandbox_lifecycle import gone
from tests.conftest import make_http
from tests.helpers import all_events, claim_sandbox, create_session, get_session, journal_tail, ok, \
    wait_event, wait_for, write_input
from tests.serverproc import ServerProcess

TOKEN = "restart-token"
SLEEP = ["sleep", "600"]


def kinds(events) -> list[tuple]:
    return [(e["type"], e.get("reason"), e["runtime_generation"]) for e in events]


def three_sessions(sb):
    """One that restarts after a runtime replacement, one that stops, one already exited."""
    keeps = sb.create_session(ExecutionSessionSpec(command=SLEEP))
    stop_policy = ExecutionSessionLifecycleSpec(runtime_recovery=RecoveryPolicy.STOP)
    stops = sb.create_session(ExecutionSessionSpec(command=SLEEP, lifecycle=stop_policy))
    done = sb.create_session(ExecutionSessionSpec(command=["true"]))
    wait_for(lambda: sb.get_session(done.id).phase == ExecutionSessionPhase.EXITED)
    return keeps, stops, done


def test_three_sessions_follow_their_recovery_policy_across_a_restart_while_paused(tmp_path):
    srv = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        with sandbox0.Client(token=TOKEN, base_url=srv.url, timeout=15.0) as client:
            sb = client.sandboxes.claim("default")
            keeps, stops, done = three_sessions(sb)
            pids = [keeps.attempt.pid, stops.attempt.pid]
            with make_http(srv.url, TOKEN) as http:
                done_journal = all_events(http, sb.id, done.id)
            paused = client.sandboxes.pause_and_wait(sb.id, timeout_sec=30)
            assert paused.status == SandboxLifecycleStatus.PAUSED and paused.paused
            assert all(gone(pid) for pid in pids), "the paused processes are gone"

        srv.stop()
        srv.start()
        with sandbox0.Client(token=TOKEN, base_url=srv.url, timeout=15.0) as client, \
                make_http(srv.url, TOKEN) as http:
            still = client.sandboxes.get(sb.id)
            assert (still.status, still.paused) == (SandboxLifecycleStatus.PAUSED, True)
            assert still.runtime_generation == 1
            resumed = client.sandboxes.resume_and_wait(sb.id, timeout_sec=30)
            assert (resumed.status, resumed.runtime_generation) == (SandboxLifecycleStatus.RUNNING, 2)
            handle = client.sandbox(sb.id)

            first = handle.get_session(keeps.id)
            assert (first.attempt.number, first.attempt.runtime_generation) == (2, 2)
            assert not gone(first.attempt.pid)
            assert kinds(all_events(http, sb.id, keeps.id))[-5:-2] == [
                ("session.paused", None, 1), ("attempt.exited", "runtime_replaced", 1),
                ("attempt.starting", "runtime_recovered", 2)]

            second = handle.get_session(stops.id)
            assert second.phase == ExecutionSessionPhase.STOPPED and second.attempt.number == 1
            assert kinds(all_events(http, sb.id, stops.id))[-3:] == [
                ("session.paused", None, 1), ("attempt.exited", "runtime_replaced", 1),
                ("session.stopped", "runtime_recovery_policy", 2)]

            third = handle.get_session(done.id)
            assert third.phase == ExecutionSessionPhase.EXITED and third.runtime_generation == 1
            assert all_events(http, sb.id, done.id) == done_journal, "the exited session is untouched"
            assert all(gone(pid) for pid in pids)
    finally:
        srv.stop()


def test_fifty_acknowledged_inputs_survive_a_kill_and_the_session_is_recovered(tmp_path):
    srv = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        with make_http(srv.url, TOKEN) as http:
            sb = claim_sandbox(http)
            cat = create_session(http, sb, {"command": ["/bin/cat"]})
            sleeper = create_session(http, sb, {"command": SLEEP})  # does not die with the server
            for i in range(50):
                write_input(http, sb, cat["id"], f"in-{i}", f"line {i}\n")
            latest_before = get_session(http, sb, cat["id"])["cursor"]["latest"]
        srv.kill()

        srv.start()
        with make_http(srv.url, TOKEN) as http:
            describe = lambda: journal_tail(http, sb, cat["id"])  # noqa: E731
            wait_event(http, sb, cat["id"], lambda e: e.get("reason") == "runtime_recovered")
            journal = all_events(http, sb, cat["id"])
            seqs = [e["seq"] for e in journal]
            assert seqs == list(range(1, len(seqs) + 1)), describe()
            accepted = [e for e in journal if e["type"] == "input.accepted"]
            assert len(accepted) == 50 and {e["attempt_id"] for e in accepted} == {cat["attempt"]["id"]}
            assert max(e["seq"] for e in accepted) <= latest_before
            replaced = next(e for e in journal if e.get("reason") == "runtime_replaced")
            assert replaced["seq"] > latest_before and replaced["attempt_id"] == cat["attempt"]["id"]
            now = get_session(http, sb, cat["id"])["attempt"]
            assert (now["number"], now["runtime_generation"]) == (2, 2)
            assert gone(cat["attempt"]["pid"]) and gone(sleeper["attempt"]["pid"])
            assert get_session(http, sb, sleeper["id"])["attempt"]["number"] == 2
    finally:
        srv.stop()


def test_a_clean_shutdown_checkpoints_running_sandboxes_and_keeps_user_pauses(tmp_path):
    srv = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        with make_http(srv.url, TOKEN) as http:
            running, paused = claim_sandbox(http), claim_sandbox(http)
            live = create_session(http, running, {"command": SLEEP})
            create_session(http, paused, {"command": SLEEP})
            ok(http.post(f"/api/v1/sandboxes/{paused}/pause", json={}), 200)
        srv.stop()
        assert gone(live["attempt"]["pid"]), "SIGTERM ends every process"
        state = srv.data_dir / "sandboxes" / running / "state"
        assert (state / "checkpoint.json.zst").exists(), "the shutdown went through the pause hook"

        srv.start()
        with make_http(srv.url, TOKEN) as http:
            back = ok(http.get(f"/api/v1/sandboxes/{running}"), 200)
            assert (back["status"], back["runtime_generation"]) == ("running", 2)
            still = ok(http.get(f"/api/v1/sandboxes/{paused}"), 200)
            assert (still["status"], still["runtime_generation"]) == ("paused", 1)
            journal = kinds(all_events(http, running, live["id"]))
            assert journal[-5:-2] == [("session.paused", None, 1), ("attempt.exited", "runtime_replaced", 1),
                                      ("attempt.starting", "runtime_recovered", 2)]
            assert not (state / "checkpoint.json.zst").exists(), "a crash from now on is not a pause"
    finally:
        srv.stop()


def test_a_torn_write_ahead_log_tail_is_ignored_and_no_seq_is_reused(tmp_path):
    srv = ServerProcess(tmp_path / "data", token=TOKEN).start()
    try:
        with make_http(srv.url, TOKEN) as http:
            sb = claim_sandbox(http)
            sid = create_session(http, sb, {"command": ["/bin/cat"]})["id"]
            write_input(http, sb, sid, "before", "x\n")
            before = all_events(http, sb, sid)
        srv.kill()
        wal = srv.data_dir / "sandboxes" / sb / "state" / "journal.sqlite-wal"
        with open(wal, "ab") as f:  # half a frame of garbage, as a write cut short by power loss
            f.write(b"\x37\x7f\x06\x82" + b"\xab" * 3000)

        srv.start()
        with make_http(srv.url, TOKEN) as http:
            wait_event(http, sb, sid, lambda e: e.get("reason") == "runtime_recovered")
            after = all_events(http, sb, sid)
            assert after[:len(before)] == before
            assert [e["seq"] for e in after] == list(range(1, len(after) + 1))
    finally:
        srv.stop()
