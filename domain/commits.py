"""The loop side of the write path (D4): coalesce, batch, commit, then publish.

Output is appended per session as runs of one stream; a run becomes an ``output``
event when it reaches CHUNK_BYTES or when the next tick starts. A tick takes whatever
accumulated while the previous commit ran, so a quiet pipe is flushed at once and a
busy one batches by itself. Replies and subscribers only see committed events.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Protocol

from .model.retention import chunk_limit

CHUNK_BYTES = 256 * 1024
HIGH_WATER = 32 * 1024 * 1024   # uncommitted output bytes before readers are paused
LOW_WATER = 16 * 1024 * 1024


class CommitSink(Protocol):
    def submit(self, tick: list, done: Callable[[BaseException | None], None]) -> None: ...
    def run_in_writer(self, fn: Callable[[], object],
                      done: Callable[[object, BaseException | None], None]) -> None: ...


class Pausable(Protocol):
    def pause_output(self) -> None: ...
    def resume_output(self) -> None: ...


class _Pending:
    __slots__ = ("app", "aggregate", "runs", "snapshots", "output_bytes")

    def __init__(self, app, aggregate) -> None:
        self.app = app
        self.aggregate = aggregate
        self.output_bytes = 0  # counted until committed, even once turned into events
        self.runs: list[list] = []  # [stream, [bytes, ...], size]
        self.snapshots: list = []


class CommitPipeline:
    def __init__(self, sink: CommitSink, now_ns: Callable[[], int],
                 on_committed: Callable[[object, object, list], None]) -> None:
        self._sink = sink
        self._now_ns = now_ns
        self._on_committed = on_committed
        # id(aggregate) -> what it owes the store (aggregates are unhashable)
        self._pending: dict[int, _Pending] = {}
        self._waiters: list[asyncio.Future] = []
        self._busy = False
        self._scheduled = False
        self._uncommitted_output = 0
        self._paused: set = set()
        self.failure: BaseException | None = None

    # ---- staging ------------------------------------------------------------------------
    def stage(self, app, aggregate) -> None:
        self._owed(app, aggregate)
        self._schedule()

    def _owed(self, app, aggregate) -> _Pending:
        pending = self._pending.get(id(aggregate))
        if pending is None:
            pending = self._pending[id(aggregate)] = _Pending(app, aggregate)
        return pending

    def add_output(self, app, session, stream: str, data: bytes, source: Pausable | None) -> None:
        pending = self._owed(app, session)
        runs = pending.runs
        limit = chunk_limit(session.spec, CHUNK_BYTES)
        if len(data) > limit:  # a small retention budget needs events smaller than one read
            for start in range(0, len(data) - limit, limit):
                runs.append([stream, [data[start:start + limit]], limit])
            data = data[start + limit:]
        if runs and runs[-1][0] == stream and runs[-1][2] + len(data) <= limit:
            runs[-1][1].append(data)
            runs[-1][2] += len(data)
        else:
            runs.append([stream, [data], len(data)])
        pending.output_bytes += len(data)
        self._uncommitted_output += len(data)
        if source is not None and self._uncommitted_output > HIGH_WATER and source not in self._paused:
            source.pause_output()  # the child is slowed by the writer, never by a subscriber
            self._paused.add(source)
        self._schedule()

    def add_snapshot(self, app, aggregate, snapshot) -> None:
        self._owed(app, aggregate).snapshots.append(snapshot)
        self._schedule()

    def materialize(self, session) -> None:
        """Turn buffered output into events now, so a lifecycle event lands after it."""
        pending = self._pending.get(id(session))
        if pending is not None:
            self._materialize_owed(session, pending)

    async def flush(self) -> None:
        """A durability point: return once everything staged so far is committed."""
        if self.failure is not None:
            raise self.failure
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._schedule()
        await waiter

    def drop(self, session) -> None:
        self._pending.pop(id(session), None)

    async def run_in_writer(self, fn: Callable[[], object]):
        """Run a store operation (retention delete, vacuum) on the writer thread, after every
        tick submitted so far and between ticks, so it never races a commit."""
        future = asyncio.get_running_loop().create_future()

        def done(result, error) -> None:
            if not future.done():
                future.set_exception(error) if error is not None else future.set_result(result)

        self._sink.run_in_writer(fn, done)
        return await future

    # ---- ticks --------------------------------------------------------------------------
    def _schedule(self) -> None:
        if not self._scheduled and not self._busy:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self._scheduled = False
        if self._busy:
            return
        pending, self._pending = self._pending, {}
        waiters, self._waiters = self._waiters, []
        by_app: dict[object, tuple[list, list]] = {}
        committed: list[tuple[object, object, list]] = []
        output_bytes = 0
        for owed in pending.values():
            session = owed.aggregate
            if getattr(owed.app, "released", False):  # store sealed by the pause hook: drop
                self._uncommitted_output -= owed.output_bytes
                session.collect_events()
                continue
            output_bytes += owed.output_bytes
            self._materialize_owed(session, owed)
            events = session.collect_events()
            if not events and not owed.snapshots:
                continue
            events_list, snapshots = by_app.setdefault(owed.app, ([], []))
            events_list.extend(events)
            snapshots.extend(owed.snapshots)
            if events:
                committed.append((owed.app, session, events))
        if not by_app:
            self._resolve(waiters, None)
            return
        self._busy = True
        tick = [(app, events, snaps) for app, (events, snaps) in by_app.items()]
        self._sink.submit(tick, lambda error: self._done(error, committed, waiters, output_bytes))

    def _materialize_owed(self, session, owed: _Pending) -> None:
        if owed.runs:
            at_ns = self._now_ns()
            for stream, parts, _size in owed.runs:
                session.record_output(stream, parts[0] if len(parts) == 1 else b"".join(parts), at_ns)
            owed.runs = []

    def _done(self, error, committed, waiters, output_bytes: int) -> None:
        self._busy = False
        self._uncommitted_output -= output_bytes
        if error is not None:
            # The aggregates are ahead of the store: nothing more can be acknowledged.
            self.failure = error
        else:
            for app, aggregate, events in committed:
                self._on_committed(app, aggregate, events)
        if self._paused and self._uncommitted_output < LOW_WATER:
            for source in self._paused:
                source.resume_output()
            self._paused.clear()
        self._resolve(waiters, error)
        if self._pending or self._waiters:
            self._schedule()

    @staticmethod
    def _resolve(waiters, error) -> None:
        for waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)
