"""The public journal: one table from stored event topic to public type, one render function.

The API (paged reads, SSE, WebSocket) and the audit views all use ``public_record``.
It works on decoded stored state (a dict) so journal pages never build domain objects.
"""
from __future__ import annotations

from binascii import b2a_base64
from datetime import datetime
from typing import Any

from . import events as ev
from .policies import go_duration
from .signals import signal_short_name
from .timefmt import rfc3339

PUBLIC_TYPE: dict[str, str] = {
    ev.Created.TOPIC: "session.created",
    ev.Updated.TOPIC: "session.updated",
    ev.DesiredStateChanged.TOPIC: "session.desired_state",
    ev.AttemptStarting.TOPIC: "attempt.starting",
    ev.AttemptStarted.TOPIC: "attempt.started",
    ev.Ready.TOPIC: "session.ready",
    ev.Output.TOPIC: "output",
    ev.InputAccepted.TOPIC: "input.accepted",
    ev.SignalSent.TOPIC: "signal.sent",
    ev.TerminalResized.TOPIC: "terminal.resized",
    ev.AttemptStopping.TOPIC: "attempt.stopping",
    ev.AttemptExited.TOPIC: "attempt.exited",
    ev.BackoffScheduled.TOPIC: "session.backoff",
    ev.Failed.TOPIC: "session.failed",
    ev.Paused.TOPIC: "session.paused",
    ev.Resumed.TOPIC: "session.resumed",
    ev.RecoveryStopped.TOPIC: "session.stopped",
    ev.Expired.TOPIC: "session.expired",
}
OUTPUT_TOPIC = ev.Output.TOPIC
LIFECYCLE_TOPICS = frozenset(t for t, name in PUBLIC_TYPE.items()
                             if name.startswith(("session.", "attempt.")))


def _reason(topic: str, state: dict) -> str:
    if topic == ev.DesiredStateChanged.TOPIC:
        return state["state"]
    if topic == ev.BackoffScheduled.TOPIC:
        return go_duration(state["delay_ms"])
    if topic == ev.SignalSent.TOPIC:
        return state["description"]
    if topic == ev.RecoveryStopped.TOPIC:
        return "runtime_recovery_policy"
    return state.get("reason", "")


def public_record(session_id: str, seq: int, topic: str, state: dict, occurred_at: str) -> dict[str, Any]:
    """Render one stored event as the public Event object, optionals omitted."""
    record: dict[str, Any] = {"seq": seq, "session_id": session_id,
                              "runtime_generation": state["generation"]}
    if state["attempt_id"]:
        record["attempt_id"] = state["attempt_id"]
    if topic == OUTPUT_TOPIC:  # most of any journal: the shortest path (replay is ~3 µs an event)
        record["type"] = "output"
        record["stream"] = state["stream"]
        record["data_base64"] = b2a_base64(state["data"], newline=False).decode("ascii")
        if "reason" in state and state["reason"]:
            record["reason"] = state["reason"]
        record["occurred_at"] = occurred_at
        return record
    record["type"] = PUBLIC_TYPE[topic]
    if topic == ev.InputAccepted.TOPIC:  # what an auditor reconciles a lost 202 against
        record["input_id"] = state["input_id"]
        if "bytes" in state:  # absent from events stored before these fields existed
            record["bytes"] = state["bytes"]
        if state.get("eof"):
            record["eof"] = True
    elif topic == ev.TerminalResized.TOPIC:
        record["rows"] = state["rows"]
        record["cols"] = state["cols"]
    if topic == ev.AttemptExited.TOPIC:
        if state["exit_code"] is not None:
            record["exit_code"] = state["exit_code"]
        if state["signal"] is not None:
            record["signal"] = signal_short_name(state["signal"])
    reason = _reason(topic, state)
    if reason:
        record["reason"] = reason
    record["occurred_at"] = occurred_at
    return record


class JournalEntry:
    """A committed event on its way to live subscribers (the hub): its fields as stored, bytes
    as bytes. It is rendered to the public record only by a sender that needs it (SSE, the
    WebSocket), once however many subscribers share it; AeroLVM attach sends the raw bytes."""

    __slots__ = ("seq", "session_id", "topic", "state", "_at", "_record")

    def __init__(self, seq: int, session_id: str, topic: str, state: dict, at: datetime | int) -> None:
        self.seq = seq
        self.session_id = session_id
        self.topic = topic
        self.state = state
        self._at = at  # a datetime (live events) or integer nanoseconds
        self._record: dict[str, Any] | None = None

    @property
    def output(self) -> bytes | None:
        """The bytes of an ``output`` event, else None."""
        return self.state["data"] if self.topic == OUTPUT_TOPIC else None

    @property
    def size(self) -> int:
        """What it holds in a subscriber's buffer: the bytes of an output event."""
        return len(self.state["data"]) if self.topic == OUTPUT_TOPIC else 0

    def record(self) -> dict[str, Any]:
        if self._record is None:
            self._record = public_record(self.session_id, self.seq, self.topic, self.state, rfc3339(self._at))
        return self._record
