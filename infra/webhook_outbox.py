"""The webhooks' durable outbox: one SQLite file in the data dir (``webhooks.sqlite``, mode 0600:
it holds the secrets), written with ``synchronous=FULL`` so a delivery enqueued is on disk before
anything is sent, and survives a crash or kill -9.

Tables: ``outbox`` (one row per delivery still owed: the exact body bytes, so every retry signs and
sends the same bytes), ``subscriptions`` (a sandbox's webhook while it exists: a deleted sandbox's
url and secret must outlive its store, for ``sandbox.deleted``), and ``watermarks`` (the last seq
of a sandbox's record whose deliveries were enqueued: events found in the journal past it after a
crash are enqueued then). Calls block; the webhooks service runs them in worker threads.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from dataclasses import dataclass

SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    event_id TEXT PRIMARY KEY, sandbox_id TEXT NOT NULL, event_type TEXT NOT NULL, url TEXT NOT NULL,
    secret TEXT NOT NULL, body BLOB NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, next_at REAL NOT NULL,
    give_up_at REAL NOT NULL, last_error TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (next_at);
CREATE TABLE IF NOT EXISTS subscriptions (
    sandbox_id TEXT PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL, watch_dir TEXT NOT NULL,
    team_id TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS watermarks (sandbox_id TEXT PRIMARY KEY, seq INTEGER NOT NULL);
"""
MAX_PENDING_PER_SANDBOX = 10_000


@dataclass(frozen=True)
class Delivery:
    event_id: str
    sandbox_id: str
    event_type: str
    url: str
    secret: str
    body: bytes
    attempts: int
    give_up_at: float


@dataclass(frozen=True)
class Subscription:
    sandbox_id: str
    url: str
    secret: str
    watch_dir: str
    team_id: str = ""


class Outbox:
    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        os.close(fd)
        os.chmod(path, 0o600)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ---- subscriptions and watermarks --------------------------------------------------------------
    def subscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO subscriptions VALUES (?, ?, ?, ?, ?)",
                             (sub.sandbox_id, sub.url, sub.secret, sub.watch_dir, sub.team_id))

    def subscriptions(self) -> list[Subscription]:
        with self._lock:
            return [Subscription(*row) for row in self._db.execute("SELECT * FROM subscriptions")]

    def watermark(self, sandbox_id: str) -> int:
        with self._lock:
            row = self._db.execute("SELECT seq FROM watermarks WHERE sandbox_id = ?", (sandbox_id,)).fetchone()
        return row[0] if row else 0

    # ---- enqueueing (each call one transaction) -----------------------------------------------------
    def enqueue(self, sub: Subscription, deliveries: list[tuple[str, str, bytes]], now: float, give_up_s: float,
                watermark: int | None = None, unsubscribe: bool = False) -> int:
        """Add ``(event_id, event_type, body)`` rows for ``sub`` (an event id already there is kept as
        it is), and in the same transaction move the watermark or drop the subscription. Returns how
        many were added (beyond the per-sandbox bound, none are)."""
        added = 0
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            pending = self._db.execute("SELECT count(*) FROM outbox WHERE sandbox_id = ?",
                                       (sub.sandbox_id,)).fetchone()[0]
            for event, kind, raw in deliveries:
                if pending + added >= MAX_PENDING_PER_SANDBOX:
                    break
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO outbox (event_id, sandbox_id, event_type, url, secret, body, next_at, "
                    "give_up_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (event, sub.sandbox_id, kind, sub.url, sub.secret, raw, now, now + give_up_s))
                added += cursor.rowcount
            if watermark is not None:
                self._db.execute("INSERT OR REPLACE INTO watermarks VALUES (?, ?)", (sub.sandbox_id, watermark))
            if unsubscribe:
                self._db.execute("DELETE FROM subscriptions WHERE sandbox_id = ?", (sub.sandbox_id,))
                self._db.execute("DELETE FROM watermarks WHERE sandbox_id = ?", (sub.sandbox_id,))
        return added

    # ---- delivering ---------------------------------------------------------------------------------
    def due(self, now: float, limit: int, exclude: set[str]) -> tuple[list[Delivery], float | None]:
        """Rows due now (oldest first), and when the next one not due yet is."""
        with self._lock:
            rows = self._db.execute(
                "SELECT event_id, sandbox_id, event_type, url, secret, body, attempts, give_up_at FROM outbox "
                "WHERE next_at <= ? ORDER BY next_at LIMIT ?", (now, limit + len(exclude))).fetchall()
            upcoming = self._db.execute("SELECT min(next_at) FROM outbox WHERE next_at > ?", (now,)).fetchone()[0]
        due = [Delivery(*row[:5], bytes(row[5]), row[6], row[7]) for row in rows if row[0] not in exclude][:limit]
        return due, upcoming

    def delivered(self, event: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM outbox WHERE event_id = ?", (event,))

    def retry(self, event: str, next_at: float, error: str) -> None:
        with self._lock:
            self._db.execute("UPDATE outbox SET attempts = attempts + 1, next_at = ?, last_error = ? "
                             "WHERE event_id = ?", (next_at, error[:500], event))

    def pending(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM outbox").fetchone()[0]
