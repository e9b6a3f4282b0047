"""The query strings of the observability routes, parsed at the edge.

Times are RFC 3339; Python's watch helpers send ``datetime.isoformat()``, which has no offset for
a naive datetime: that is read as UTC. Every refusal is 400 ``bad_request`` naming the parameter.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timezone

from session_supervisor.domain.model import observability as obs
from session_supervisor.domain.observability_reader import Query

from .errors import ApiError

DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
EVENT_ENUMS = {
    "source": ("cluster_gateway", "ctld", "manager", "procd"),
    "event_type": ("api_access", "file", "lifecycle", "network_audit", "process", "runtime_stats"),
    "outcome": ("accepted", "completed", "denied", "error", "failed", "succeeded", "unknown"),
    "actor_kind": ("anonymous", "api_key", "exposure_credential", "human", "sandbox_workload", "service", "ssh_user"),
}
EVENT_TEXT_FILTERS = ("actor_id", "action", "resource_type", "operation_id")
STREAMS = ("stdout", "stderr", "pty")


def bad(message: str) -> ApiError:
    return ApiError(400, "bad_request", message)


def parse_time(value: str | None, name: str) -> int:
    """Nanoseconds since the epoch (0 when absent)."""
    if value is None or value == "":
        return 0
    try:
        moment = datetime.fromisoformat(value.strip().replace(" ", "+"))  # a '+' that arrived unescaped
    except ValueError:
        raise bad(f"invalid {name}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def watching(args) -> bool:
    value = args.get("watch", "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise bad("invalid watch parameter")
    return value in ("true", "1")


def base_query(args, watch: bool) -> Query:
    start, end = parse_time(args.get("start_time"), "start_time"), parse_time(args.get("end_time"), "end_time")
    if end and watch:
        raise bad("end_time cannot be used with watch")
    if start and end and end < start:
        raise bad("end_time must not be before start_time")
    try:
        limit = int(args.get("limit", DEFAULT_LIMIT))
    except ValueError:
        raise bad("invalid limit") from None
    if limit < 1:
        raise bad("limit must be at least 1")
    cursor = args.get("cursor")
    try:
        positions = obs.decode_cursor(cursor) if cursor else {}
    except obs.CursorError as exc:
        raise bad(str(exc)) from None
    return Query(positions=positions, limit=min(limit, MAX_LIMIT), start_ns=start, end_ns=end)


def _in_time(query: Query, item: obs.Item) -> bool:
    return (not query.start_ns or item.occurred_ns >= query.start_ns) and \
        (not query.end_ns or item.occurred_ns <= query.end_ns)


def log_query(args, watch: bool) -> tuple[Query, str]:
    query = base_query(args, watch)
    stream = args.get("stream")
    if stream is not None and stream not in STREAMS:
        raise bad("invalid stream")
    query.keep = lambda item: _in_time(query, item) and (stream is None or item.body["stream"] == stream)
    return query, args.get("context_id", "")


def event_query(args, watch: bool) -> Query:
    query = base_query(args, watch)
    wanted: dict[str, str] = {}
    for name, values in EVENT_ENUMS.items():
        value = args.get(name)
        if value is not None:
            if value not in values:
                raise bad(f"invalid {name}")
            wanted[name] = value
    for name in EVENT_TEXT_FILTERS:
        if args.get(name):
            wanted[name] = args.get(name)
    event_id = args.get("event_id")
    if event_id is not None:
        try:
            event_id = str(uuid.UUID(event_id))
        except ValueError:
            raise bad("invalid event_id") from None
        if wanted or args.get("cursor") or watch:
            raise bad("event_id cannot be combined with other filters, a cursor or watch")
        query.limit = MAX_LIMIT
    fields = {"source": "source", "event_type": "event_type", "outcome": "outcome", "actor_kind": "actor_kind",
              "action": "action", "resource_type": "resource_type", "operation_id": "event_id"}

    def keep(item: obs.Item) -> bool:
        body = item.body
        if event_id is not None:
            return body["event_id"] == event_id
        if "actor_id" in wanted:
            return False  # no event names an actor id: the tenant's own calls carry no user here
        return _in_time(query, item) and all(body[fields[k]] == v for k, v in wanted.items())
    query.keep = keep
    return query
