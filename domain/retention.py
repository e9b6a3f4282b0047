"""Journal retention (``event_retention``): trim in memory, persist, then delete.

A trim is decided on the loop from the marks the aggregate keeps
(``model.retention``): ``earliest_seq`` advances at once, so a read below it gets 410
right away, and no scan of the store is needed. Persisting it is a checkpoint, off
the hot path: a snapshot of the in-memory aggregate rides the next commit tick, and
only after that commit are old output and control rows deleted, a few hundred per
transaction, each queued on the writer thread between commit ticks. Lifecycle rows
(``session.*``, ``attempt.*``) are never deleted while the session exists. Freed
pages are reused by later inserts; a surplus beyond a reserve goes back to the
filesystem (incremental vacuum).

Checkpoints also bound restart cost: a session whose journal grew by
SNAPSHOT_EVENTS events or SNAPSHOT_BYTES since its last snapshot gets a new one, so a
restart replays a short tail whatever the journal length. One worker per sandbox
batches everything due, and sweeps every SWEEP_S for age limits and idle sessions.
"""
from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import TYPE_CHECKING

from .model.event_base import Snapshot
from .model.journal import LIFECYCLE_TOPICS
from .model.retention import trim
from .ports import Clock, JournalStore

if TYPE_CHECKING:
    from .commits import CommitPipeline
    from .sandbox_store import SandboxStore

log = logging.getLogger(__name__)

SWEEP_S = 30.0
PURGE_DELAY_S = 1.0  # trims within a second share one checkpoint...
PURGE_NOW_BYTES = 16 * 1024 * 1024  # ...unless this much (or half the budget) is waiting
DELETE_ROWS = 64  # per transaction: the writer is never held for long (a tick waits at most one)
SNAPSHOT_EVENTS = 500
SNAPSHOT_BYTES = 64 * 1024 * 1024
KEEP_FREE_BYTES = 8 * 1024 * 1024  # of freed space, kept for the next inserts to reuse
VACUUM_BYTES = 4 * 1024 * 1024  # handed back to the filesystem per writer call
_UNSAVED = ("_id", "_version", "_pending_events")


def take_snapshot(session) -> Snapshot:
    """A snapshot detached from the live aggregate: the loop keeps mutating its lists and
    dicts while the writer thread encodes, so containers are deep-copied here."""
    snapshot = Snapshot.take(session)
    state = snapshot.state
    for key in _UNSAVED:
        state.pop(key, None)
    for key, value in state.items():
        state[key] = _detached(value)
    return snapshot


def _detached(value):
    """A copy of JSON-like containers (3-5x cheaper than copy.deepcopy on the loop)."""
    if type(value) is dict:
        return {key: _detached(item) for key, item in value.items()}
    if type(value) is list:
        return [_detached(item) for item in value]
    return value


def _saved_state(session) -> tuple[int, int]:
    return session.version, getattr(session, "journal_bytes", 0)


