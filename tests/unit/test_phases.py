"""The ALLOWED table of domain/model/phases.py, walked edge by edge through the aggregate.

Every edge has a story made of Session commands; every story lands where the table says;
the table has no edge without a story; a move outside the table is refused when it is
commanded and only flagged when it is replayed from an old journal.
"""
from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from session_supervisor.domain.model import events as ev
from session_supervisor.domain.model.errors import DomainError, PhaseTransitionError
from session_supervisor.domain.model.phases import ALLOWED, LIVE_PHASES, Phase
from session_supervisor.domain.model.session import START_FAILED, Session
from tests.unit.sessions import T0, fill_restart_window, new_session, reach, run, start

ROOT = Path(__file__).resolve().parents[2]


def _stop_requested_then_exit(session: Session) -> None:
    session.set_desired_state("stopped", T0)  # the process ends before the stop begins
    session.record_exit(0, None, T0)


def _on_failure(phase: str):
    def setup() -> Session:
        session = run(new_session(policy="on_failure"))
        if phase == "starting":
            session = start(new_session(policy="on_failure"))
        if phase == "paused":
            session.freeze(T0)
        return session
    return setup


def _window_full(phase: str):
    def setup() -> Session:
        session = fill_restart_window(run(new_session(policy="on_failure", max_restarts=2)))
        if phase == "paused":
            session.freeze(T0)
        return session
    return setup


def _expire_then_exit(session: Session) -> None:
    session.expire(T0)
    session.record_exit(0, None, T0)


# (source, target) -> (setup giving a session in source or None for reach(source), the move)
EDGES = {
    ("pending", "starting"): (None, lambda s: start(s)),
    ("pending", "stopped"): (None, lambda s: s.set_desired_state("stopped", T0)),
    ("starting", "running"): (None, lambda s: (s.record_started(7, 0, T0), s.record_ready(T0))),
    ("starting", "stopping"): (None, lambda s: s.begin_stop("desired_state_stopped", T0)),
    ("starting", "stopped"): (None, _stop_requested_then_exit),
    ("starting", "exited"): (None, lambda s: s.record_exit(0, None, T0)),
    ("starting", "backoff"): (_on_failure("starting"), lambda s: s.record_exit(1, None, T0)),
    ("starting", "failed"): (None, lambda s: s.record_exit(None, None, T0, reason=START_FAILED)),
    ("starting", "paused"): (None, lambda s: s.freeze(T0)),
    ("starting", "suspended"): (None, lambda s: s.recover(2, T0)),
    ("running", "stopping"): (None, lambda s: s.begin_stop("session_deleted", T0)),
    ("running", "stopped"): (None, _expire_then_exit),
    ("running", "exited"): (None, lambda s: s.record_exit(0, None, T0)),
    ("running", "backoff"): (_on_failure("running"), lambda s: s.record_exit(-1, 9, T0)),
    ("running", "failed"): (_window_full("running"), lambda s: s.record_exit(1, None, T0)),
    ("running", "paused"): (None, lambda s: s.freeze(T0)),
    ("running", "suspended"): (None, lambda s: s.recover(2, T0)),
    ("paused", "running"): (None, lambda s: s.thaw(T0)),
    ("paused", "suspended"): (None, lambda s: s.recover(2, T0)),
    ("paused", "stopping"): (None, lambda s: s.begin_stop("desired_state_stopped", T0)),
    ("paused", "stopped"): (None, _stop_requested_then_exit),
    ("paused", "exited"): (None, lambda s: s.record_exit(-1, 9, T0)),
    ("paused", "backoff"): (_on_failure("paused"), lambda s: s.record_exit(-1, 9, T0)),
    ("paused", "failed"): (_window_full("paused"), lambda s: s.record_exit(-1, 9, T0)),
    ("stopping", "stopped"): (None, lambda s: s.record_exit(-1, 15, T0)),
    ("stopping", "suspended"): (None, lambda s: s.recover(2, T0)),
    ("stopped", "starting"): (None, lambda s: start(s, "desired_state_running")),
    ("exited", "starting"): (None, lambda s: start(s, "attempt_created")),
    ("exited", "stopped"): (None, lambda s: s.set_desired_state("stopped", T0)),
    ("backoff", "starting"): (None, lambda s: start(s, "restart_policy")),
    ("backoff", "stopped"): (None, lambda s: s.expire(T0)),
    ("failed", "starting"): (None, lambda s: start(s, "desired_state_running")),
    ("failed", "stopped"): (None, lambda s: s.set_desired_state("stopped", T0)),
    ("suspended", "starting"): (None, lambda s: start(s, "runtime_recovered")),
    ("suspended", "stopped"): (None, lambda s: s.set_desired_state("stopped", T0)),
}


