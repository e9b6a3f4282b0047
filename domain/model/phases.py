"""Phases, desired states and policies, with the one table of allowed phase transitions."""
from __future__ import annotations

from enum import StrEnum


class Phase(StrEnum):
    PENDING = "pending"
    STARTING = "starting"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"
    STOPPED = "stopped"
    EXITED = "exited"
    BACKOFF = "backoff"
    FAILED = "failed"
    SUSPENDED = "suspended"


class DesiredState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"


class RestartPolicy(StrEnum):
    NEVER = "never"
    ON_FAILURE = "on_failure"
    ALWAYS = "always"


class RuntimeRecovery(StrEnum):
    RESTART = "restart"
    STOP = "stop"


class ReadinessKind(StrEnum):
    PROCESS = "process"
    DELAY = "delay"
    OUTPUT = "output"


class IoMode(StrEnum):
    PIPES = "pipes"
    PTY = "pty"


# Phases in which an attempt's process may be alive.
LIVE_PHASES = frozenset({Phase.STARTING, Phase.RUNNING, Phase.PAUSED, Phase.STOPPING})
# Phases a runtime replacement treats as "previously active" (runtime recovery).
ACTIVE_PHASES = frozenset(
    {Phase.PENDING, Phase.STARTING, Phase.RUNNING, Phase.PAUSED, Phase.BACKOFF, Phase.SUSPENDED}
)
# Phases with no attempt running and nothing scheduled.
RESTING_PHASES = frozenset({Phase.PENDING, Phase.STOPPED, Phase.EXITED, Phase.FAILED})

P = Phase
# Every edge a session's phase may take. Assigning the phase it already
# has is not a transition (an exit that lands in BACKOFF, then session.backoff).
# ``enter`` below is the one place a phase changes; tests/unit/test_phases.py walks
# every edge of this table through the aggregate's commands.
ALLOWED: dict[Phase, frozenset[Phase]] = {
    P.PENDING: frozenset({P.STARTING, P.STOPPED}),
    P.STARTING: frozenset({P.RUNNING, P.STOPPING, P.STOPPED, P.EXITED, P.BACKOFF, P.FAILED,
                           P.PAUSED, P.SUSPENDED}),
    P.RUNNING: frozenset({P.STOPPING, P.STOPPED, P.EXITED, P.BACKOFF, P.FAILED, P.PAUSED,
                          P.SUSPENDED}),
    P.PAUSED: frozenset({P.RUNNING, P.SUSPENDED, P.STOPPING, P.STOPPED, P.EXITED, P.BACKOFF,
                         P.FAILED}),
    P.STOPPING: frozenset({P.STOPPED, P.SUSPENDED}),
    P.STOPPED: frozenset({P.STARTING}),
    P.EXITED: frozenset({P.STARTING, P.STOPPED}),
    P.BACKOFF: frozenset({P.STARTING, P.STOPPED}),
    P.FAILED: frozenset({P.STARTING, P.STOPPED}),
    P.SUSPENDED: frozenset({P.STARTING, P.STOPPED}),
}


def can_move(source: Phase, target: Phase) -> bool:
    return target == source or target in ALLOWED[source]


def enter(aggregate, target: str) -> None:
    """Set ``aggregate.phase``: the one place a session's phase changes.

    Event bodies call this, so it must never raise: a replayed journal written by an
    older build may hold a move outside ALLOWED. Such a move is kept (the journal is the
    truth) and noted in ``irregular_moves``; new moves are refused before their event
    exists (``Session._emit``).
    """
    source = aggregate.phase
    if not target or target == source:
        return
    if target not in ALLOWED.get(source, ()):
        aggregate.irregular_moves = [*getattr(aggregate, "irregular_moves", ()), f"{source}->{target}"]
    aggregate.phase = target
