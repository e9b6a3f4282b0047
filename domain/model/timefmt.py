"""RFC 3339 in UTC with trailing fractional zeros trimmed (Go's RFC3339Nano)."""
from __future__ import annotations

from datetime import datetime

from .events import timestamp_of


def rfc3339(value: datetime | int) -> str:
    if isinstance(value, int):
        value = timestamp_of(value)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text + "Z"
