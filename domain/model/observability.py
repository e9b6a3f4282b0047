"""Observability read from the journal (pure): log lines from output events, audit-style events
from lifecycle events, and the cursor that pages both.

Nothing here is stored a second time: a sandbox's journal already holds every output chunk (with
its stream, session, attempt and time) and every lifecycle event; logs and events are projections
of those rows. A sandbox has several streams (its own record and one per session), each ordered by
seq, so a cursor is a position per stream: ``{stream: (seq, line)}`` (``line``: how many lines of
that output event were already handed out). A page merges the streams by time and takes the
first ``limit`` items; the cursor after it says where each stream stands.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

from . import events as ev
from .journal import OUTPUT_TOPIC, PUBLIC_TYPE
from .sandbox import Claimed, PausedSandbox, Reconfigured, RuntimeStarted
from .signals import signal_short_name

CURSOR_PREFIX = "c1."
_EVENT_NS = uuid.UUID("6b1f0e5c-32a4-4f59-9c0e-0d2f6a3c9e11")  # event ids: uuid5(this, stream/seq)
TEAM = REGION = CLUSTER = "local"


class CursorError(ValueError):
    """A cursor this server did not make (400)."""


Positions = dict  # stream id -> (seq, lines of that seq consumed; 0: the whole event)


def encode_cursor(positions: Positions) -> str:
    text = ",".join(f"{stream}:{seq}:{line}" for stream, (seq, line) in sorted(positions.items()))
    return CURSOR_PREFIX + base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Positions:
    if not cursor.startswith(CURSOR_PREFIX):
        raise CursorError("invalid cursor")
    body = cursor[len(CURSOR_PREFIX):]
    try:
        text = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True).decode()
        out: Positions = {}
        for part in filter(None, text.split(",")):
            stream, seq, line = part.rsplit(":", 2)
            out[stream] = (int(seq), int(line))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise CursorError("invalid cursor") from None
    return out


@dataclass(frozen=True)
class Item:
    """One log line or one event, with where it sits in its stream."""

    occurred_ns: int
    stream: str
    seq: int
    line: int  # 1-based: the line of an output event, or which of a row's events
    last_line: bool  # the row is consumed once this item is
    body: dict

    @property
    def key(self) -> tuple:
        return (self.occurred_ns, self.stream, self.seq, self.line)


def after_position(items: list[Item], position: tuple[int, int] | None) -> list[Item]:
    """The items of a stream not yet handed out at ``position``."""
    if position is None:
        return items
    seq, line = position
    return [i for i in items if i.seq > seq or (i.seq == seq and line and i.line > line)]


def merge_page(streams: dict[str, tuple[list[Item], bool]], positions: Positions, limit: int,
               keep: Callable[[Item], bool]) -> tuple[list[Item], Positions, bool]:
    """The first ``limit`` kept items in time order, the positions after what was examined, and
    whether more may follow at once.

    ``streams`` maps each stream to the items read after its position and whether that read was
    cut short (more rows wait). A cut-short stream may have unread items later than its last read
    one, so nothing past that point is examined in this page."""
    horizon = min((items[-1].key for items, cut in streams.values() if cut and items), default=None)
    merged = sorted((item for items, _ in streams.values() for item in items), key=lambda i: i.key)
    out: list[Item] = []
    after = dict(positions)
    more = horizon is not None
    for item in merged:
        if (horizon is not None and item.key > horizon) or len(out) >= limit:
            more = True
            break
        after[item.stream] = (item.seq, 0 if item.last_line else item.line)
        if keep(item):
            out.append(item)
    return out, after, more


# ---- logs ------------------------------------------------------------------------------------------
def log_items(stream: str, seq: int, state: dict, occurred_ns: int, skip_lines: int,
              context_id: str = "") -> list[Item]:
    """The lines of one output event (a last fragment without a newline is a line too). A session's
    stream is its id; a context's is its process's launch id (``context_id`` names the context)."""
    text = bytes(state["data"]).decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    items = []
    for number, line in enumerate(lines, 1):
        if number <= skip_lines:
            continue
        body = {"message": line.rstrip("\r"), "stream": state["stream"], "context_id": context_id or stream,
                "attempt_id": state["attempt_id"], "kind": "context" if context_id else "session"}
        items.append(Item(occurred_ns, stream, seq, number, number == len(lines), body))
    return items


def render_log(item: Item, sandbox_id: str, occurred_at: str, team_id: str = "") -> dict:
    body = item.body
    entry = {"team_id": team_id or TEAM, "sandbox_id": sandbox_id, "region_id": REGION, "cluster_id": CLUSTER,
             "occurred_at": occurred_at, "ingested_at": occurred_at, "message": body["message"],
             "cursor": f"{item.stream}:{item.seq}:{item.line}", "context_id": body["context_id"],
             "stream": body["stream"], "attributes": {f"{body['kind']}_id": body["context_id"]}}
    if body["attempt_id"]:
        entry["process_id"] = body["attempt_id"]
    return entry


# ---- events ----------------------------------------------------------------------------------------
_API_CALLS = {"session.created", "session.updated", "session.desired_state", "input.accepted", "signal.sent",
              "terminal.resized"}


def session_event(session_id: str, seq: int, topic: str, state: dict, occurred_ns: int) -> Item | None:
    kind = PUBLIC_TYPE.get(topic)
    if kind is None or topic == OUTPUT_TOPIC:
        return None
    attributes: dict = {"session_id": session_id, "runtime_generation": state["generation"]}
    if state.get("attempt_id"):
        attributes["attempt_id"] = state["attempt_id"]
    outcome = "succeeded"
    if topic == ev.AttemptExited.TOPIC:
        if state.get("exit_code") is not None:
            attributes["exit_code"] = state["exit_code"]
        if state.get("signal") is not None:
            attributes["signal"] = signal_short_name(state["signal"])
        if state.get("exit_code") != 0:
            outcome = "failed"
    elif topic == ev.Failed.TOPIC:
        outcome = "failed"
    elif topic == ev.AttemptStarted.TOPIC:
        attributes["pid"] = state.get("pid")
    if state.get("reason"):
        attributes["reason"] = state["reason"]
    if kind in _API_CALLS:
        name = (state.get("spec") or {}).get("name", "")
        actor = "service" if name.startswith("sandbox-service:") else "api_key"
        return _event(session_id, seq, occurred_ns, "api_access", "manager", actor, kind, outcome,
                      "session", session_id, attributes)
    return _event(session_id, seq, occurred_ns, "process", "procd", "service", kind, outcome, "session",
                  session_id, attributes)


def sandbox_events(sandbox_id: str, rows: Iterable) -> list[Item]:
    """Lifecycle events of the sandbox record, read in order from its first row (network policy
    changes are found by comparing each config with the one before)."""
    items, config, status = [], {}, "running"
    for row in rows:
        topic, state, seq, at = row.topic, row.state, row.seq, row.occurred_ns
        if topic == Claimed.TOPIC:
            config = state.get("config") or {}
            items.append(_event(sandbox_id, seq, at, "lifecycle", "manager", "api_key", "sandbox.claimed",
                                "succeeded", "sandbox", sandbox_id, {"template": state.get("template")}))
        elif topic == Reconfigured.TOPIC:
            new = state.get("config") or {}
            changed = sorted(k for k in set(config) | set(new) if config.get(k) != new.get(k))
            network = config.get("network") != new.get("network")
            if changed:  # one row, two events when the policy changed: lines 1 and 2 of that seq
                items.append(_event(sandbox_id, seq, at, "lifecycle", "manager", "api_key", "sandbox.updated",
                                    "succeeded", "sandbox", sandbox_id, {"changed": changed}, 1, not network))
            if network:
                items.append(_event(sandbox_id, seq, at, "network_audit", "manager", "api_key",
                                    "network.policy_changed", "succeeded", "sandbox", sandbox_id,
                                    {"mode": (new.get("network") or {}).get("mode", "")}, 2, True))
            config = new
        elif topic == PausedSandbox.TOPIC:
            status = "paused"
            items.append(_event(sandbox_id, seq, at, "lifecycle", "manager",
                                "api_key" if state.get("by_user") else "service", "sandbox.paused", "succeeded",
                                "sandbox", sandbox_id, {}))
        elif topic == RuntimeStarted.TOPIC:
            action = "sandbox.resumed" if status == "paused" else "sandbox.runtime_replaced"
            status = "running"
            items.append(_event(sandbox_id, seq, at, "lifecycle", "manager", "service", action, "succeeded",
                                "sandbox", sandbox_id, {"runtime_generation": state.get("generation")}))
    return items


def _event(stream: str, seq: int, at: int, event_type: str, source: str, actor: str, action: str, outcome: str,
           resource_type: str, resource_id: str, attributes: dict, line: int = 1, last: bool = True) -> Item:
    event_id = str(uuid.uuid5(_EVENT_NS, f"{stream}/{seq}/{line}"))
    body = {"event_id": event_id, "source": source, "event_type": event_type, "outcome": outcome,
            "actor_kind": actor, "action": action, "resource_type": resource_type, "resource_id": resource_id,
            "attributes": attributes}
    return Item(at, stream, seq, line, last, body)


def render_event(item: Item, sandbox_id: str, occurred_at: str, instance: str, team_id: str = "") -> dict:
    body = item.body
    event = {"event_id": body["event_id"], "schema_version": 2, "team_id": team_id or TEAM, "sandbox_id": sandbox_id,
             "region_id": REGION, "cluster_id": CLUSTER, "occurred_at": occurred_at, "ingested_at": occurred_at,
             "source": body["source"], "event_type": body["event_type"], "phase": "result",
             "outcome": body["outcome"], "actor": {"kind": body["actor_kind"]}, "action": body["action"],
             "resource": {"type": body["resource_type"], "id": body["resource_id"]},
             "operation_id": body["event_id"],
             "producer": {"service": "sessiond", "instance": instance, "sequence": item.seq},
             "attributes": body["attributes"]}
    # Not signed: the journal is this server's own record, and it holds no signing key.
    digest = hashlib.sha256(repr(sorted(event.items())).encode()).hexdigest()
    event["integrity"] = {"algorithm": "ed25519-sha256-v1", "payload_hash": digest, "signature": "",
                          "signing_key_id": "", "signature_status": "unavailable"}
    return event
