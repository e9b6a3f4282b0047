"""What a context keeps of its output, and the bounds on it (contexts have no journal: memory only).

Every bound is counted in the memory the text takes in the server (``sys.getsizeof``), not in
characters: one non-ASCII character makes CPython store a whole chunk at 2 or 4 bytes a
character, so a character count would let a tenant hold four times its share.

- ``OutputLog``: one context's output in arrival order, at most ``CONTEXT_OUTPUT_LIMIT``; the
  oldest chunks go first, and what was dropped is announced by a marker line in front.
- ``SANDBOX_OUTPUT_LIMIT``: all the contexts of one sandbox together; past it the context
  holding the most loses its oldest chunk (a flood pays for itself first).
- ``ExecTail``: what one exec answers, the last ``EXEC_OUTPUT_LIMIT`` of it, with the count of
  what was cut, so a REPL command that prints a gigabyte answers a bounded body.
"""
from __future__ import annotations

import asyncio
import sys
from collections import deque
from dataclasses import dataclass

CONTEXT_OUTPUT_LIMIT = 8 << 20   # one context's retained output (all its streams together)
SANDBOX_OUTPUT_LIMIT = 32 << 20  # every context of one sandbox together
EXEC_OUTPUT_LIMIT = 4 << 20      # the output one exec (or a create's wait_until_done) answers
PREVIEW_LIMIT = 1024             # per stream, in the context list: the list never inlines output
SUBSCRIBER_LIMIT = 16 << 20      # queued for one WebSocket subscriber before it counts as too slow


def text_size(text: str) -> int:
    return sys.getsizeof(text)


def dropped_marker(dropped_bytes: int) -> str:
    return f"[sessiond: {dropped_bytes} bytes of earlier output dropped]\n"


class OutputLog:
    """(source, text) chunks in arrival order, bounded by the memory they take."""

    def __init__(self) -> None:
        self.chunks: deque[tuple[str, str, int, int]] = deque()  # source, text, memory, output bytes
        self.stamps: deque[tuple[int, int]] = deque()  # (number, ns) of each chunk: the sandbox's log cursors
        self.count = 0     # chunks ever received (the next chunk's number)
        self.size = 0      # memory held
        self.dropped = 0   # output bytes dropped from the front

    def add(self, source: str, text: str, nbytes: int, at_ns: int = 0) -> None:
        size = text_size(text)
        self.chunks.append((source, text, size, nbytes))
        self.stamps.append((self.count, at_ns))
        self.count += 1
        self.size += size
        while self.size > CONTEXT_OUTPUT_LIMIT and len(self.chunks) > 1:
            self.drop_oldest()

    def drop_oldest(self) -> int:
        """Drop the oldest chunk (never the last one); the memory freed."""
        if len(self.chunks) <= 1:
            return 0
        _source, _text, size, nbytes = self.chunks.popleft()
        self.stamps.popleft()
        self.size -= size
        self.dropped += nbytes
        return size

    def items(self) -> list[tuple[str, str]]:
        """Everything retained, the drop marker first (on the first chunk's stream)."""
        out = [(source, text) for source, text, _size, _n in self.chunks]
        if self.dropped and out:
            out.insert(0, (out[0][0], dropped_marker(self.dropped)))
        return out

    def stamped(self) -> list[tuple[str, str, int, int]]:
        """Every retained chunk as (source, text, number, ns), for the sandbox's logs."""
        return [(source, text, number, at) for (source, text, _s, _n), (number, at) in zip(self.chunks, self.stamps)]

    def text(self, source: str | None = None) -> str:
        parts = [text for src, text, _size, _n in self.chunks if source is None or src == source]
        if self.dropped and parts:
            parts.insert(0, dropped_marker(self.dropped))
        return "".join(parts)

    def tail(self, source: str, limit: int = PREVIEW_LIMIT) -> tuple[str, bool]:
        """The last ``limit`` characters of one stream, and whether anything before them exists."""
        parts: list[str] = []
        have = 0
        more = False
        for src, text, _size, _n in reversed(self.chunks):
            if src != source:
                continue
            if have >= limit:
                more = True
                break
            parts.append(text)
            have += len(text)
        joined = "".join(reversed(parts))
        if len(joined) > limit:
            joined, more = joined[-limit:], True
        return joined, more or (self.dropped > 0 and bool(joined))


def enforce_sandbox_limit(logs: list[OutputLog], limit: int = SANDBOX_OUTPUT_LIMIT) -> None:
    """Drop oldest chunks of the largest logs until the sandbox's contexts hold ``limit`` or less."""
    total = sum(log.size for log in logs)
    while total > limit:
        largest = max(logs, key=lambda log: log.size)
        freed = largest.drop_oldest()
        if not freed:
            return  # every log is down to its last chunk
        total -= freed


@dataclass(frozen=True)
class ExecOutput:
    """What an exec answers: its output (bounded), and how many output bytes were cut from it."""

    text: str
    dropped: int = 0

    @property
    def truncated(self) -> bool:
        return self.dropped > 0


class ExecTail:
    """A live subscriber that keeps the tail of one exec's output (``push`` as a Subscriber's)."""

    def __init__(self, limit: int = EXEC_OUTPUT_LIMIT) -> None:
        self.limit = limit
        self.parts: deque[tuple[str, int]] = deque()
        self.size = 0
        self.dropped = 0           # output bytes cut from the front
        self.prompt = False        # a REPL prompt was seen
        self.ended = False         # the process exited (or the subscription ended)
        self.changed = asyncio.Event()

    def push(self, item: tuple) -> None:
        kind, _source, text, prompt = item
        if kind != "output":
            self.ended = True
        else:
            size = text_size(text)
            self.parts.append((text, size))
            self.size += size
            while self.size > self.limit and len(self.parts) > 1:
                old, old_size = self.parts.popleft()
                self.size -= old_size
                self.dropped += len(old.encode())
            self.prompt = self.prompt or prompt
        self.changed.set()

    def text(self) -> str:
        return "".join(text for text, _size in self.parts)
