"""Stored event classes of the Session and Sandbox aggregates.

Every class has an explicit, stable TOPIC (docs/architecture.md, decision 7): moving or renaming a class never
changes the stored format. Each Session event maps to exactly one public journal
type in ``journal.py``. ``apply`` bodies only assign: they re-run on every replay.
Every Session event carries ``attempt_id`` ("" when none) and ``generation`` (the
runtime generation the public record shows).
"""
from __future__ import annotations

from eventsourcing.domain import CanInitAggregate, CanMutateAggregate

# Re-exported: the model reads the shared parts as ``ev.ns_of``, ``ev.Snapshot``, ...
from .event_base import Snapshot, StrDomainEvent, ns_of, register_topics, timestamp_of  # noqa: F401
from .phases import enter

class SessionEvent(CanMutateAggregate[str], StrDomainEvent):
    TOPIC = "supervisor.Session.Event"
    PHASE = ""  # the phase this event moves the session to ("" keeps it)
    attempt_id: str
    generation: int

    @classmethod
    def target_phase(cls, fields: dict) -> str:
        """The phase an event with these fields moves to: checked before it is triggered."""
        return cls.PHASE

    def mutate(self, aggregate):
        aggregate = super().mutate(aggregate)
        aggregate.account(self)  # retention marks: replay from snapshot + tail rebuilds them
        return aggregate


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
        s.journal_bytes = 0
        s.retention_marks = []

    def mutate(self, aggregate):
        session = super().mutate(aggregate)  # CanInitAggregate's: SessionEvent.mutate is not reached
        session.account(self)
        return session


class Updated(SessionEvent):
    TOPIC = "supervisor.Session.Updated"
    class_version = 2
    spec: dict
    phase: str  # v2: "stopped" when a PUT with desired state stopped finds nothing running

    @staticmethod
    def upcast_v1_v2(state: dict) -> None:
        state["phase"] = ""

    @classmethod
    def target_phase(cls, fields: dict) -> str:
        return fields.get("phase", "")

    def apply(self, s) -> None:
        s.spec = self.spec
        s.spec_version += 1
        s.updated_ns = ns_of(self.timestamp)
        enter(s, self.phase)  # EXITED|FAILED|BACKOFF|PENDING -> STOPPED


class DesiredStateChanged(SessionEvent):
    TOPIC = "supervisor.Session.DesiredStateChanged"
    state: str
    phase: str  # "" keeps the phase

    @classmethod
    def target_phase(cls, fields: dict) -> str:
        return fields.get("phase", "")

    def apply(self, s) -> None:
        s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state=self.state))
        s.spec_version += 1
        s.updated_ns = ns_of(self.timestamp)
        enter(s, self.phase)  # EXITED|FAILED|BACKOFF|PENDING -> STOPPED


class AttemptStarting(SessionEvent):
    TOPIC = "supervisor.Session.AttemptStarting"
    PHASE = "starting"
    number: int
    reason: str
    requested: bool  # POST attempts: desired state -> running and spec_version + 1

    def apply(self, s) -> None:
        s.attempts.append({"id": self.attempt_id, "number": self.number,
                           "runtime_generation": self.generation, "start_reason": self.reason})
        s.generation = self.generation
        enter(s, "starting")  # PENDING|STOPPED|EXITED|BACKOFF|FAILED|SUSPENDED -> STARTING
        s.stopping_reason = ""
        s.updated_ns = ns_of(self.timestamp)
        if self.requested:
            s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state="running"))
            s.spec_version += 1
        if self.reason == "runtime_recovered":  # restart times count within one runtime (the restart policy)
            s.restart_window_ns = []


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
    PHASE = "running"

    def apply(self, s) -> None:
        at_ns = ns_of(self.timestamp)
        s.attempts[-1]["ready_ns"] = at_ns
        enter(s, "running")  # STARTING -> RUNNING
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
    bytes: int  # added later: events stored before it lack bytes and eof
    eof: bool

    def apply(self, s) -> None:
        receipts = s.receipts
        receipts.pop(self.input_id, None)
        receipts[self.input_id] = [self.attempt_id, self.digest]
        if len(receipts) > 1024:  # keep the most recent 1024 receipts (the dedupe window of input ids)
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
    PHASE = "stopping"
    reason: str

    def apply(self, s) -> None:
        s.stopping_reason = self.reason
        enter(s, "stopping")  # STARTING|RUNNING|PAUSED -> STOPPING
        s.updated_ns = ns_of(self.timestamp)


