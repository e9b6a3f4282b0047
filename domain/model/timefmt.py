"""RFC 3339 in UTC with trailing fractional zeros trimmed (Go's RFC3339Nano)."""
from __future__ import annotations

from datetime import datetime

from .events import EPOCH, timestamp_of

_SECONDS: dict[int, str] = {}  # whole second -> "YYYY-MM-DDTHH:MM:SS": strftime costs ~5 µs
_SECOND = 1_000_000


def rfc3339(value: datetime | int) -> str:
    if isinstance(value, int):
        value = timestamp_of(value)
    delta = value - EPOCH
    second = delta.days * 86400 + delta.seconds
    text = _SECONDS.get(second)
    if text is None:
        if len(_SECONDS) >= 4096:  # journal pages walk forward in time: old entries are cold
            _SECONDS.clear()
        text = _SECONDS[second] = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text + "Z"
