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
# Phases a runtime replacement treats as "previously active" (contract §6.6).
ACTIVE_PHASES = frozenset(
    {Phase.PENDING, Phase.STARTING, Phase.RUNNING, Phase.PAUSED, Phase.BACKOFF, Phase.SUSPENDED}
)
# Phases with no attempt running and nothing scheduled.
RESTING_PHASES = frozenset({Phase.PENDING, Phase.STOPPED, Phase.EXITED, Phase.FAILED})

P = Phase
ALLOWED: dict[Phase, frozenset[Phase]] = {
    P.PENDING: frozenset({P.STARTING, P.STOPPED, P.FAILED}),
    P.STARTING: frozenset({P.RUNNING, P.STOPPING, P.STOPPED, P.EXITED, P.BACKOFF, P.FAILED,
                           P.PAUSED, P.SUSPENDED, P.STARTING}),
    P.RUNNING: frozenset({P.STOPPING, P.STOPPED, P.EXITED, P.BACKOFF, P.FAILED, P.PAUSED,
                          P.SUSPENDED}),
    P.PAUSED: frozenset({P.RUNNING, P.SUSPENDED, P.STOPPING, P.STOPPED, P.EXITED, P.BACKOFF,
                         P.FAILED}),
    P.STOPPING: frozenset({P.STOPPED, P.SUSPENDED}),
    P.STOPPED: frozenset({P.STARTING, P.FAILED, P.STOPPED}),
    P.EXITED: frozenset({P.STARTING, P.STOPPED, P.FAILED}),
    P.BACKOFF: frozenset({P.STARTING, P.STOPPED, P.FAILED, P.SUSPENDED}),
    P.FAILED: frozenset({P.STARTING, P.STOPPED, P.FAILED}),
    P.SUSPENDED: frozenset({P.STARTING, P.STOPPED, P.FAILED}),
}


def can_move(source: Phase, target: Phase) -> bool:
    return target in ALLOWED[source]
