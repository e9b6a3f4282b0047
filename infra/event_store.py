"""Where a sandbox's journal lives: one SQLite file in its private state dir (one store per sandbox).

``SqliteJournal`` is the ``JournalStore`` port (``domain.ports``) over one eventsourcing
application: the domain commits domain events and reads ``StoredRow``s; the SQL, the
library's recorders and the codec stay here (the file's tuning: ``sqlite_factory``).
"""
from __future__ import annotations

import errno
import logging
import os
import shutil
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic

from session_supervisor.domain.model import events as ev
from session_supervisor.domain.model.errors import UnavailableError
from session_supervisor.domain.ports import CommitOutcome, RawRows, StoredRow
from session_supervisor.domain.store_faults import store_error

from .journal_common import committed, encode_all, project, stored_row
from .output_segments import OUTPUT_TOPIC, FrameParts, OutputSegments, goes_out_of_line
from .reflink import fsync_dir
from .segment_format import REF_LEN, REF_MARK, SEGMENTS_DIR, is_ref
from .sqlite_factory import DB_NAME, TunedSQLiteFactory, prepare_database, store_env

log = logging.getLogger(__name__)

NEARLY_FULL_BYTES = 1024 * 1024  # less than this left: an I/O error on the store is a full disk


# Older snapshots are dead weight: loading only ever reads the newest one per aggregate.
PRUNE_SNAPSHOTS = (
    "DELETE FROM stored_snapshots WHERE EXISTS (SELECT 1 FROM stored_snapshots AS newer "
    "WHERE newer.originator_id = stored_snapshots.originator_id "
    "AND newer.originator_version > stored_snapshots.originator_version)")


class StoreStillInUseError(OSError):
    pass


def full_disk_as_such(exc: BaseException, directory: Path) -> BaseException:
    """SQLite reports a full disk as "disk I/O error" when the write it could not do was the
    shared-memory index's (``-shm``) rather than a page: say ENOSPC when the store's filesystem
    has no room left, so the caller gets 507, not 503 (seen on a full tmpfs, now and then)."""
    if isinstance(exc, OSError) or "disk i/o error" not in str(exc).lower():
        return exc
    try:
        stats = os.statvfs(directory)
    except OSError:
        return exc
    if stats.f_bavail * stats.f_frsize >= NEARLY_FULL_BYTES:
        return exc
    error = OSError(errno.ENOSPC, f"{exc} (no space left on the store's filesystem)")
    error.__cause__ = exc
    return error


class SegmentMapper(Mapper):
    """The stock mapper, resolving an output event's reference to its segment record first:
    aggregates load (snapshot plus tail) through the library's repository unchanged. A large
    output event is encoded as its frame's two parts (``FrameParts``), which the segment write
    takes as they are: its bytes are copied once, into the file, not first into a joined frame."""

    def __init__(self, segments: OutputSegments, transcoder) -> None:
        super().__init__(transcoder=transcoder)
        self.segments = segments

    def to_stored_event(self, domain_event) -> StoredEvent:
        if (getattr(domain_event, "TOPIC", None) != OUTPUT_TOPIC or self.compressor or self.cipher
                or getattr(type(domain_event), "class_version", 1) > 1):
            return super().to_stored_event(domain_event)
        state = dict(vars(domain_event))  # what the stock mapper encodes, as it takes it
        originator_id, originator_version = state.pop("originator_id"), state.pop("originator_version")
        parts = self.transcoder.output_frame_parts(state)
        if parts is None:
            return super().to_stored_event(domain_event)
        frame = FrameParts(*parts)
        if not goes_out_of_line(OUTPUT_TOPIC, frame):  # small: the row holds the frame
            frame = frame.head + frame.data
        return StoredEvent(originator_id=originator_id, originator_version=originator_version,
                           topic=get_topic(type(domain_event)), state=frame)

    def to_domain_event(self, stored_event: StoredEvent):
        if is_ref(stored_event.state):
            oid, seq = stored_event.originator_id, stored_event.originator_version
            with self.segments.reader() as reader:
                state = reader.state(oid, seq, stored_event.state)
            if state is None:  # never replay an event without its bytes
                raise MapperDeserialisationError(f"segment record of {oid} event {seq} is gone")
            stored_event = StoredEvent(oid, seq, stored_event.topic, state)
        return super().to_domain_event(stored_event)


