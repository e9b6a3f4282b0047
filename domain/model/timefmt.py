"""RFC 3339 in UTC with trailing fractional zeros trimmed (Go's RFC3339Nano)."""
from __future__ import annotations

from datetime import datetime

from .event_base import EPOCH, timestamp_of

_SECONDS: dict[int, str] = {}  # whole second -> "YYYY-MM-DDTHH:MM:SS": strftime costs ~5 µs
_SECOND = 1_000_000


def rfc3339(value: datetime | int) -> str:
    """From a datetime or integer nanoseconds since the epoch (no datetime is built then)."""
    if type(value) is int:
        second, micros = divmod(value // 1000, _SECOND)
    else:
        delta = value - EPOCH
        second, micros = delta.days * 86400 + delta.seconds, value.microsecond
    text = _SECONDS.get(second)
    if text is None:
        if len(_SECONDS) >= 4096:  # journal pages walk forward in time: old entries are cold
            _SECONDS.clear()
        text = _SECONDS[second] = timestamp_of(second * 1_000_000_000).strftime("%Y-%m-%dT%H:%M:%S")
    if micros:
        return "%s.%sZ" % (text, ("%06d" % micros).rstrip("0"))
    return text + "Z"
