"""Stored event classes of the Session and Sandbox aggregates.

Every class has an explicit, stable TOPIC (D7): moving or renaming a class never
changes the stored format. Each Session event maps to exactly one public journal
type in ``journal.py``. ``apply`` bodies only assign: they re-run on every replay.
Every Session event carries ``attempt_id`` ("" when none) and ``generation`` (the
runtime generation the public record shows).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from eventsourcing.domain import (
    CanCreateTimestamp,
    CanInitAggregate,
    CanMutateAggregate,
    CanSnapshotAggregate,
    MetaDomainEvent,
)

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def timestamp_of(at_ns: int) -> datetime:
    return EPOCH + timedelta(microseconds=at_ns // 1000)


def ns_of(timestamp: datetime) -> int:
    delta = timestamp - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


class StrDomainEvent(CanCreateTimestamp, metaclass=MetaDomainEvent):
    """The library's DomainEvent insists on UUID ids; ours are ``ses-…`` strings (D6)."""

    originator_id: str
    originator_version: int
    timestamp: datetime


class Snapshot(CanSnapshotAggregate[str], StrDomainEvent):
    TOPIC = "supervisor.Snapshot"
    topic: str
    state: dict


class SessionEvent(CanMutateAggregate[str], StrDomainEvent):
    TOPIC = "supervisor.Session.Event"
    attempt_id: str
    generation: int


class Created(CanInitAggregate[str], SessionEvent):
    TOPIC = "supervisor.Session.Created"
    originator_topic: str
    sandbox_id: str
    spec: dict
    creation_key: str

    def apply(self, s) -> None:
        at_ns = ns_of(self.timestamp)
        s.sandbox_id = self.sandbox_id
        s.spec = self.spec
        s.spec_version = 1
        s.phase = "pending"
        s.generation = self.generation
        s.attempts = []
        s.restart_count = 0
        s.restart_window_ns = []
        s.created_ns = s.updated_ns = s.last_activity_ns = at_ns
        s.creation_key = self.creation_key
        s.receipts = {}
        s.terminal_size = None
        s.stopping_reason = ""
        s.expired = False
        s.earliest_seq = 1
        s.retained_bytes = 0
        s.retention_marks = []


class Updated(SessionEvent):
    TOPIC = "supervisor.Session.Updated"
    spec: dict

    def apply(self, s) -> None:
        s.spec = self.spec
        s.spec_version += 1
        s.updated_ns = ns_of(self.timestamp)


class DesiredStateChanged(SessionEvent):
    TOPIC = "supervisor.Session.DesiredStateChanged"
    state: str
    phase: str  # "" keeps the phase

    def apply(self, s) -> None:
        s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state=self.state))
        s.spec_version += 1
        s.updated_ns = ns_of(self.timestamp)
        if self.phase:
            s.phase = self.phase


class AttemptStarting(SessionEvent):
    TOPIC = "supervisor.Session.AttemptStarting"
    number: int
    reason: str
    requested: bool  # POST attempts: desired state -> running and spec_version + 1

    def apply(self, s) -> None:
        s.attempts.append({"id": self.attempt_id, "number": self.number,
                           "runtime_generation": self.generation, "start_reason": self.reason})
        s.generation = self.generation
        s.phase = "starting"
        s.stopping_reason = ""
        s.updated_ns = ns_of(self.timestamp)
        if self.requested:
            s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state="running"))
            s.spec_version += 1


class AttemptStarted(SessionEvent):
    TOPIC = "supervisor.Session.AttemptStarted"
    pid: int
    start_time: int

    def apply(self, s) -> None:
        at_ns = ns_of(self.timestamp)
        s.attempts[-1].update(pid=self.pid, start_time=self.start_time, started_ns=at_ns)
        s.updated_ns = at_ns


class Ready(SessionEvent):
    TOPIC = "supervisor.Session.Ready"

    def apply(self, s) -> None:
        at_ns = ns_of(self.timestamp)
        s.attempts[-1]["ready_ns"] = at_ns
        s.phase = "running"
        s.updated_ns = at_ns


class Output(SessionEvent):
    TOPIC = "supervisor.Session.Output"
    stream: str
    data: bytes

    def apply(self, s) -> None:
        s.last_activity_ns = ns_of(self.timestamp)


