"""Where a sandbox's journal lives: one SQLite file in its private state dir (D5).

The file is created with 64 KiB pages and WAL before the library opens it
(ingest-path.md: pages matter most), with incremental auto-vacuum so that retention
can hand freed pages back. Every connection lowers ``wal_autocheckpoint``.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

from eventsourcing.sqlite import SQLiteFactory

DB_NAME = "journal.sqlite"


class TunedSQLiteFactory(SQLiteFactory):
    """The stock factory, with per-connection pragmas the library has no setting for."""

    def __init__(self, env) -> None:
        super().__init__(env)
        pool = self.datastore.pool
        create = pool._create_connection

        def tuned_connection():
            connection = create()
            connection._sqlite_conn.execute("PRAGMA wal_autocheckpoint=256")
            return connection

        pool._create_connection = tuned_connection


def prepare_database(state_dir: Path) -> Path:
    path = state_dir / DB_NAME
    if not path.exists():
        state_dir.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path)
        try:
            connection.execute("PRAGMA page_size=65536")
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
        "PERSISTENCE_MODULE": "infra.event_store:TunedSQLiteFactory",
        "SQLITE_DBNAME": str(path),
        "ORIGINATOR_ID_TYPE": "text",
        "CREATE_TABLE": "y",
        "IS_SNAPSHOTTING_ENABLED": "y",
        "TRANSCODER_TOPIC": "infra.codec:OrjsonTranscoder",
        "COMPRESSOR_TOPIC": "",
        "CIPHER_TOPIC": "",
    }
