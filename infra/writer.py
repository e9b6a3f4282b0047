"""The single writer thread (D4): one transaction per store per tick, results to the loop.

The loop side (``domain.commits.CommitPipeline``) decides what goes into a tick; this
thread only encodes and commits, then hands the outcome back with
``call_soon_threadsafe``. The loop never waits on the database.

Each store of a tick commits on its own, so one store that cannot write (disk full,
read-only) never stops the others. Events are encoded before the transaction, per
aggregate: an aggregate holding a value the store cannot encode is left out and read
back from the store (the loop rolls it back), and the rest of its store commits.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Callable

from session_supervisor.domain.store_faults import AppOutcome, store_error, unencodable

log = logging.getLogger(__name__)

# A tick: [(application, events, snapshots)]; done([AppOutcome, ...]) is called on the loop.
Tick = list


class WriterThread:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()

    def submit(self, tick: Tick, done: Callable[[list], None]) -> None:
        self._queue.put((tick, done))

    def run_in_writer(self, fn: Callable[[], object], done: Callable[[object, BaseException | None], None]) -> None:
        """Run a store operation (retention delete, snapshot, checkpoint) in commit order."""
        self._queue.put((fn, done))

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, done = item
            if callable(work):
                self._call(work, done)
            else:
                self._commit(work, done)

    def _call(self, fn, done) -> None:
        try:
            result, error = fn(), None
        except BaseException as exc:  # handed to the loop, which records or re-raises it
            result, error = None, exc
        self._hand_back(done, result, error)

    def _commit(self, tick: Tick, done) -> None:
        outcomes = []
        for app, events, snapshots in tick:
            try:
                outcomes.append(commit_store(app, events, snapshots))
            except BaseException as exc:  # never leave the loop waiting
                log.exception("journal commit failed")
                outcomes.append(AppOutcome(store_error=store_error(exc)))
        self._hand_back(done, outcomes)

    def _hand_back(self, done, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(done, *args)
        except RuntimeError:  # the loop is closed: the process is going down
            pass


def _encode(mapper, items: list, poisoned: set) -> list:
    stored = []
    for item in items:
        if item.originator_id in poisoned:
            continue
        try:
            stored.append(mapper.to_stored_event(item))
        except Exception:
            log.exception("event %s of %s cannot be encoded", item.originator_version, item.originator_id)
            poisoned.add(item.originator_id)
    return [s for s in stored if s.originator_id not in poisoned]


def _insert(app, stored: list, snaps: list) -> None:
    """Events and snapshots in one transaction: a held batch is retried whole, so a half
    committed one would insert its events twice."""
    if not snaps:
        if stored:
            app.recorder.insert_events(stored)
        return
    snapshots = app.snapshots.recorder
    datastore = getattr(app.recorder, "datastore", None)
    if datastore is None or getattr(snapshots, "datastore", None) is not datastore:
        if stored:
            app.recorder.insert_events(stored)
        snapshots.insert_events(snaps)
        return
    with datastore.transaction(commit=True) as cursor:
        if stored:
            app.recorder._insert_events(cursor, stored)
        snapshots._insert_events(cursor, snaps)


def commit_store(app, events: list, snapshots: list) -> AppOutcome:
    """Encode, then insert this store's events and snapshots; what the store refused is
    reported, never raised."""
    poisoned: set = set()
    stored = _encode(app.mapper, events, poisoned)
    snaps = _encode(app.mapper, snapshots, poisoned) if snapshots and app.snapshots is not None else []
    stored = [s for s in stored if s.originator_id not in poisoned]
    try:
        _insert(app, stored, snaps)
    except Exception as exc:
        log.warning("journal store refused a commit: %s", exc)
        return AppOutcome(store_error=store_error(exc))
    if not poisoned:
        return AppOutcome()
    return AppOutcome(rolled_back={oid: app.stored_copy(oid) for oid in poisoned}, poison_error=unencodable())
