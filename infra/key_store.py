"""Where teams and API keys live (the ``KeyStore`` port): one SQLite file per server, ``<data>/keys.sqlite``.

The SQL is written once, for both databases (``%s`` placeholders, ``{teams}`` and ``{keys}``
table names); ``SqliteKeyStore`` and ``infra.pg_key_store.PostgresKeyStore`` only say how a
statement runs. Times are integer nanoseconds, as everywhere in the journals; ``roles`` is a
JSON list. The secret is never stored: only its SHA-256 (``secret_hash``, unique) and the first
characters a listing shows.

This server is the only writer of its SQLite file (the data dir's lock), so it keeps every key
in memory by hash and authenticates without a query or a thread; its copy is updated after
each committed write. There are few keys (a handful per team), so the copy is small.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

from session_supervisor.domain.model.access import ApiKey, Team

FILE_NAME = "keys.sqlite"
KEY_COLUMNS = ("id", "secret_hash", "prefix", "team_id", "name", "scope", "roles", "created_by", "is_active",
               "expires_ns", "created_ns", "updated_ns")
TEAM_COLUMNS = ("id", "name", "slug", "home_region_id", "created_ns", "updated_ns")

CREATE = (
    "CREATE TABLE IF NOT EXISTS {teams} (id text PRIMARY KEY, name text NOT NULL, slug text NOT NULL,"
    " home_region_id text NOT NULL, created_ns bigint NOT NULL, updated_ns bigint NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {keys} (id text PRIMARY KEY, secret_hash text NOT NULL UNIQUE,"
    " prefix text NOT NULL, team_id text NOT NULL, name text NOT NULL, scope text NOT NULL,"
    " roles text NOT NULL, created_by text NOT NULL, is_active boolean NOT NULL,"
    " expires_ns bigint NOT NULL, created_ns bigint NOT NULL, updated_ns bigint NOT NULL)",
    "CREATE INDEX IF NOT EXISTS {keys_by_team} ON {keys} (team_id)",
)
_KEY_SELECT = "SELECT " + ", ".join(KEY_COLUMNS) + " FROM {keys}"
_TEAM_SELECT = "SELECT " + ", ".join(TEAM_COLUMNS) + " FROM {teams}"
SQL = {
    "insert_team": "INSERT INTO {teams} (" + ", ".join(TEAM_COLUMNS) + ") VALUES (%s, %s, %s, %s, %s, %s)",
    "teams": _TEAM_SELECT,
    "team": _TEAM_SELECT + " WHERE id = %s",
    "update_team": "UPDATE {teams} SET name = %s, slug = %s, updated_ns = %s WHERE id = %s",
    "delete_team_keys": "DELETE FROM {keys} WHERE team_id = %s",
    "delete_team": "DELETE FROM {teams} WHERE id = %s",
    "insert_key": "INSERT INTO {keys} (" + ", ".join(KEY_COLUMNS) + ") VALUES (" + ", ".join(["%s"] * 12) + ")",
    "keys": _KEY_SELECT,
    "team_keys": _KEY_SELECT + " WHERE team_id = %s",
    "key": _KEY_SELECT + " WHERE id = %s",
    "key_by_hash": _KEY_SELECT + " WHERE secret_hash = %s",
    "deactivate_key": "UPDATE {keys} SET is_active = %s, updated_ns = %s WHERE id = %s",
    "delete_key": "DELETE FROM {keys} WHERE id = %s",
}


def key_row(key: ApiKey) -> tuple:
    return (key.id, key.secret_hash, key.prefix, key.team_id, key.name, key.scope, json.dumps(list(key.roles)),
            key.created_by, key.is_active, key.expires_ns, key.created_ns, key.updated_ns)


def key_of(row) -> ApiKey:
    return ApiKey(id=row["id"], team_id=row["team_id"], name=row["name"], scope=row["scope"],
                  roles=tuple(json.loads(row["roles"])), created_by=row["created_by"],
                  secret_hash=row["secret_hash"], prefix=row["prefix"], expires_ns=row["expires_ns"],
                  created_ns=row["created_ns"], updated_ns=row["updated_ns"], is_active=bool(row["is_active"]))


def team_of(row) -> Team:
    return Team(**{name: row[name] for name in TEAM_COLUMNS})


class SqlKeyStore:
    """The store's calls over ``_run(name, args, fetch)`` and ``_transaction([(name, args)])``."""

    memory_reads = False

    def _run(self, name: str, args: tuple = (), fetch: bool = False):  # rows when fetch, else rowcount
        raise NotImplementedError

    def _transaction(self, statements: list[tuple[str, tuple]]) -> list[int]:
        raise NotImplementedError

    def create_team(self, team: Team) -> None:
        self._run("insert_team", tuple(getattr(team, name) for name in TEAM_COLUMNS))

    def teams(self) -> list[Team]:
        return [team_of(row) for row in self._run("teams", fetch=True)]

    def team(self, team_id: str) -> Team | None:
        rows = self._run("team", (team_id,), fetch=True)
        return team_of(rows[0]) if rows else None

    def update_team(self, team: Team) -> bool:
        return self._run("update_team", (team.name, team.slug, team.updated_ns, team.id)) > 0

    def delete_team(self, team_id: str) -> bool:
        _keys, teams = self._transaction([("delete_team_keys", (team_id,)), ("delete_team", (team_id,))])
        return teams > 0

    def add_key(self, key: ApiKey) -> None:
        self._run("insert_key", key_row(key))

    def keys(self, team_id: str | None) -> list[ApiKey]:
        rows = self._run("keys", fetch=True) if team_id is None else self._run("team_keys", (team_id,), fetch=True)
        return [key_of(row) for row in rows]

    def key(self, key_id: str) -> ApiKey | None:
        rows = self._run("key", (key_id,), fetch=True)
        return key_of(rows[0]) if rows else None

    def key_by_hash(self, secret_hash: str) -> ApiKey | None:
        rows = self._run("key_by_hash", (secret_hash,), fetch=True)
        return key_of(rows[0]) if rows else None

    def deactivate_key(self, key_id: str, at_ns: int) -> bool:
        return self._run("deactivate_key", (False, at_ns, key_id)) > 0

    def delete_key(self, key_id: str) -> bool:
        return self._run("delete_key", (key_id,)) > 0

    def close(self) -> None:
        pass