class Retention:
    def __init__(self, store: SandboxStore, pipeline: CommitPipeline, clock: Clock) -> None:
        self.store = store
        self.pipeline = pipeline
        self.clock = clock
        self._snapped: dict[str, tuple[int, int]] = {}  # id -> (version, journal_bytes) saved
        self._deleted: dict[str, int] = {}  # id -> seq up to which rows are gone (this run)
        self._unpurged: dict[str, int] = {}  # id -> logical bytes trimmed but not deleted
        self._due: dict[str, float] = {}  # id -> loop time its checkpoint is due
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        for session in store.sessions.values():
            self._snapped[session.id] = _saved_state(session)

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(_log_failure)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def stage_snapshots(self) -> int:
        """Snapshot every session changed since its last one into the next commit (shutdown,
        pause): the restart that follows then replays nothing. Returns how many."""
        count = 0
        for session in list(self.store.sessions.values()):
            if session.version > self._snapped.get(session.id, (0, 0))[0]:
                self.pipeline.add_snapshot(self.store, session, take_snapshot(session))
                self._snapped[session.id] = _saved_state(session)
                count += 1
        return count

    def forget(self, session_id: str) -> None:
        for table in (self._snapped, self._deleted, self._unpurged, self._due):
            table.pop(session_id, None)

    # ---- the hot path: O(1) unless something is due ---------------------------------------
    def on_commit(self, session) -> None:
        self.trim(session)
        version, journal_bytes = self._snapped.setdefault(session.id, (0, 0))
        if session.version - version >= SNAPSHOT_EVENTS \
                or getattr(session, "journal_bytes", 0) - journal_bytes >= SNAPSHOT_BYTES:
            self._request(session.id, 0.0)

    def trim(self, session) -> bool:
        """Apply the age and size limits now (appends, reads, spec changes, the sweep)."""
        before = session.retained_bytes
        if not trim(session, self.store.committed_seq.get(session.id, 0), self.clock.now_ns()):
            return False
        unpurged = self._unpurged.get(session.id, 0) + before - session.retained_bytes
        self._unpurged[session.id] = unpurged
        now = unpurged >= max(PURGE_NOW_BYTES, session.spec["event_retention"]["max_bytes"] // 2)
        self._request(session.id, 0.0 if now else PURGE_DELAY_S)
        return True

    def _request(self, session_id: str, delay: float) -> None:
        at = asyncio.get_running_loop().time() + delay
        if at < self._due.get(session_id, float("inf")):
            self._due[session_id] = at
            self._wake.set()

    # ---- the worker -------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + SWEEP_S
        while True:
            now = loop.time()
            if now >= next_sweep:
                self.sweep()
                next_sweep = now + SWEEP_S
            due = [sid for sid, at in self._due.items() if at <= now]
            if due:
                for session_id in due:
                    del self._due[session_id]
                try:
                    await self.checkpoint(due)
                except Exception:  # the next request or sweep retries
                    log.exception("journal checkpoint failed")
                    await asyncio.sleep(1.0)
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), min([next_sweep, *self._due.values()]) - now)
            except asyncio.TimeoutError:
                pass

    def sweep(self) -> None:
        for session in list(self.store.sessions.values()):
            self.trim(session)
            if session.version > self._snapped.get(session.id, (0, 0))[0]:
                self._request(session.id, 0.0)

    async def checkpoint(self, session_ids: list[str]) -> None:
        """Snapshot these sessions in one commit, then delete what their snapshots allow."""
        sessions = self.store.sessions
        saved: dict[str, tuple[int, int]] = {}
        for session_id in session_ids:
            session = sessions.get(session_id)
            if session is None:
                continue
            snapshot = take_snapshot(session)
            self.pipeline.add_snapshot(self.store, session, snapshot)
            saved[session_id] = (snapshot.originator_version, session.earliest_seq - 1)
            self._snapped[session_id] = _saved_state(session)
            self._unpurged.pop(session_id, None)
        if not saved:
            return
        try:
            await self.pipeline.flush(self.store)  # the snapshots are committed: rows below them may go
        except Exception:  # e.g. a full disk: the snapshots stay queued; ask again for the deletes
            for session_id in saved:
                self._request(session_id, 1.0)
            raise
        journal: JournalStore = self.store.journal
        deleted_any = False
        for session_id, (version, through) in saved.items():
            deleted_any |= await self._delete_rows(journal, session_id, through, version)
        if deleted_any:
            await self._reclaim(journal)

    async def _delete_rows(self, journal: JournalStore, session_id: str, through: int, version: int) -> bool:
        """Older snapshots and rows up to ``through``, a few hundred per transaction."""
        deleted = self._deleted.get(session_id, 0)
        total = 0
        while session_id in self.store.sessions:
            count = await self.pipeline.run_in_writer(partial(
                journal.trim_events, session_id, deleted, max(deleted, through), LIFECYCLE_TOPICS,
                DELETE_ROWS, snapshots_before=version))
            total += count
            if count < DELETE_ROWS:
                break
        self._deleted[session_id] = max(deleted, through)
        return total > 0

    async def _reclaim(self, journal: JournalStore) -> None:
        while await self.pipeline.run_in_writer(
                partial(journal.reclaim_space, KEEP_FREE_BYTES, VACUUM_BYTES)) >= VACUUM_BYTES:
            pass


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("journal retention worker failed", exc_info=task.exception())