class AttemptExited(SessionEvent):
    TOPIC = "supervisor.Session.AttemptExited"
    exit_code: int | None
    signal: int | None
    reason: str
    phase: str  # the phase the session rests in after this exit
    new_generation: int  # differs from ``generation`` only for runtime_replaced

    @classmethod
    def target_phase(cls, fields: dict) -> str:
        return fields.get("phase", "")

    def apply(self, s) -> None:
        at_ns = ns_of(self.timestamp)
        attempt = s.attempts[-1]
        # pid stays in the history for auditors; the Session resource omits it once finished.
        attempt.update(finished_ns=at_ns, reason=self.reason)
        if self.exit_code is not None:
            attempt["exit_code"] = self.exit_code
        if self.signal is not None:
            attempt["signal"] = self.signal
        enter(s, self.phase)  # STARTING|RUNNING|PAUSED|STOPPING -> EXITED|BACKOFF|FAILED|STOPPED|SUSPENDED
        s.generation = self.new_generation
        s.stopping_reason = ""
        s.last_activity_ns = s.updated_ns = at_ns


class BackoffScheduled(SessionEvent):
    TOPIC = "supervisor.Session.BackoffScheduled"
    PHASE = "backoff"
    delay_ms: int
    window_ns: list

    def apply(self, s) -> None:
        s.restart_window_ns = list(self.window_ns)
        s.restart_count += 1
        enter(s, "backoff")  # already BACKOFF: the exit before it rested there
        s.updated_ns = ns_of(self.timestamp)


class Failed(SessionEvent):
    TOPIC = "supervisor.Session.Failed"
    PHASE = "failed"
    reason: str

    def apply(self, s) -> None:
        enter(s, "failed")  # already FAILED: the exit before it rested there
        s.updated_ns = ns_of(self.timestamp)


class Paused(SessionEvent):
    TOPIC = "supervisor.Session.Paused"
    PHASE = "paused"

    def apply(self, s) -> None:
        enter(s, "paused")  # STARTING|RUNNING -> PAUSED
        s.updated_ns = ns_of(self.timestamp)


class Resumed(SessionEvent):
    TOPIC = "supervisor.Session.Resumed"
    PHASE = "running"

    def apply(self, s) -> None:
        enter(s, "running")  # PAUSED -> RUNNING
        s.updated_ns = ns_of(self.timestamp)


class RecoveryStopped(SessionEvent):
    TOPIC = "supervisor.Session.RecoveryStopped"
    PHASE = "stopped"

    def apply(self, s) -> None:
        s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state="stopped"))
        enter(s, "stopped")  # SUSPENDED|PENDING|BACKOFF -> STOPPED
        s.generation = self.generation
        s.restart_window_ns = []
        s.updated_ns = ns_of(self.timestamp)


class Expired(SessionEvent):
    TOPIC = "supervisor.Session.Expired"
    phase: str  # "stopped" when nothing is running; else the stop that follows rests it

    @classmethod
    def target_phase(cls, fields: dict) -> str:
        return fields.get("phase", "")

    def apply(self, s) -> None:
        s.spec = dict(s.spec, lifecycle=dict(s.spec["lifecycle"], desired_state="stopped"))
        s.expired = True
        s.updated_ns = ns_of(self.timestamp)
        enter(s, self.phase)  # EXITED|FAILED|BACKOFF|PENDING -> STOPPED


register_topics(Snapshot, Created, Updated, DesiredStateChanged, AttemptStarting, AttemptStarted, Ready,
                Output, InputAccepted, SignalSent, TerminalResized, AttemptStopping, AttemptExited,
                BackoffScheduled, Failed, Paused, Resumed, RecoveryStopped, Expired)
