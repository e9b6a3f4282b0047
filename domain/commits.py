"""The loop side of the write path (one writer thread, group commit): coalesce, batch, commit, then publish.

Output is appended per session as runs of one stream; a run becomes an ``output``
event when it reaches CHUNK_BYTES or when the next tick starts. A tick takes whatever
accumulated while the previous commit ran, so a quiet pipe is flushed at once and a
busy one batches by itself. Replies and subscribers only see committed events.

A store that refuses a write costs its own sandbox and nothing else (``store_faults``):
the writer commits each store on its own. When a store is full or read-only, its
batch is kept in order, in memory, and retried every RETRY_S; its output sources are
paused (the child blocks on its pipe) and the callers of that store get 507 until a
retry succeeds. A batch holding a value the store cannot encode is a bug that must not
wedge the store: that aggregate is rolled back to what is stored and the rest commits.
Fairness: a tick takes at most TICK_SHARE of each session's buffered output (the rest
waits for the next tick, which follows at once), so a small write never waits behind
more than one bounded tick. While other sessions write (within CONTENDED_S), a flood
gets CONTENDED_SHARE per tick and its reader pauses at CONTENDED_HIGH, so it yields the
CPU too; alone it runs at full speed and pauses only at SESSION_HIGH, before the global
HIGH_WATER would pause everyone's.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

from eventsourcing.domain import BaseAggregate

from .model.journal import OUTPUT_TOPIC
from .model.retention import chunk_limit
from .ports import CommitOutcome, CommitSink, Pausable
from .flush_waiters import FlushWaiters, resolve
from .model.errors import UnavailableError
from .store_faults import StoreBatch, StoreFaults, unencodable

if TYPE_CHECKING:
    from .sandbox_store import SandboxStore

CHUNK_BYTES = 256 * 1024
# Alone, a session's tick takes what it has, up to TICK_SHARE: a 4 MiB share had cost a lone
# flood 12-24% of its ingest (interleaved runs, 1 GiB of zeros) for nobody's benefit; a tick
# that finds a second session's events switches the flood to CONTENDED_SHARE.
TICK_SHARE = 8 * 1024 * 1024
# A lone flood's reader pauses only once a second full tick waits behind the one being
# committed, and resumes when that commit ends: the child refills the next tick while the
# writer commits this one. With the pause at one tick (counting the tick in flight) the reader
# stood still through every commit and the writer idled while it refilled. The marks keep the
# memory they had (16 MiB a session, 32 MiB in all): with twice that (16 MiB ticks) zeros went
# faster but incompressible output slower (more bytes in flight, colder when the writer copies
# them to the segment file: 213 against 308 MB/s median, alternating runs on a loaded VM).
SESSION_HIGH = 2 * TICK_SHARE    # one session's uncommitted output before its reader pauses
SESSION_LOW = TICK_SHARE + TICK_SHARE // 2  # ...and below which it resumes
HIGH_WATER = 2 * SESSION_HIGH    # uncommitted output bytes of all sessions before readers pause
LOW_WATER = HIGH_WATER - TICK_SHARE
CONTENDED_SHARE = 256 * 1024     # output of one session per tick while other sessions write too
CONTENDED_S = 0.5                # "other sessions write" means: within the last half second
CONTENDED_HIGH = 256 * 1024     # ...while other sessions write too: a flood yields the CPU
# While others write, a paused flood resumes only once its output is nearly all committed.
CONTENDED_LOW = 128 * 1024
RETRY_S = 0.25                  # a refused store is retried this often


def released_error() -> UnavailableError:
    """Events staged for a store that was sealed or closed meanwhile (a pause's point of no
    return, a delete): they cannot be written, so whoever waits on them must hear so."""
    return UnavailableError("sandbox lifecycle barrier is active: the change was not recorded")


class _Pending:
    __slots__ = ("store", "aggregate", "runs", "snapshots", "output_bytes", "early_bytes")

    def __init__(self, store: SandboxStore, aggregate: BaseAggregate) -> None:
        self.store = store
        self.aggregate = aggregate
        self.output_bytes = 0  # counted until committed, even once turned into events
        self.early_bytes = 0  # of which already turned into events while a commit ran
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
        self._waiters = FlushWaiters()
        self._busy = False
        self._scheduled = False
        self._uncommitted_output = 0
        self._session_output: dict[int, int] = {}  # id(session) -> uncommitted output bytes
        self._paused: dict[object, tuple[object, int]] = {}  # source -> (store, id(session))
        self.faults = StoreFaults()
        self._retry: asyncio.TimerHandle | None = None
        self._contended = False  # another aggregate was committed within CONTENDED_S
        self._shared_at = float("-inf")

    # ---- staging ------------------------------------------------------------------------
    def stage(self, store, aggregate) -> None:
        self._owed(store, aggregate)
        self._schedule()

    def _owed(self, store, aggregate) -> _Pending:
        pending = self._pending.get(id(aggregate))
        if pending is None:
            pending = self._pending[id(aggregate)] = _Pending(store, aggregate)
        return pending

    def add_output(self, store, session, stream: str, data: bytes, source: Pausable | None) -> None:
        pending = self._owed(store, session)
        runs = pending.runs
        size = len(data)  # all of it is owed, also the part split into runs below
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
        pending.output_bytes += size
        self._uncommitted_output += size
        mine = self._session_output.get(id(session), 0) + size
        self._session_output[id(session)] = mine
        if source is not None and source not in self._paused and (
                mine > (CONTENDED_HIGH if self._contended else SESSION_HIGH)
                or self._uncommitted_output > HIGH_WATER or store in self.faults):
            source.pause_output()  # the child is slowed by the writer, never by a subscriber
            self._paused[source] = (store, id(session))
        if self._busy and len(runs) > 1 and not self._contended:
            self._materialize_early(session, pending)
        self._schedule()

    def _materialize_early(self, session, owed: _Pending) -> None:
        """While a commit runs, a lone flood's full runs become events at once (up to one
        tick's worth), so the next tick, which starts when the commit ends, finds them made:
        the writer no longer waits for the loop to make a tick's events after each commit.
        While other sessions write, runs wait for the tick, which takes a fair share of each."""
        full = owed.runs[:-1]  # the last run may still grow
        if owed.early_bytes >= TICK_SHARE or not full:
            return
        at_ns = self._now_ns()
        for stream, parts, size in full:
            session.record_output(stream, parts[0] if len(parts) == 1 else b"".join(parts), at_ns)
            owed.early_bytes += size
        owed.runs = owed.runs[-1:]

    def add_snapshot(self, store, aggregate, snapshot) -> None:
        self._owed(store, aggregate).snapshots.append(snapshot)
        self._schedule()

    def materialize(self, session) -> None:
        """Turn buffered output into events now, so a lifecycle event lands after it."""
        pending = self._pending.get(id(session))
        if pending is not None:
            self._materialize_owed(session, pending)

    def check_writable(self, store) -> None:
        """Refuse a new write to a store that is refusing writes (507/503), before it has
        any effect; stop and KILL do not ask, they act and then wait like any write."""
        self.faults.check(store)

    async def flush(self, store=None) -> None:
        """A durability point: return once everything staged so far for ``store`` (every store
        when None) is committed; raise the store's error if that commit was refused."""
        waiter = self._waiters.add(store)
        self._schedule()
        await waiter

    def drop(self, session) -> None:
        owed = self._pending.pop(id(session), None)
        if owed is not None:
            self._uncommitted_output -= owed.output_bytes
        self._session_output.pop(id(session), None)

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
        batches: dict[object, StoreBatch] = {}
        now = asyncio.get_running_loop().time()
        if len(pending) > 1:
            self._shared_at = now
        self._contended = now - self._shared_at < CONTENDED_S
        share = CONTENDED_SHARE if self._contended else TICK_SHARE
        if self._waiters.wants_all():  # flush() of every store: drain all
            share = None
        dropped: set = set()  # released stores that had events to write: their waiters fail
        for owed in pending.values():
            session = owed.aggregate
            if getattr(owed.store, "released", False):  # store sealed by the pause hook: drop
                self._uncommitted_output -= owed.output_bytes
                self._session_output.pop(id(session), None)
                # output made into events early is dropped as its runs would have been
                if any(e.TOPIC != OUTPUT_TOPIC for e in session.collect_events()):
                    dropped.add(owed.store)
                continue
            taken = self._materialize_owed(session, owed, share)
            if owed.runs:  # the rest of a flood waits for the next tick
                rest = self._pending[id(session)] = _Pending(owed.store, session)
                rest.runs, owed.runs = owed.runs, []
                rest.output_bytes = owed.output_bytes - taken
            events = session.collect_events()
            if events or owed.snapshots or taken:
                batch = batches.get(owed.store)
                if batch is None:
                    batch = batches[owed.store] = StoreBatch(owed.store)
                batch.add(session, events, owed.snapshots, taken)
        held = self.faults.merge_backlogs(batches, now)  # refused stores wait for their retry
        for store in dropped:  # never answer "committed" for what was not written
            self._waiters.fail_store(store, released_error())
        waiters = self._waiters.take_all_but(held)  # one on a held store is answered by its retry
        held_errors = {store: self.faults.error(store) for store in held}  # for flush() of every store
        tick = []
        for batch in batches.values():
            if getattr(batch.store, "released", False):  # a held store the pause hook sealed
                self.faults.forget(batch.store)
                self._settle_output(batch)
                if batch.events:
                    self._waiters.fail_store(batch.store, released_error())
            elif batch.events or batch.snapshots:
                tick.append(batch)
            else:  # output counted, nothing to write
                self._settle_output(batch)
        self._arm_retry(now)
        if not tick:
            resolve(waiters, held_errors)
            return
        self._busy = True
        self._sink.submit([(b.store.journal, b.events, b.snapshots) for b in tick],
                          lambda outcomes: self._done(tick, outcomes, waiters, held_errors))

    def _arm_retry(self, now: float) -> None:
        if self.faults.held and self._retry is None:
            self._retry = asyncio.get_running_loop().call_later(self.faults.next_retry(now), self._retry_due)

    def _retry_due(self) -> None:
        self._retry = None
        self._schedule()

    def _materialize_owed(self, session, owed: _Pending, share: int | None = None) -> int:
        """Output runs become events, in order, up to ``share`` bytes (all when None); the
        runs left are kept on ``owed``. Returns the bytes of output now carried by events."""
        if not owed.runs:
            return owed.output_bytes
        at_ns = self._now_ns()
        done, size_done = 0, owed.early_bytes  # runs made into events early count toward the share
        for stream, parts, size in owed.runs:
            if share is not None and size_done and size_done + size > share:
                break
            session.record_output(stream, parts[0] if len(parts) == 1 else b"".join(parts), at_ns)
            done += 1
            size_done += size
        owed.runs = owed.runs[done:]
        return owed.output_bytes if not owed.runs else size_done

    def _done(self, tick: list[StoreBatch], outcomes: list[CommitOutcome], waiters, held_errors) -> None:
        self._busy = False
        errors: dict[object, BaseException] = dict(held_errors)
        loop_now = asyncio.get_running_loop().time()
        published = []
        for batch, outcome in zip(tick, outcomes):
            if outcome.store_error is not None:  # kept, in order, for the next retry
                self.faults.hold(batch, outcome.store_error, loop_now + RETRY_S)
                errors[batch.store] = outcome.store_error
                continue
            self.faults.clear(batch.store)
            if outcome.rolled_back:
                errors[batch.store] = outcome.poison_error
                self._roll_back(batch, outcome.rolled_back)
            batch.store.show_committed(batch.views, outcome.rolled_back)
            published.extend((batch.store, session, events) for session, events in batch.committed
                             if events and session.id not in outcome.rolled_back)
            self._settle_output(batch)
        self._resume_sources()
        resolve(waiters, errors)
        self._arm_retry(loop_now)
        if self._pending or self._waiters:
            self._tick()  # the writer commits the next tick while this one's events are published
        for store, session, events in published:
            self._on_committed(store, session, events)

    def _settle_output(self, batch: StoreBatch) -> None:
        for key, size in batch.output.items():
            self._uncount(key, size)

    def _uncount(self, key: int, size: int) -> None:
        self._uncommitted_output -= size
        left = self._session_output.get(key, 0) - size
        if left > 0:
            self._session_output[key] = left
        else:
            self._session_output.pop(key, None)

    def _resume_sources(self) -> None:
        if not self._paused or self._uncommitted_output >= LOW_WATER:
            return
        low = CONTENDED_LOW if self._contended else SESSION_LOW
        for source, (store, key) in list(self._paused.items()):
            if store not in self.faults and self._session_output.get(key, 0) < low:
                del self._paused[source]
                source.resume_output()

    def _roll_back(self, batch: StoreBatch, stored: dict) -> None:
        """Poisoned aggregates go back to their stored state; their output is kept (re-queued),
        and later events staged on them are void, so no seq is skipped or reused."""
        done: set[int] = set()
        for session, events in batch.committed:
            if session.id not in stored:
                continue
            replay = [(e.stream, e.data) for e in events if e.TOPIC == OUTPUT_TOPIC]
            if id(session) not in done:
                done.add(id(session))
                later = self._pending.pop(id(session), None)
                if later is not None:  # its output is counted again as it is re-queued below
                    self._uncount(id(session), later.output_bytes)
                void = session.collect_events()  # output made into events early lands again
                replay.extend((e.stream, e.data) for e in void if e.TOPIC == OUTPUT_TOPIC)
                batch.store.restore(session, stored[session.id])
                if later is not None and later.runs:
                    replay.extend((stream, b"".join(parts)) for stream, parts, _ in later.runs)
            for stream, data in replay:  # output is never dropped: it lands again, renumbered
                self.add_output(batch.store, session, stream, data, None)
        # A request that staged on this store after the failed tick began must not be told
        # its events are committed: they were voided with the rollback.
        self._waiters.fail(batch.store, unencodable())

