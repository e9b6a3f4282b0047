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
    from .live_session import LiveSession
    from .sandbox_store import SandboxStore
    from .task_owner import TaskOwner

log = logging.getLogger(__name__)

SWEEP_S = 30.0
PURGE_DELAY_S = 1.0  # trims within a second share one checkpoint...
PURGE_NOW_BYTES = 16 * 1024 * 1024  # ...unless this much (or half the budget) is waiting
DELETE_ROWS = 64  # per transaction: the writer is never held for long (a tick waits at most one)
SNAPSHOT_EVENTS = 500
SNAPSHOT_BYTES = 64 * 1024 * 1024
KEEP_FREE_BYTES = 8 * 1024 * 1024  # of freed space, kept for the next inserts to reuse
VACUUM_BYTES = 4 * 1024 * 1024  # handed back to the filesystem per writer call
_UNSAVED = ("_id", "_version", "_pending_events", "_settings")  # _settings: a cache (Session.settings)


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
    """One sandbox's journal retention: the marks live in each ``LiveSession.retention``; one
    worker (a task of the runtime) does what is due."""

    def __init__(self, store: SandboxStore, pipeline: CommitPipeline, clock: Clock, tasks: TaskOwner) -> None:
        self.store = store
        self.pipeline = pipeline
        self.clock = clock
        self.tasks = tasks
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = self.tasks.spawn(self._run(), "journal retention")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def stage_snapshots(self) -> int:
        """Snapshot every session changed since its last one into the next commit (shutdown,
        pause): the restart that follows then replays nothing. Returns how many."""
        count = 0
        for live in list(self.store.live.values()):
            session = live.aggregate
            if session.version > live.retention.snapped[0]:
                self.pipeline.add_snapshot(self.store, session, take_snapshot(session))
                live.retention.snapped = _saved_state(session)
                count += 1
        return count

    # ---- the hot path: O(1) unless something is due ---------------------------------------
    def on_commit(self, live: LiveSession) -> None:
        session = live.aggregate
        self.trim(session)
        version, journal_bytes = live.retention.snapped
        if session.version - version >= SNAPSHOT_EVENTS \
                or getattr(session, "journal_bytes", 0) - journal_bytes >= SNAPSHOT_BYTES:
            self._request(live, 0.0)

    def trim(self, session) -> bool:
        """Apply the age and size limits now (appends, reads, spec changes, the sweep)."""
        live = self.store.live.get(session.id)
        if live is None:
            return False
        before = session.retained_bytes
        if not trim(session, live.committed_seq, self.clock.now_ns()):
            return False
        marks = live.retention
        marks.unpurged += before - session.retained_bytes
        now = marks.unpurged >= max(PURGE_NOW_BYTES, session.settings.event_retention.max_bytes // 2)
        self._request(live, 0.0 if now else PURGE_DELAY_S)
        return True

    def _request(self, live: LiveSession, delay: float) -> None:
        at = asyncio.get_running_loop().time() + delay
        marks = live.retention
        if marks.due_at is None or at < marks.due_at:
            marks.due_at = at
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
            marked = [live for live in self.store.live.values() if live.retention.due_at is not None]
            due = [live.id for live in marked if live.retention.due_at <= now]
            if due:
                for live in marked:
                    if live.retention.due_at <= now:
                        live.retention.due_at = None
                try:
                    await self.checkpoint(due)
                except Exception:  # the next request or sweep retries
                    log.exception("journal checkpoint failed")
                    await asyncio.sleep(1.0)
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(),
                                       min([next_sweep, *(live.retention.due_at for live in marked)]) - now)
            except asyncio.TimeoutError:
                pass

    def sweep(self) -> None:
        for live in list(self.store.live.values()):
            self.trim(live.aggregate)
            if live.aggregate.version > live.retention.snapped[0]:
                self._request(live, 0.0)

    async def checkpoint(self, session_ids: list[str]) -> None:
        """Snapshot these sessions in one commit, then delete what their snapshots allow."""
        sessions = self.store.live
        saved: dict[str, tuple[int, int]] = {}
        for session_id in session_ids:
            live = sessions.get(session_id)
            if live is None:
                continue
            session = live.aggregate
            snapshot = take_snapshot(session)
            self.pipeline.add_snapshot(self.store, session, snapshot)
            saved[session_id] = (snapshot.originator_version, session.earliest_seq - 1)
            live.retention.snapped = _saved_state(session)
            live.retention.unpurged = 0
        if not saved:
            return
        try:
            await self.pipeline.flush(self.store)  # the snapshots are committed: rows below them may go
        except Exception:  # e.g. a full disk: the snapshots stay queued; ask again for the deletes
            for session_id in saved:
                live = sessions.get(session_id)
                if live is not None:
                    self._request(live, 1.0)
            raise
        journal: JournalStore = self.store.journal
        deleted_any = False
        for session_id, (version, through) in saved.items():
            deleted_any |= await self._delete_rows(journal, session_id, through, version)
        if deleted_any:
            await self._reclaim(journal)

    async def _delete_rows(self, journal: JournalStore, session_id: str, through: int, version: int) -> bool:
        """Older snapshots and rows up to ``through``, a few hundred per transaction."""
        live = self.store.live.get(session_id)
        if live is None:
            return False
        deleted = live.retention.deleted_through
        total = 0
        while self.store.live.get(session_id) is live:
            count = await self.pipeline.run_in_writer(partial(
                journal.trim_events, session_id, deleted, max(deleted, through), LIFECYCLE_TOPICS,
                DELETE_ROWS, snapshots_before=version))
            total += count
            if count < DELETE_ROWS:
                break
        live.retention.deleted_through = max(deleted, through)
        return total > 0

    async def _reclaim(self, journal: JournalStore) -> None:
        while await self.pipeline.run_in_writer(
                partial(journal.reclaim_space, KEEP_FREE_BYTES, VACUUM_BYTES)) >= VACUUM_BYTES:
            pass
