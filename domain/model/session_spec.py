"""A session's spec as typed, frozen records, built once from the normalized spec.

The normalized spec (``model.spec.normalize_spec``) stays a plain dict: it is what events store
and what the API echoes, and two specs are equal for idempotency exactly when their dicts are.
The code that acts on a spec (the attempt runner, expiry, retention, restarts) reads these records
instead of indexing the dict, so a field's name and type are checked in one place.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Terminal:
    rows: int
    cols: int
    term: str


@dataclass(frozen=True)
class Restart:
    policy: str  # never | on-failure | always
    max_restarts: int
    window_seconds: int
    initial_backoff_ms: int
    max_backoff_ms: int


@dataclass(frozen=True)
class Lifecycle:
    desired_state: str
    restart: Restart
    runtime_recovery: str  # restart | stop
    idle_timeout_seconds: int  # 0: none
    max_lifetime_seconds: int  # 0: none
    stop_grace_period_seconds: int

    @property
    def expires(self) -> bool:
        """Whether the session has an idle timeout or a lifetime at all (the expiry sweep's work)."""
        return bool(self.idle_timeout_seconds or self.max_lifetime_seconds)


@dataclass(frozen=True)
class Readiness:
    type: str  # process | delay | output
    delay_ms: int
    output: str
    timeout_ms: int

    @property
    def token(self) -> bytes:
        return self.output.encode()


@dataclass(frozen=True)
class EventRetention:
    max_bytes: int
    max_age_seconds: int


@dataclass(frozen=True)
class SessionSpec:
    command: tuple[str, ...]
    cwd: str
    env: tuple[tuple[str, str], ...]
    mode: str  # pipes | pty
    terminal: Terminal | None  # pty only
    lifecycle: Lifecycle
    readiness: Readiness
    event_retention: EventRetention

    @classmethod
    def of(cls, spec: dict) -> "SessionSpec":
        """From a normalized spec (every default filled in, optionals omitted)."""
        lifecycle, readiness, io = spec["lifecycle"], spec["readiness"], spec["io"]
        terminal = io.get("terminal")
        return cls(
            command=tuple(spec["command"]), cwd=spec.get("cwd", ""),
            env=tuple((spec.get("env") or {}).items()), mode=io["mode"],
            terminal=Terminal(terminal["rows"], terminal["cols"], terminal["term"]) if terminal else None,
            lifecycle=Lifecycle(
                desired_state=lifecycle["desired_state"], restart=Restart(**lifecycle["restart"]),
                runtime_recovery=lifecycle["runtime_recovery"],
                idle_timeout_seconds=lifecycle.get("idle_timeout_seconds", 0),
                max_lifetime_seconds=lifecycle.get("max_lifetime_seconds", 0),
                stop_grace_period_seconds=lifecycle["stop_grace_period_seconds"]),
            readiness=Readiness(readiness["type"], readiness.get("delay_ms", 0), readiness.get("output", ""),
                                readiness["timeout_ms"]),
            event_retention=EventRetention(**spec["event_retention"]))

    @property
    def is_pty(self) -> bool:
        return self.mode == "pty"


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt as the session's history holds it (a typed copy of the stored dict)."""

    id: str
    number: int
    runtime_generation: int
    start_reason: str
    pid: int = 0
    start_time: int = 0
    started_ns: int = 0
    ready_ns: int = 0
    finished_ns: int | None = None  # None while it runs
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None

    @classmethod
    def of(cls, attempt: dict) -> "AttemptRecord":
        return cls(**{name: value for name, value in attempt.items() if name in _ATTEMPT_FIELDS})

    @property
    def live(self) -> bool:
        return self.finished_ns is None


_ATTEMPT_FIELDS = frozenset(AttemptRecord.__dataclass_fields__)
