"""Build Session aggregates in a given phase through their own commands (no I/O, no clock)."""
from __future__ import annotations

from session_supervisor.domain.model.session import START_FAILED, Session
from session_supervisor.domain.model.spec import normalize_spec

T0 = 1_767_225_600_000_000_000
SECOND = 1_000_000_000


def new_session(policy: str = "never", max_restarts: int = 5, desired: str = "running") -> Session:
    spec = normalize_spec({"command": ["worker"], "lifecycle": {
        "desired_state": desired, "restart": {"policy": policy, "max_restarts": max_restarts}}})
    return Session.create("ses-00000001-001", "sb-test", spec, "", 1, T0)


_attempts = iter(range(1, 1_000_000))


def start(session: Session, reason: str = "created", at: int = T0) -> Session:
    session.begin_attempt(f"att-{next(_attempts):08x}-000", reason, session.generation, at)
    return session


def run(session: Session, at: int = T0) -> Session:
    start(session, at=at)
    session.record_started(4242, 0, at)
    session.record_ready(at)
    return session


def fill_restart_window(session: Session, at: int = T0) -> Session:
    """Restart-policy exits until the next failing exit exceeds the limit; leaves it running."""
    for _ in range(session.spec["lifecycle"]["restart"]["max_restarts"]):
        session.record_exit(1, None, at)
        run(session, at)
    return session


def reach(phase: str) -> Session:
    """A session resting in ``phase``, reached only through commands."""
    if phase == "pending":
        return new_session()
    if phase == "starting":
        return start(new_session())
    if phase == "running":
        return run(new_session())
    if phase == "paused":
        session = run(new_session())
        session.freeze(T0)
        return session
    if phase == "stopping":
        session = run(new_session())
        session.begin_stop("desired_state_stopped", T0)
        return session
    if phase == "stopped":
        session = new_session()
        session.set_desired_state("stopped", T0)
        return session
    if phase == "exited":
        session = run(new_session())
        session.record_exit(0, None, T0)
        return session
    if phase == "backoff":
        session = run(new_session(policy="on_failure"))
        session.record_exit(1, None, T0)
        return session
    if phase == "failed":
        session = start(new_session())
        session.record_exit(None, None, T0, reason=START_FAILED)
        return session
    if phase == "suspended":
        session = run(new_session())
        session.recover(2, T0)
        return session
    raise ValueError(phase)