class InputAccepted(SessionEvent):
    TOPIC = "supervisor.Session.InputAccepted"
    input_id: str
    digest: str

    def apply(self, s) -> None:
        receipts = s.receipts
        receipts.pop(self.input_id, None)
        receipts[self.input_id] = [self.attempt_id, self.digest]
        if len(receipts) > 1024:  # keep the most recent 1024 receipts (contract §6.9)
            del receipts[next(iter(receipts))]
        s.last_activity_ns = s.updated_ns = ns_of(self.timestamp)


class SignalSent(SessionEvent):
    TOPIC = "supervisor.Session.SignalSent"
    signal: int
    description: str

    def apply(self, s) -> None:
        s.last_activity_ns = ns_of(self.timestamp)


class TerminalResized(SessionEvent):
    TOPIC = "supervisor.Session.TerminalResized"
    rows: int
    cols: int

    def apply(self, s) -> None:
        s.terminal_size = [self.rows, self.cols]
        s.last_activity_ns = ns_of(self.timestamp)


class AttemptStopping(SessionEvent):
    TOPIC = "supervisor.Session.AttemptStopping"
    reason: str

    def apply(self, s) -> None:
        s.stopping_reason = self.reason
        s.phase = "stopping"
        s.updated_ns = ns_of(self.timestamp)


class AttemptExited(SessionEvent):
    TOPIC = "supervisor.Session.AttemptExited"
    exit_code: int | None
    signal: int | None
    reason: str
    phase: str  # the phase the session rests in after this exit
    new_generation: int  # differs from ``generation`` only for runtime_replaced

    def apply(self, s) -> None:
        at_ns = ns_of(self.timestamp)
        attempt = s.attempts[-1]
        attempt.pop("pid", None)
        attempt.update(finished_ns=at_ns, reason=self.reason)
        if self.exit_code is not None:
            attempt["exit_code"] = self.exit_code
        if self.signal is not None:
            attempt["signal"] = self.signal
        s.phase = self.phase
        s.generation = self.new_generation
        s.stopping_reason = ""
        s.last_activity_ns = s.updated_ns = at_ns


class BackoffScheduled(SessionEvent):
    TOPIC = "supervisor.Session.BackoffScheduled"
    delay_ms: int
    window_ns: list

    def apply(self, s) -> None:
        s.restart_window_ns = list(self.window_ns)
        s.restart_count += 1
        s.phase = "backoff"
        s.updated_ns = ns_of(self.timestamp)


class Failed(SessionEvent):
    TOPIC = "supervisor.Session.Failed"
    reason: str

    def apply(self, s) -> None:
        s.phase = "failed"
        s.updated_ns = ns_of(self.timestamp)


class Paused(SessionEvent):
    TOPIC = "supervisor.Session.Paused"

    def apply(self, s) -> None:
        s.phase = "paused"
        s.updated_ns = ns_of(self.timestamp)


class Resumed(SessionEvent):
    TOPIC = "supervisor.Session.Resumed"

    def apply(self, s) -> None:
        s.phase = "running"
        s.updated_ns = ns_of(self.timestamp)


class RecoveryStopped(SessionEvent):
    TOPIC = "supervisor.Session.RecoveryStopped"

    def apply(self, s) -> None:
        s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state="stopped"))
        s.phase = "stopped"
        s.generation = self.generation
        s.restart_window_ns = []
        s.updated_ns = ns_of(self.timestamp)


class Expired(SessionEvent):
    TOPIC = "supervisor.Session.Expired"

    def apply(self, s) -> None:
        s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state="stopped"))
        s.expired = True
        s.updated_ns = ns_of(self.timestamp)


def register_topics(*classes: type) -> None:
    """Make explicit TOPICs resolvable (the library only registers classes nested in aggregates)."""
    from eventsourcing.utils import register_topic

    for cls in classes:
        register_topic(cls.TOPIC, cls)


register_topics(Snapshot, Created, Updated, DesiredStateChanged, AttemptStarting, AttemptStarted, Ready,
                Output, InputAccepted, SignalSent, TerminalResized, AttemptStopping, AttemptExited,
                BackoffScheduled, Failed, Paused, Resumed, RecoveryStopped, Expired)
