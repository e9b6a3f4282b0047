"""The public journal's shape: one table from stored event topic to public type, and the public
fields of a stored event (``public_fields``). Encoding them for the wire (base64, RFC 3339, JSON)
is the API's (``api/journal_wire.py``).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from . import events as ev
from .policies import go_duration
from .signals import signal_short_name

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


def public_fields(session_id: str, seq: int, topic: str, state: dict) -> dict[str, Any]:
    """One stored event's public Event object, optionals omitted, in the wire's field order, but
    not yet encoded for the wire: an output's ``data_base64`` holds its raw bytes and
    ``occurred_at`` is left out (``api/journal_wire.py`` adds both). What ``max_bytes`` counts
    (``model.retention``) is measured on this shape."""
    record: dict[str, Any] = {"seq": seq, "session_id": session_id,
                              "runtime_generation": state["generation"]}
    if state["attempt_id"]:
        record["attempt_id"] = state["attempt_id"]
    if topic == OUTPUT_TOPIC:  # most of any journal: the shortest path
        record["type"] = "output"
        record["stream"] = state["stream"]
        record["data_base64"] = state["data"]
        if "reason" in state and state["reason"]:
            record["reason"] = state["reason"]
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
    return record


class JournalEntry:
    """A committed event on its way to live subscribers (the hub): its fields as stored, bytes
    as bytes. The wire form is made only by a sender that needs it (SSE, the WebSocket: once
    however many subscribers share the entry, kept in ``rendered``); AeroLVM attach sends the raw bytes."""

    __slots__ = ("seq", "session_id", "topic", "state", "at", "rendered")

    def __init__(self, seq: int, session_id: str, topic: str, state: dict, at: datetime | int) -> None:
        self.seq = seq
        self.session_id = session_id
        self.topic = topic
        self.state = state
        self.at = at  # a datetime (live events) or integer nanoseconds
        self.rendered: dict[str, Any] | None = None  # its public record, once a sender made it

    @property
    def output(self) -> bytes | None:
        """The bytes of an ``output`` event, else None."""
        return self.state["data"] if self.topic == OUTPUT_TOPIC else None

    @property
    def size(self) -> int:
        """What it holds in a subscriber's buffer: the bytes of an output event."""
        return len(self.state["data"]) if self.topic == OUTPUT_TOPIC else 0