def replayed(session: Session) -> Session:
    aggregate = None
    for event in session.collect_events():
        aggregate = event.mutate(aggregate)
    return aggregate


def test_the_table_names_every_phase_of_the_contract():
    assert set(ALLOWED) == set(Phase)
    assert all(targets <= set(Phase) for targets in ALLOWED.values())


def test_every_edge_of_the_table_has_a_story_and_no_story_is_off_the_table():
    table = {(source.value, target.value) for source, targets in ALLOWED.items() for target in targets}
    assert set(EDGES) == table


@pytest.mark.parametrize("phase", [p.value for p in Phase])
def test_every_phase_can_be_reached_through_commands(phase):
    assert reach(phase).phase == phase


@pytest.mark.parametrize(("source", "target"), sorted(EDGES), ids=lambda p: p)
def test_the_edge_is_taken_by_its_command_and_replays_to_the_same_place(source, target):
    setup, move = EDGES[(source, target)]
    session = setup() if setup else reach(source)
    assert session.phase == source
    move(session)
    assert session.phase == target
    assert not getattr(session, "irregular_moves", [])
    copy = replayed(session)
    assert (copy.phase, copy.attempts, copy.restart_count) == (target, session.attempts, session.restart_count)


@pytest.mark.parametrize(("source", "event", "fields"), [
    ("stopped", ev.Resumed, {}),
    ("backoff", ev.Ready, {}),
    ("exited", ev.AttemptStopping, {"reason": "desired_state_stopped"}),
    ("stopping", ev.Paused, {}),
])
def test_a_command_outside_the_table_is_refused_before_any_event_exists(source, event, fields):
    session = reach(source)
    version = session.version
    with pytest.raises(PhaseTransitionError):
        session._emit(event, T0, **fields)
    assert (session.phase, session.version) == (source, version)


def test_a_move_outside_the_table_in_an_old_journal_replays_and_is_flagged():
    session = reach("stopped")
    event = ev.Resumed(originator_id=session.id, originator_version=session.version + 1,
                       timestamp=ev.timestamp_of(T0), attempt_id="", generation=1)
    event.mutate(session)
    assert session.phase == "running"
    assert session.irregular_moves == ["stopped->running"]


def test_a_second_attempt_is_refused_while_one_is_live():
    session = reach("running")
    with pytest.raises(DomainError):
        start(session)
    assert len(session.attempts) == 1


def test_phases_change_only_inside_enter():
    """Rule 9: one choke point. Created sets the initial phase; everything else calls enter()."""
    offenders = []
    for path in sorted((ROOT / "domain").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr == "phase":
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert sorted(offenders) == sorted([_line_of("domain/model/events.py", 's.phase = "pending"'),
                                        _line_of("domain/model/phases.py", "aggregate.phase = target")])


def _line_of(relative: str, text: str) -> str:
    lines = (ROOT / relative).read_text().splitlines()
    return f"{relative}:{next(i for i, line in enumerate(lines, 1) if text in line)}"


@pytest.mark.parametrize("seed", range(12))
def test_random_command_walks_never_leave_the_table(seed):
    rng = random.Random(seed)
    session = new_session(policy=rng.choice(["never", "on_failure", "always"]), max_restarts=3)
    at = T0
    for _ in range(300):
        at += rng.randrange(0, 30) * 1_000_000_000
        _random_command(session, rng, at)
        assert not getattr(session, "irregular_moves", [])
    assert replayed(session).phase == session.phase


def _random_command(session: Session, rng: random.Random, at: int) -> None:
    live = session.has_live_attempt
    choice = rng.randrange(9)
    if choice == 0 and not live and session.desired_state == "running":
        start(session, rng.choice(["restart_policy", "attempt_created", "desired_state_running"]), at)
    elif choice == 1 and live and "started_ns" not in session.attempt:
        session.record_started(99, 0, at)
        if rng.random() < 0.7:
            session.record_ready(at)
    elif choice == 2 and live:
        session.record_exit(rng.choice([0, 1, -1, None]), None, at)
    elif choice == 3 and live and session.phase in LIVE_PHASES:
        session.begin_stop(rng.choice(["desired_state_stopped", "session_expired"]), at)
    elif choice == 4:
        session.set_desired_state(rng.choice(["running", "stopped"]), at)
    elif choice == 5:
        session.freeze(at) if rng.random() < 0.5 else session.thaw(at)
    elif choice == 6:
        session.expire(at)
    elif choice == 7 and rng.random() < 0.2:
        session.recover(session.generation + 1, at)
    elif choice == 8:
        spec = dict(session.spec, lifecycle=dict(session.spec["lifecycle"],
                                                 desired_state=rng.choice(["running", "stopped"])))
        session.update_spec(spec, at)
