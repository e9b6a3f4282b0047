"""Live subscribers: a bounded buffer each; a full buffer detaches that subscriber only.

Publishing never blocks: a subscriber that cannot keep up is closed
with reason ``slow`` and reconnects with its last seq; the journal loses nothing.
The reference buffers 256 events of at most 32 KiB; our output events are up to 256 KiB,
so a byte budget of the same order bounds memory too (256 of ours would be 87 MiB).
"""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable

from .model.journal import JournalEntry

BUFFER_EVENTS = 256
BUFFER_BYTES = 16 * 1024 * 1024  # of output bytes held for one subscriber


class Subscriber:
    def __init__(self, session_id: str, capacity: int = BUFFER_EVENTS,
                 max_bytes: int = BUFFER_BYTES) -> None:
        self.session_id = session_id
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.items: deque = deque()
        self.buffered_bytes = 0
        self.closed_reason = ""
        self._ready = asyncio.Event()

    def offer(self, item: JournalEntry) -> None:
        if self.closed_reason:
            return
        size = item.size
        if len(self.items) >= self.capacity or self.buffered_bytes + size > self.max_bytes:
            self.close("slow")
            return
        self.items.append(item)
        self.buffered_bytes += size
        self._ready.set()

    def close(self, reason: str) -> None:
        if not self.closed_reason:
            self.closed_reason = reason
            if reason == "slow":  # it reconnects from its last seq: what it missed is in the journal
                self.items.clear()
                self.buffered_bytes = 0
            self._ready.set()

    async def next_batch(self, timeout: float | None = None) -> list:
        """Items available now (waiting up to ``timeout``); [] on timeout or when closed."""
        if not self.items and not self.closed_reason:
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except asyncio.TimeoutError:
                return []
        batch = list(self.items)
        self.items.clear()
        self.buffered_bytes = 0
        return batch


class Hub:
    def __init__(self) -> None:
        self._subscribers: dict[str, set[Subscriber]] = {}
        self.detaches: dict[str, int] = {}  # subscribers the server closed, by reason (for /metrics)
        # Told when a context's process starts or ends (sandbox id, "process.started" | "process.exited"
        # | "process.crashed", details): the webhooks. Called on the loop; they must not block.
        self.process_listeners: list[Callable[[str, str, dict], None]] = []

    def process_event(self, sandbox_id: str, kind: str, details: dict) -> None:
        for listener in self.process_listeners:
            listener(sandbox_id, kind, details)

    def subscribe(self, session_id: str) -> Subscriber:
        subscriber = Subscriber(session_id)
        self._subscribers.setdefault(session_id, set()).add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        subscribers = self._subscribers.get(subscriber.session_id)
        if subscribers is not None:
            subscribers.discard(subscriber)
            if not subscribers:
                del self._subscribers[subscriber.session_id]

    def has_subscribers(self, session_id: str) -> bool:
        return session_id in self._subscribers

    def subscriber_count(self) -> int:
        return sum(len(subscribers) for subscribers in self._subscribers.values())

    def _count_detach(self, reason: str) -> None:
        self.detaches[reason] = self.detaches.get(reason, 0) + 1

    def publish(self, session_id: str, items: list[JournalEntry]) -> None:
        for subscriber in list(self._subscribers.get(session_id, ())):
            for item in items:
                subscriber.offer(item)
            if subscriber.closed_reason:
                self._count_detach(subscriber.closed_reason)
                self.unsubscribe(subscriber)

    def close_session(self, session_id: str, reason: str) -> None:
        for subscriber in self._subscribers.pop(session_id, set()):
            subscriber.close(reason)
            self._count_detach(reason)

    def close_all(self, reason: str) -> None:
        for session_id in list(self._subscribers):
            self.close_session(session_id, reason)
