"""The Session aggregate's lifecycle commands: what they record and what they refuse."""
from __future__ import annotations

from session_supervisor.domain.model import events as ev
from session_supervisor.domain.model.session import START_FAILED
from tests.unit.sessions import SECOND, T0, new_session, reach, run, start


def types(session) -> list[str]:
    return [type(e).__name__ for e in session.collect_events()]


def test_the_reference_case_runs_three_attempts_counts_two_restarts_and_fails():
    session = run(new_session(policy="on_failure", max_restarts=2))
    at = T0
    for _ in range(2):
        decision = session.record_exit(7, None, at)
        assert decision.restart
        at += decision.delay_ms * 1_000_000
        run(session, at)
    decision = session.record_exit(7, None, at)
    assert not decision.restart
    assert [a["number"] for a in session.attempts] == [1, 2, 3]
    assert (session.restart_count, session.phase) == (2, "failed")
    assert types(session)[-2:] == ["AttemptExited", "Failed"]


def test_a_failed_start_has_no_exit_code_and_counts_as_exit_1():
    session = start(new_session(policy="on_failure"))
    decision = session.record_exit(None, None, T0, reason=START_FAILED)
    assert decision.restart and session.phase == "backoff"
    assert session.attempt["reason"] == START_FAILED and "exit_code" not in session.attempt


def test_a_failed_start_without_restart_rests_in_failed_without_session_failed():
    session = start(new_session(policy="never"))
    session.record_exit(None, None, T0, reason=START_FAILED)
    assert session.phase == "failed"
    assert "Failed" not in types(session)


def test_a_supervisor_stop_rests_in_stopped_with_the_stop_reason_and_never_restarts():
    session = run(new_session(policy="always"))
    session.begin_stop("attempt_replaced", T0)
    decision = session.record_exit(-1, 15, T0 + SECOND)
    assert not decision.restart
    assert (session.phase, session.attempt["reason"]) == ("stopped", "attempt_replaced")


def test_expiry_stops_desire_once_and_keeps_the_spec_version():
    session = run(new_session())
    assert session.expire(T0 + 2 * SECOND) is True
    assert session.expire(T0 + 3 * SECOND) is False  # desired state is already stopped
    assert (session.desired_state, session.spec_version, session.phase) == ("stopped", 1, "running")
    assert types(session).count("Expired") == 1


def test_expiry_with_nothing_running_rests_the_session_in_stopped():
    session = reach("backoff")
    session.expire(T0)
    assert session.phase == "stopped"


def test_a_revived_session_can_expire_again():
    session = reach("exited")
    session.expire(T0)
    session.set_desired_state("running", T0)
    start(session)
    assert session.expire(T0 + SECOND) is True
    assert types(session).count("Expired") == 2


def test_a_put_with_desired_stopped_and_nothing_running_rests_without_a_desired_state_event():
    session = reach("exited")
    spec = dict(session.spec, lifecycle=dict(session.spec["lifecycle"], desired_state="stopped"))
    session.update_spec(spec, T0)
    assert (session.phase, session.spec_version) == ("stopped", 2)
    assert "DesiredStateChanged" not in types(session)


def test_an_updated_event_stored_before_version_2_loads_without_a_phase():
    """Rule 3: Updated gained ``phase`` with class_version 2; a v1 record still replays."""
    from eventsourcing.persistence import Mapper, StoredEvent

    from session_supervisor.infra.codec import OrjsonTranscoder

    mapper = Mapper(transcoder=OrjsonTranscoder())
    session = reach("running")
    session.collect_events()
    session.update_spec(dict(session.spec, name="renamed"), T0)
    stored = mapper.to_stored_event(session.collect_events()[-1])
    state = mapper.transcoder.decode(stored.state)
    assert (state.pop("class_version"), state.pop("phase")) == (2, "")
    v1 = StoredEvent(stored.originator_id, stored.originator_version, stored.topic,
                     mapper.transcoder.encode(state))
    copy = reach("running")
    event = mapper.to_domain_event(v1)
    assert isinstance(event, ev.Updated) and event.phase == ""
    copy.collect_events()
    event.mutate(copy)
    assert (copy.phase, copy.spec["name"], copy.spec_version) == ("running", "renamed", 2)


def test_a_new_runtime_starts_with_an_empty_restart_window_but_keeps_restart_count():
    """Contract §6.2: the window is not carried over a daemon restart; restart_count is."""
    session = run(new_session(policy="on_failure", max_restarts=2))
    session.record_exit(1, None, T0)
    run(session)
    session.record_exit(1, None, T0)
    run(session)
    session.recover(2, T0)
    start(session, "runtime_recovered")
    decision = session.record_exit(1, None, T0 + SECOND)
    assert decision.restart and decision.delay_ms == 250
    assert session.restart_count == 3