class _EventsApplication(Application[str]):
    """The library's wiring (factory, recorders, mapper, repository) for one store; its
    mapper reads output bytes kept out of line (``output_segments``)."""

    name = "supervisor"
    snapshot_class = ev.Snapshot

    def __init__(self, env: dict, segments: OutputSegments) -> None:
        self.segments = segments  # before the library's __init__, which builds the mapper
        super().__init__(env=env)

    def construct_mapper(self) -> Mapper:
        return SegmentMapper(self.segments, self.construct_transcoder())


class SqliteJournal:
    """One sandbox's journal in one SQLite file (the ``JournalStore`` port)."""

    def __init__(self, state_dir: Path) -> None:
        try:
            self.path = prepare_database(state_dir)
            self.segments = OutputSegments(state_dir, self._reference_bounds)
            self._app = _EventsApplication(store_env(state_dir), self.segments)
        except Exception as exc:
            raise full_disk_as_such(exc, state_dir) from exc
        self._factory: TunedSQLiteFactory = self._app.factory
        self._decode = self._app.mapper.transcoder.decode_record
        self._readers = 0
        self._closed = False
        self._reads_done = threading.Condition()

    @contextmanager
    def _reading(self):
        """Reads run in worker threads; ``close`` waits for them, because closing a SQLite
        connection while another thread uses it can crash the process."""
        with self._reads_done:
            if self._closed:
                raise UnavailableError("sandbox store is closed")
            self._readers += 1
        try:
            yield
        finally:
            with self._reads_done:
                self._readers -= 1
                self._reads_done.notify_all()

    def close(self) -> None:
        with self._reads_done:
            if self._closed:
                return
            self._closed = True
            self._reads_done.wait_for(lambda: self._readers == 0, timeout=30)
        self._app.close()
        self.segments.close()

    def seal(self) -> None:
        """Close, then fold the WAL into the main file, keeping only the newest snapshots:
        the file on the sandbox's rootfs is then one complete database."""
        self.close()
        self.segments.sync_dirs()  # every record is already durable (commit); retention's unlinks too now
        connection = sqlite3.connect(self.path, isolation_level=None)
        try:
            connection.execute(PRUNE_SNAPSHOTS)
            busy, _log_frames, _done = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                raise StoreStillInUseError(f"store {self.path} is still open elsewhere")
        finally:
            connection.close()

    # ---- loading ------------------------------------------------------------------------
    def load(self) -> list:
        repository = self._app.repository
        return [repository.get(originator_id, projector_func=project)
                for originator_id in self._factory.originator_ids()]

    def stored_copy(self, originator_id: str):
        try:
            return self._app.repository.get(originator_id, projector_func=project)
        except AggregateNotFoundError:
            return None

    # ---- the write path (the writer thread) -----------------------------------------------
    def commit(self, events: list, snapshots: list) -> CommitOutcome:
        """Encode, then insert events and snapshots in one transaction; what the store refused
        is reported, never raised. An aggregate with a value the codec refuses is left out
        (and read back for the loop to roll back to); the rest commits."""
        poisoned: set = set()
        mapper = self._app.mapper
        stored = encode_all(mapper, events, poisoned)
        snaps = encode_all(mapper, snapshots, poisoned) if snapshots else []
        stored = [s for s in stored if s.originator_id not in poisoned]
        written = None
        try:
            # Large output bytes first, written once to segment files and made durable; the
            # transaction that makes their events visible commits only after that (the durability point).
            stored, written = self.segments.append(stored)
            self._insert(stored, snaps)
        except Exception as exc:
            self.segments.undo(written)  # a held batch is retried whole, with the same seqs
            log.warning("journal store refused a commit: %s", exc)
            return CommitOutcome(store_error=store_error(full_disk_as_such(exc, self.path.parent)))
        self.segments.committed(written)
        return committed(poisoned, self.stored_copy)

    def _insert(self, stored: list, snaps: list) -> None:
        """Events and snapshots in one transaction: a held batch is retried whole, so a half
        committed one would insert its events twice."""
        if not snaps:
            if stored:
                self._app.recorder.insert_events(stored)
            return
        with self._factory.datastore.transaction(commit=True) as cursor:
            if stored:
                self._app.recorder._insert_events(cursor, stored)
            self._app.snapshots.recorder._insert_events(cursor, snaps)

    # ---- reads (worker threads) -----------------------------------------------------------
    def read_rows(self, originator_id: str, gt: int, lte: int, limit: int,
                  topics: frozenset[str] | None = None, desc: bool = False) -> list[StoredRow]:
        decode = self._decode
        with self._reading():
            rows = self._factory.select_topics(originator_id, gt, lte, topics, limit, desc)
            if any(is_ref(state) for _v, _t, state in rows):
                rows = self._resolved(originator_id, rows)
        return [stored_row(decode, version, topic, state) for version, topic, state in rows]

    def read_raw(self, originator_id: str, gt: int, lte: int, limit: int,
                 topics: frozenset[str] | None = None) -> RawRows:
        with self._reading():
            rows = self._factory.select_topics(originator_id, gt, lte, topics, limit)
            last = rows[-1][0] if rows else 0  # the last row read, also when its record was gone
            if any(is_ref(state) for _v, _t, state in rows):
                rows = self._resolved(originator_id, rows)
        return RawRows(rows, last, self._decode)

    def _resolved(self, originator_id: str, rows: list) -> list:
        """Rows with their segment records in place of references. A record that is gone was
        trimmed by retention after the rows were read: it and every row older than it are
        left out (retention deletes from the oldest), and the journal view, which re-checks the
        retained window after each read, answers 410 for the hole; never a 500, never other bytes."""
        out, gone = [], 0
        with self.segments.reader() as reader:
            for version, topic, state in rows:
                if is_ref(state):
                    state = reader.state(originator_id, version, state)
                    if state is None:
                        gone = max(gone, version)
                        continue
                out.append((version, topic, state))
        return [row for row in out if row[0] > gone] if gone else out

    # ---- maintenance (the writer thread) --------------------------------------------------
    def trim_events(self, originator_id: str, gt: int, lte: int, keep_topics, limit: int,
                    snapshots_before: int = 0) -> int:
        count = self._factory.trim_events(originator_id, gt, lte, keep_topics, limit, snapshots_before)
        if count < limit and lte > gt and OUTPUT_TOPIC not in keep_topics:
            # Every output row up to lte is gone (or below the window: rows are trimmed only
            # there): files holding nothing newer go with them, after the rows.
            self.segments.release_through(originator_id, lte)
        return count

    def _reference_bounds(self, originator_id: str) -> tuple:
        return self._factory.reference_bounds(originator_id, OUTPUT_TOPIC, REF_MARK, REF_LEN)

    def reclaim_space(self, keep_bytes: int, max_bytes: int) -> int:
        return self._factory.reclaim_space(keep_bytes, max_bytes)

    def delete_stream(self, originator_id: str) -> None:
        with self._reading(), self._factory.datastore.transaction(commit=True) as cursor:
            cursor.execute("DELETE FROM stored_events WHERE originator_id=?", (originator_id,))
            cursor.execute("DELETE FROM stored_snapshots WHERE originator_id=?", (originator_id,))
        self.segments.remove_stream(originator_id)  # after the rows: a crash between leaves only unreferenced files

    def free_bytes(self) -> int:
        return self._factory.free_bytes()


