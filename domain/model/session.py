"""The Session aggregate: public commands check, then trigger events that only assign.

The aggregate's stored events are the public journal (one stream per session): ``seq`` is its version.
State stays small (never output bytes, so loading is cheap): spec, phase, attempt history, counters, receipts, marks.
"""
from __future__ import annotations

import hashlib

from eventsourcing.domain import BaseAggregate

from . import events as ev
from .errors import (
    AttemptMismatchError,
    AttemptRunningError,
    InputIdReusedError,
    PhaseTransitionError,
    PtyUnavailableError,
    SessionNotRunningError,
)
from .phases import ACTIVE_PHASES, LIVE_PHASES, DesiredState, Phase, can_move
from .policies import RESTART_LIMIT_EXCEEDED, RestartDecision, decide_restart
from .retention import account as account_retention
from .session_spec import AttemptRecord, SessionSpec

START_FAILED = "start_failed"
RUNTIME_REPLACED = "runtime_replaced"
READINESS_TIMEOUT = "readiness_timeout"


def input_digest(attempt_id: str, data: bytes, eof: bool) -> str:
    """The input digest: SHA-256 over attempt id, a 0 byte, the data, then 1/0 for eof."""
    h = hashlib.sha256(attempt_id.encode())
    h.update(b"\x00")
    h.update(data)
    h.update(b"\x01" if eof else b"\x00")
    return h.hexdigest()


def process_exit_reason(exit_code: int | None, signal: int | None) -> str:
    if signal is not None or exit_code in (-1, 137):
        return "killed"
    return "stopped" if exit_code == 0 else "crashed"


_VIEW_COPIED = ("id", "version", "spec", "spec_version", "phase", "generation", "restart_count",
                "created_ns", "updated_ns", "last_activity_ns")


class SessionView:
    """What the API shows of a session: its state as of its last *committed* event. The live
    aggregate runs ahead of the writer (an exit is recorded before its commit), and a client
    that reads ``exited`` must find ``attempt.exited`` in the journal it reads next."""

    __slots__ = ("id", "version", "spec", "spec_version", "phase", "generation", "attempt",
                 "restart_count", "created_ns", "updated_ns", "last_activity_ns")

    def __init__(self, session: "Session") -> None:
        for name in _VIEW_COPIED:  # a copy of the state: no phase is changed here
            setattr(self, name, getattr(session, name))  # the spec is replaced, never changed in place
        self.attempt = dict(session.attempts[-1]) if session.attempts else None  # events change it in place

    @property
    def attempts(self) -> list[dict]:
        return [self.attempt] if self.attempt is not None else []

    @property
    def is_pty(self) -> bool:
        return self.spec["io"]["mode"] == "pty"

    @property
    def desired_state(self) -> str:
        return self.spec["lifecycle"]["desired_state"]


