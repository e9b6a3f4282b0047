"""The single writer thread (D4): one transaction per store per tick, results to the loop.

The loop side (``domain.commits.CommitPipeline``) decides what goes into a tick; this
thread only encodes and commits, then hands the outcome back with
``call_soon_threadsafe``. The loop never waits on the database.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Callable

log = logging.getLogger(__name__)

# A tick: [(application, events, snapshots)], done(error | None) called on the loop.
Tick = list


class WriterThread:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()

    def submit(self, tick: Tick, done: Callable[[BaseException | None], None]) -> None:
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
        self._loop.call_soon_threadsafe(done, result, error)

    def _commit(self, tick: Tick, done) -> None:
        error = None
        try:
            for app, events, snapshots in tick:
                if events:
                    app.events.put(events)
                if snapshots and app.snapshots is not None:
                    app.snapshots.put(snapshots)
        except BaseException as exc:
            log.exception("journal commit failed")
            error = exc
        try:
            self._loop.call_soon_threadsafe(done, error)
        except RuntimeError:  # the loop is closed: the process is going down
            pass