def make_empty_journal(state_dir: Path) -> None:
    """The journal file with its tables and nothing in them, ahead of its sandbox (a warm
    directory, ``infra.warm_pool``): creating them is most of what opening a new store costs."""
    SqliteJournal(state_dir).close()


class SqliteJournals:
    """The ``JournalStores`` port: a journal file in each sandbox's state dir."""

    def __init__(self, state_dir_of, root: Path) -> None:
        self._state_dir_of = state_dir_of  # sandbox id -> its state dir (infra.sandbox_dirs)
        self._root = root

    def list_ids(self) -> list[str]:
        return sorted(p.name for p in self._root.iterdir() if (p / "state" / DB_NAME).exists())

    def open(self, sandbox_id: str) -> SqliteJournal:
        return SqliteJournal(self._state_dir_of(sandbox_id))

    def record(self, sandbox_id: str):
        if not (self._state_dir_of(sandbox_id) / DB_NAME).exists():
            return None
        journal = self.open(sandbox_id)
        try:
            return journal.stored_copy(sandbox_id)
        finally:
            journal.close()

    def forget(self, sandbox_id: str) -> None:
        """The journal gone, durably (its output segments go with the sandbox's files): a delete is
        answered after this, and a start that found the file again would bring the sandbox back."""
        state = self._state_dir_of(sandbox_id)
        removed = False
        for suffix in ("", "-wal", "-shm"):
            try:
                (state / (DB_NAME + suffix)).unlink()
                removed = True
            except FileNotFoundError:
                pass
        if removed:
            fsync_dir(state)

    def remove(self, sandbox_id: str) -> None:
        self.forget(sandbox_id)
        shutil.rmtree(self._state_dir_of(sandbox_id) / SEGMENTS_DIR, ignore_errors=True)