class SqliteKeyStore(SqlKeyStore):
    memory_reads = True

    def __init__(self, data_dir: Path) -> None:
        path = Path(data_dir) / FILE_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)  # hashes only, still nobody else's
        os.close(fd)
        # One connection, used from the domain's worker threads one call at a time (the lock).
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a key acknowledged is a key that survives a crash
        self._lock = threading.RLock()  # a write and the refresh of the copy after it, as one
        names = {"teams": "teams", "keys": "api_keys", "keys_by_team": "api_keys_by_team"}
        self._sql = {name: sql.format(**names).replace("%s", "?") for name, sql in SQL.items()}
        with self._lock:
            for statement in CREATE:
                self._db.execute(statement.format(**names))
        self._by_hash = {key.secret_hash: key for key in super().keys(None)}

    def _run(self, name: str, args: tuple = (), fetch: bool = False):
        with self._lock:
            cursor = self._db.execute(self._sql[name], args)
            return cursor.fetchall() if fetch else cursor.rowcount

    def _transaction(self, statements: list[tuple[str, tuple]]) -> list[int]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                counts = [self._db.execute(self._sql[name], args).rowcount for name, args in statements]
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return counts

    # The in-memory copy follows every committed write, made under the same lock as the write:
    # two writes at once must not let the older copy replace the newer one.
    def _then_refresh(self, write, *args):
        with self._lock:
            result = write(*args)
            self._by_hash = {key.secret_hash: key for key in super().keys(None)}
        return result

    def key_by_hash(self, secret_hash: str) -> ApiKey | None:
        return self._by_hash.get(secret_hash)

    def add_key(self, key: ApiKey) -> None:
        self._then_refresh(super().add_key, key)

    def deactivate_key(self, key_id: str, at_ns: int) -> bool:
        return self._then_refresh(super().deactivate_key, key_id, at_ns)

    def delete_key(self, key_id: str) -> bool:
        return self._then_refresh(super().delete_key, key_id)

    def delete_team(self, team_id: str) -> bool:
        return self._then_refresh(super().delete_team, team_id)

    def close(self) -> None:
        with self._lock:
            self._db.close()
