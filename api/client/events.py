"""Transport-free pieces of the reconnecting event iterators (SSE parsing, cursor, backoff).

The server sends an event only after it is committed, and seqs are never
reused, so "reconnect with ``after`` = the last seq handed to the caller" is
enough for exactly-once delivery; ``Resume`` still drops any seq it has
already passed, in case a server replays more than asked.
"""
from __future__ import annotations

import time
from typing import Any

import orjson

from .errors import CursorExpired, ReconnectTimeout
from .models import Event

SSE_READ_TIMEOUT_S = 45.0  # three missed 15 s heartbeats: the connection is dead, reconnect
DEFAULT_RECONNECT_TIMEOUT_S = 60.0


class SSEParser:
    """Feeds SSE lines; returns the event dict a blank line completes."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self.latest_hint: int | None = None  # from ": heartbeat <seq>" comments

    def feed(self, line: str) -> dict | None:
        line = line.rstrip("\r")
        if not line:
            if not self._data:
                return None
            payload, self._data = "\n".join(self._data), []
            try:
                record = orjson.loads(payload)
            except orjson.JSONDecodeError:
                return None
            return record if isinstance(record, dict) else None
        if line.startswith(":"):
            words = line[1:].split()
            if len(words) == 2 and words[0] == "heartbeat" and words[1].isdigit():
                self.latest_hint = int(words[1])
            return None
        name, _, value = line.partition(":")
        if name == "data":
            self._data.append(value[1:] if value.startswith(" ") else value)
        return None


class Resume:
    """The cursor of one iterator: what to ask for next, and what to drop as already seen."""

    def __init__(self, after: int, skip_gap: bool) -> None:
        self.last_seq = max(0, int(after))
        self.skip_gap = skip_gap
        self.gaps: list[tuple[int, int]] = []  # (first, last) seqs skipped after a 410

    def accept(self, record: Any) -> Event | None:
        if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
            return None
        if record["seq"] <= self.last_seq:
            return None  # a duplicate: already handed out
        self.last_seq = record["seq"]
        return Event.from_api(record)

    def expired(self, error: CursorExpired) -> None:
        """Skip to the earliest retained event, or re-raise when the caller did not ask to."""
        if not self.skip_gap or error.earliest is None:
            raise error
        first, self.last_seq = self.last_seq + 1, max(self.last_seq, error.earliest - 1)
        self.gaps.append((first, self.last_seq))


class Backoff:
    """Delays between reconnects; gives up once failures have lasted ``budget_s``."""

    def __init__(self, budget_s: float | None, initial_s: float = 0.05, cap_s: float = 1.0) -> None:
        self.budget_s = budget_s
        self.initial_s = initial_s
        self.cap_s = cap_s
        self._delay = initial_s
        self._failing_since: float | None = None
        self.reconnects = 0

    def succeeded(self) -> None:
        self._delay = self.initial_s
        self._failing_since = None

    def next_delay(self, why: str) -> float:
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        if self.budget_s is not None and now - self._failing_since >= self.budget_s:
            raise ReconnectTimeout(f"event stream not re-established within {self.budget_s}s: {why}")
        delay, self._delay = self._delay, min(self.cap_s, self._delay * 2)
        self.reconnects += 1
        return delay


def stream_params(last_seq: int) -> dict:
    return {"after": last_seq}


STREAM_HEADERS = {"Accept": "text/event-stream"}