class Session(BaseAggregate[str]):
    TOPIC = "supervisor.Session"

    def __init__(self) -> None:  # state is assigned by the Created event
        pass

    @classmethod
    def create(cls, session_id: str, sandbox_id: str, spec: dict, creation_key: str,
               generation: int, at_ns: int) -> "Session":
        return cls._create(ev.Created, id=session_id, sandbox_id=sandbox_id, spec=spec,
                           creation_key=creation_key, attempt_id="", generation=generation,
                           timestamp=ev.timestamp_of(at_ns))

    # ---- queries -------------------------------------------------------------------------
    def view(self) -> SessionView:
        return SessionView(self)

    @property
    def settings(self) -> SessionSpec:
        """The spec as typed records, built once per spec (a spec is replaced, never changed in
        place). Kept out of snapshots (``retention.take_snapshot``)."""
        cached = self.__dict__.get("_settings")
        if cached is None or cached[0] is not self.spec:
            cached = self.__dict__["_settings"] = (self.spec, SessionSpec.of(self.spec))
        return cached[1]

    @property
    def attempt(self) -> dict | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def current_attempt(self) -> AttemptRecord | None:
        return AttemptRecord.of(self.attempts[-1]) if self.attempts else None

    @property
    def attempt_id(self) -> str:
        return self.attempts[-1]["id"] if self.attempts else ""

    @property
    def desired_state(self) -> str:
        return self.spec["lifecycle"]["desired_state"]

    @property
    def has_live_attempt(self) -> bool:
        attempt = self.attempt
        return attempt is not None and "finished_ns" not in attempt

    @property
    def is_running(self) -> bool:
        return self.has_live_attempt and self.phase in LIVE_PHASES

    @property
    def is_pty(self) -> bool:
        return self.spec["io"]["mode"] == "pty"

    def account(self, event) -> None:
        """Called by every applied event (also on replay): the journal window's marks."""
        account_retention(self, event)

    # ---- commands ------------------------------------------------------------------------
    def _emit(self, cls: type, at_ns: int, **fields) -> None:
        target = cls.target_phase(fields)
        if target and not can_move(self.phase, target):  # refused before the event exists
            raise PhaseTransitionError(self.phase, target, cls.__name__)
        fields.setdefault("attempt_id", self.attempt_id)
        fields.setdefault("generation", self.generation)
        self.trigger_event(cls, timestamp=ev.timestamp_of(at_ns), **fields)

    def update_spec(self, spec: dict, at_ns: int) -> None:
        self._emit(ev.Updated, at_ns, spec=spec, phase=self._rest_phase(spec["lifecycle"]["desired_state"]))

    def _rest_phase(self, desired_state: str) -> str:
        """A stop with nothing running rests the session right away (a spec update, a desired state, an expiry)."""
        if desired_state == DesiredState.STOPPED and not self.has_live_attempt \
                and self.phase != Phase.STOPPED:
            return Phase.STOPPED
        return ""

    def set_desired_state(self, state: str, at_ns: int) -> None:
        self._emit(ev.DesiredStateChanged, at_ns, state=state, phase=self._rest_phase(state))

    def begin_attempt(self, attempt_id: str, reason: str, generation: int, at_ns: int,
                      requested: bool = False) -> None:
        if self.has_live_attempt:  # one OS process per session: the old attempt must end first
            raise AttemptRunningError()
        number = len(self.attempts) + 1
        # PENDING|EXITED|STOPPED|BACKOFF|FAILED|SUSPENDED -> STARTING
        self._emit(ev.AttemptStarting, at_ns, attempt_id=attempt_id, generation=generation,
                   number=number, reason=reason, requested=requested)

    def record_started(self, pid: int, start_time: int, at_ns: int) -> None:
        self._emit(ev.AttemptStarted, at_ns, pid=pid, start_time=start_time)

    def record_ready(self, at_ns: int) -> None:
        if self.phase == Phase.STARTING:  # STARTING -> RUNNING
            self._emit(ev.Ready, at_ns)

    def record_output(self, stream: str, data: bytes, at_ns: int) -> None:
        self._emit(ev.Output, at_ns, stream=stream, data=data)

    def check_input(self, input_id: str, digest_of, expected_attempt_id: str) -> bool:
        """Return True for a recognised retry; raise for a conflict (checked in the order the inputs route answers)."""
        if expected_attempt_id and expected_attempt_id != self.attempt_id:
            raise AttemptMismatchError()
        receipt = self.receipts.get(input_id)
        if receipt is not None:
            attempt_id, digest = receipt
            if attempt_id == self.attempt_id and digest == digest_of(attempt_id):
                return True
            raise InputIdReusedError()
        if not self.is_running:
            raise SessionNotRunningError()
        return False

    def accept_input(self, input_id: str, digest: str, at_ns: int, size: int = 0, eof: bool = False) -> None:
        self._emit(ev.InputAccepted, at_ns, input_id=input_id, digest=digest, bytes=size, eof=eof)

    def check_live(self, expected_attempt_id: str) -> None:
        if not self.is_running:
            raise SessionNotRunningError()
        if expected_attempt_id and expected_attempt_id != self.attempt_id:
            raise AttemptMismatchError()

    def check_resize(self, expected_attempt_id: str) -> None:
        self.check_live(expected_attempt_id)
        if not self.is_pty:
            raise PtyUnavailableError()

    def record_signal(self, signum: int, description: str, at_ns: int) -> None:
        self._emit(ev.SignalSent, at_ns, signal=signum, description=description)

    def record_resize(self, rows: int, cols: int, at_ns: int) -> None:
        self._emit(ev.TerminalResized, at_ns, rows=rows, cols=cols)

    def begin_stop(self, reason: str, at_ns: int) -> None:
        if self.has_live_attempt and self.phase != Phase.STOPPING:  # LIVE -> STOPPING
            self._emit(ev.AttemptStopping, at_ns, reason=reason)

    def record_exit(self, exit_code: int | None, signal: int | None, at_ns: int,
                    reason: str = "") -> RestartDecision:
        """Close the live attempt and decide what follows (the phase table and the restart policy)."""
        stop_reason = self.stopping_reason
        if stop_reason or self.desired_state == DesiredState.STOPPED:
            reason = stop_reason or reason or process_exit_reason(exit_code, signal)
            self._exit(exit_code, signal, reason, Phase.STOPPED, at_ns)  # STOPPING -> STOPPED
            return RestartDecision(restart=False)
        reason = reason or process_exit_reason(exit_code, signal)
        effective_code = 1 if exit_code is None else exit_code  # a failed start counts as 1
        decision = decide_restart(self.spec["lifecycle"]["restart"], effective_code,
                                  self.restart_window_ns, at_ns)
        if decision.restart:
            self._exit(exit_code, signal, reason, Phase.BACKOFF, at_ns)
            self._emit(ev.BackoffScheduled, at_ns, delay_ms=decision.delay_ms,
                       window_ns=list(decision.window_ns))
        elif decision.reason == RESTART_LIMIT_EXCEEDED:
            self._exit(exit_code, signal, reason, Phase.FAILED, at_ns)
            self._emit(ev.Failed, at_ns, reason=RESTART_LIMIT_EXCEEDED)
        else:
            resting = Phase.FAILED if reason == START_FAILED else Phase.EXITED
            self._exit(exit_code, signal, reason, resting, at_ns)
        return decision

    def _exit(self, exit_code, signal, reason: str, phase: str, at_ns: int) -> None:
        self._emit(ev.AttemptExited, at_ns, exit_code=exit_code, signal=signal, reason=reason,
                   phase=phase, new_generation=self.generation)

    def freeze(self, at_ns: int) -> None:
        if self.has_live_attempt and self.phase in (Phase.STARTING, Phase.RUNNING):
            self._emit(ev.Paused, at_ns)  # RUNNING -> PAUSED

    def thaw(self, at_ns: int) -> None:
        if self.phase == Phase.PAUSED:
            self._emit(ev.Resumed, at_ns)  # PAUSED -> RUNNING

    def expire(self, at_ns: int) -> bool:
        """Expiry: desired state -> stopped, one session.expired. False if not running.

        Desired state ``stopped`` is what makes the event happen once: a session set back to
        ``running`` may expire again, as the reference does.
        """
        if self.desired_state != DesiredState.RUNNING:
            return False
        self._emit(ev.Expired, at_ns, phase=self._rest_phase(DesiredState.STOPPED))
        return True

    def recover(self, new_generation: int, at_ns: int) -> str:
        """Runtime recovery on a new runtime (``runtime_recovery``). Returns "restart", "stop" or "none"."""
        was_active = self.phase in ACTIVE_PHASES or self.has_live_attempt
        desired_stopped = self.desired_state == DesiredState.STOPPED
        if self.has_live_attempt:
            phase = Phase.STOPPED if desired_stopped else Phase.SUSPENDED  # LIVE -> SUSPENDED
            self._emit(ev.AttemptExited, at_ns, exit_code=None, signal=None,
                       reason=RUNTIME_REPLACED, phase=phase, new_generation=new_generation)
        if not was_active or desired_stopped:
            return "none"
        if self.spec["lifecycle"]["runtime_recovery"] == "stop":
            self._emit(ev.RecoveryStopped, at_ns, generation=new_generation)  # -> STOPPED
            return "stop"
        return "restart"

