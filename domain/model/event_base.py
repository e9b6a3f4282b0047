"""What every stored event of ours shares: string ids, integer-nanosecond times, explicit topics.

``events.py`` (the Session's events) and ``sandbox.py`` (the Sandbox's) build on these; the
snapshot class is the one eventsourcing stores for either aggregate.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from eventsourcing.domain import CanCreateTimestamp, CanSnapshotAggregate, MetaDomainEvent

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def timestamp_of(at_ns: int) -> datetime:
    return EPOCH + timedelta(microseconds=at_ns // 1000)


def ns_of(timestamp: datetime) -> int:
    delta = timestamp - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


class StrDomainEvent(CanCreateTimestamp, metaclass=MetaDomainEvent):
    """The library's DomainEvent insists on UUID ids; ours are ``ses-…`` strings, so stored events read like the public journal."""

    originator_id: str
    originator_version: int
    timestamp: datetime


class Snapshot(CanSnapshotAggregate[str], StrDomainEvent):
    TOPIC = "supervisor.Snapshot"
    topic: str
    state: dict


def register_topics(*classes: type) -> None:
    """Make explicit TOPICs resolvable (the library only registers classes nested in aggregates)."""
    from eventsourcing.utils import register_topic

    for cls in classes:
        register_topic(cls.TOPIC, cls)
