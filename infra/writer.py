"""The single writer thread: one transaction per store per tick, results to the loop.

The loop side (``domain.commits.CommitPipeline``) decides what goes into a tick; this
thread only encodes and commits, then hands the outcome back with
``call_soon_threadsafe``. The loop never waits on the database.

Each store of a tick commits on its own, so one store that cannot write (disk full,
read-only) never stops the others; how a store encodes and inserts is its own business
(the ``JournalStore`` port's ``commit``).
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Callable

from session_supervisor.domain.ports import CommitOutcome
from session_supervisor.domain.store_faults import store_error

log = logging.getLogger(__name__)

# A tick: [(journal store, events, snapshots)]; done([CommitOutcome, ...]) is called on the loop.
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
        for journal, events, snapshots in tick:
            try:
                outcomes.append(journal.commit(events, snapshots))
            except BaseException as exc:  # never leave the loop waiting
                log.exception("journal commit failed")
                outcomes.append(CommitOutcome(store_error=store_error(exc)))
        self._hand_back(done, outcomes)

    def _hand_back(self, done, *args) -> None:
        try:
            self._loop.call_soon_threadsafe(done, *args)
        except RuntimeError:  # the loop is closed: the process is going down
            pass
