"""The SQLite file of a sandbox's journal and the library's factory, tuned.

The file is created with its page size (``PAGE_BYTES``) and WAL before the library opens
it, with incremental auto-vacuum so that retention can hand freed pages back. Every
connection lowers ``wal_autocheckpoint``. The factory adds the SQL the library
has no API for (retention deletes, vacuum, plain-tuple reads, the aggregate ids).
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from eventsourcing.sqlite import SQLiteFactory

DB_NAME = "journal.sqlite"
# 16 KiB pages for stores made now. Output of 32 KiB and more is stored out of line
# (``output_segments``), so rows are small; a commit of one small event writes a few pages to
# the WAL and fsyncs them, and with 64 KiB pages (the right size when every output byte went
# into the file) that made an input's commit take twice as long: input POST to its echo p50
# 1.51 -> 1.29 ms, p99 4.30 -> 2.04 ms (interleaved servers); ingest and replay unchanged.
# A store keeps the page size it was made with.
PAGE_BYTES = 16 * 1024
WAL_LIMIT_BYTES = 8 * 1024 * 1024
WAL_CHECKPOINT_BYTES = 16 * 1024 * 1024  # the WAL is folded into the file after this much


class TunedSQLiteFactory(SQLiteFactory):
    """The stock factory, with per-connection pragmas the library has no setting for."""

    def __init__(self, env) -> None:
        super().__init__(env)
        pool = self.datastore.pool
        create = pool._create_connection

        def tuned_connection():
            connection = create()
            raw = connection._sqlite_conn
            page_size = raw.execute("PRAGMA page_size").fetchone()[0]
            raw.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_BYTES // page_size}")
            # A WAL file keeps its largest size unless told otherwise: after a flood it would
            # hold tens of MiB that retention had already freed (the disk stays bounded).
            raw.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
            return connection

        pool._create_connection = tuned_connection

    def aggregate_recorder(self, purpose: str = "events"):
        recorder = super().aggregate_recorder(purpose)
        if purpose == "snapshots":
            # Retention and pause may both snapshot a session at the same version (only its
            # window moved): the newer snapshot replaces the older instead of failing the tick.
            recorder.insert_events_statement = recorder.insert_events_statement.replace(
                "INSERT INTO", "INSERT OR REPLACE INTO", 1)
        return recorder

    def free_bytes(self) -> int:
        """Bytes the server can still write on the store's filesystem: as root, also the blocks the
        filesystem keeps for root (the server's disk reserve lives there: infra/disk_reserve.py)."""
        stats = os.statvfs(os.path.dirname(self.datastore.pool.db_name) or ".")
        return (stats.f_bfree if os.geteuid() == 0 else stats.f_bavail) * stats.f_frsize

    # ---- journal maintenance (retention, audit): SQL the library has no API for ----------
    def trim_events(self, originator_id: str, gt: int, lte: int, keep_topics, limit: int,
                    snapshots_before: int = 0) -> int:
        """Delete up to ``limit`` rows in (gt, lte] whose topic is not kept, and the snapshots
        older than ``snapshots_before``, in one transaction; returns the rows deleted.

        The ``rowid < MAX(rowid)`` guard keeps the newest row of the table, so SQLite never
        hands out a notification id twice.
        """
        keep = tuple(keep_topics)
        marks = ",".join("?" * len(keep))
        with self.datastore.transaction(commit=True) as cursor:
            if snapshots_before:
                cursor.execute("DELETE FROM stored_snapshots WHERE originator_id=? AND originator_version<?",
                               (originator_id, snapshots_before))
            if lte <= gt:
                return 0
            cursor.execute(
                "DELETE FROM stored_events WHERE rowid IN (SELECT rowid FROM stored_events "
                "WHERE originator_id=? AND originator_version>? AND originator_version<=? "
                f"AND topic NOT IN ({marks}) ORDER BY originator_version LIMIT ?) "
                "AND rowid < (SELECT MAX(rowid) FROM stored_events)",
                (originator_id, gt, lte, *keep, limit))
            return cursor.sqlite_cursor.rowcount

    def reclaim_space(self, keep_bytes: int, max_bytes: int) -> int:
        """Give up to ``max_bytes`` of free pages back to the filesystem, keeping ``keep_bytes``
        for the next inserts to reuse; returns the bytes freed. Python's ``execute`` runs
        only one step of ``incremental_vacuum``, ``executescript`` runs it to the end."""
        with self.datastore.get_connection(commit=True) as connection:
            raw = connection._sqlite_conn
            page_size = raw.execute("PRAGMA page_size").fetchone()[0]
            free = raw.execute("PRAGMA freelist_count").fetchone()[0]
            pages = min(max_bytes // page_size, free - keep_bytes // page_size)
            if pages <= 0:
                return 0
            raw.executescript(f"PRAGMA incremental_vacuum({int(pages)})")
            return pages * page_size

    def select_topics(self, originator_id: str, gt: int, lte: int, topics, limit: int,
                      desc: bool = False) -> list:
        """``(version, topic, state)`` rows in (gt, lte], ascending (or descending), of the given
        topics (all when None): plain tuples, a third of the cost of the recorder's StoredEvent
        objects."""
        wanted = tuple(topics or ())
        where = f" AND topic IN ({','.join('?' * len(wanted))})" if wanted else ""
        with self.datastore.transaction(commit=False) as cursor:
            raw = cursor.sqlite_cursor
            raw.row_factory = None
            raw.execute(
                "SELECT originator_version, topic, state FROM stored_events WHERE originator_id=? "
                f"AND originator_version>? AND originator_version<=?{where} "
                f"ORDER BY originator_version {'DESC' if desc else 'ASC'} LIMIT ?",
                (originator_id, gt, lte, *wanted, limit))
            return raw.fetchall()

    def reference_bounds(self, originator_id: str, topic: str, mark: bytes, length: int) -> tuple:
        """The states of the oldest and the newest row of ``topic`` whose state is a reference
        (``mark`` + fixed ``length``; ``output_segments``): None, None when it has none.
        ``length()`` of a blob reads no overflow page, so inline rows cost one record each."""
        found = []
        with self.datastore.transaction(commit=False) as cursor:
            for order in ("ASC", "DESC"):
                cursor.execute(
                    "SELECT state FROM stored_events WHERE originator_id=? AND topic=? "
                    "AND length(state)=? AND substr(state, 1, 1)=? "
                    f"ORDER BY originator_version {order} LIMIT 1",
                    (originator_id, topic, length, mark))
                row = cursor.fetchone()
                found.append(bytes(row[0]) if row else None)
        return tuple(found)

    def originator_ids(self) -> list[str]:
        """Every aggregate id in the store, one index seek each: cost grows with the number
        of sessions, not with the length of their journals (DISTINCT walks every row)."""
        ids: list[str] = []
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT MIN(originator_id) FROM stored_events")
            current = cursor.fetchone()[0]
            while current is not None:
                ids.append(current)
                cursor.execute("SELECT MIN(originator_id) FROM stored_events WHERE originator_id>?",
                               (current,))
                current = cursor.fetchone()[0]
        return ids


def prepare_database(state_dir: Path) -> Path:
    path = state_dir / DB_NAME
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path)
        try:
            connection.execute(f"PRAGMA page_size={PAGE_BYTES}")
            connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("CREATE TABLE IF NOT EXISTS _created (x)")
            connection.execute("DROP TABLE _created")
            connection.commit()
        finally:
            connection.close()
    return path


def store_env(state_dir: Path) -> dict[str, str]:
    path = prepare_database(state_dir)
    return {
        "PERSISTENCE_MODULE": "session_supervisor.infra.sqlite_factory:TunedSQLiteFactory",
        "SQLITE_DBNAME": str(path),
        "ORIGINATOR_ID_TYPE": "text",
        "CREATE_TABLE": "y",
        "IS_SNAPSHOTTING_ENABLED": "y",
        "TRANSCODER_TOPIC": "session_supervisor.infra.codec:OrjsonTranscoder",
        "COMPRESSOR_TOPIC": "",
        "CIPHER_TOPIC": "",
    }
