"""A sandbox's journal in PostgreSQL: the ``JournalStore`` port over its two tables (``pg_store``).

Every node shares one datastore (one pool). A sandbox's events and snapshots live in its own
pair of tables, created at claim and dropped at delete; the layout and its measured costs are
in ``pg_store``. Every write is fenced: it runs in one transaction with a share lock on the
sandbox's lease row and commits only while that row still names this node at the epoch it
acquired (``leases.fence``). A node that lost the sandbox (paused, partitioned, killed and
restarted while another node took over) can therefore never write into its journal again:
its commit is refused and its runtime is ended (``domain.placement``).
"""
from __future__ import annotations

import logging

from psycopg.sql import SQL, Identifier

from session_supervisor.domain.model.errors import StoreUnavailableError
from session_supervisor.domain.ports import CommitOutcome, RawRows, StoredRow
from session_supervisor.domain.store_faults import store_error

from .cluster import LeaseOwnership
from .journal_common import committed, encode_all, project, stored_row
from .leases import LeaseLostError, fence
from .leases import TABLE as LEASES_TABLE
from .pg_store import create_sandbox_tables, drop_sandbox_tables, insert, mapper, recorders, table_names

log = logging.getLogger(__name__)


class PostgresJournal:
    def __init__(self, datastore, sandbox_id: str, ownership: LeaseOwnership) -> None:
        self._datastore = datastore
        self.sandbox_id = sandbox_id
        self._ownership = ownership
        self._mapper = mapper()
        self._decode = self._mapper.transcoder.decode_record
        self._recorders = recorders(datastore, sandbox_id)
        schema = datastore.schema
        events, snapshots = table_names(sandbox_id)
        self._events = Identifier(schema, events)
        self._snapshots = Identifier(schema, snapshots)

    # ---- loading ------------------------------------------------------------------------
    def _originator_ids(self) -> list[str]:
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(SQL("SELECT DISTINCT originator_id FROM {}").format(self._events))
            return [row["originator_id"] for row in cursor.fetchall()]

    def load(self) -> list:
        aggregates = [self.stored_copy(originator_id) for originator_id in self._originator_ids()]
        return [aggregate for aggregate in aggregates if aggregate is not None]

    def stored_copy(self, originator_id: str):
        snapshots = self._recorders.snapshots.select_events(originator_id, desc=True, limit=1)
        initial, after = None, None
        if snapshots:
            initial = self._mapper.to_domain_event(snapshots[0]).mutate(None)
            after = snapshots[0].originator_version
        events = self._recorders.events.select_events(originator_id, gt=after)
        if initial is None and not events:
            return None
        return project(initial, (self._mapper.to_domain_event(stored) for stored in events))

    # ---- the write path (the writer thread) -----------------------------------------------
    def commit(self, events: list, snapshots: list) -> CommitOutcome:
        poisoned: set = set()
        stored = encode_all(self._mapper, events, poisoned)
        snaps = encode_all(self._mapper, snapshots, poisoned) if snapshots else []
        stored = [s for s in stored if s.originator_id not in poisoned]
        lease = self._ownership.lease(self.sandbox_id)
        if lease is None:
            return CommitOutcome(store_error=StoreUnavailableError(
                "this node does not hold the sandbox's lease: its journal is not written here"))
        try:
            if stored or snaps:
                insert(self._datastore, self.sandbox_id, lease, stored, snaps)
        except LeaseLostError as lost:
            log.warning("sandbox %s: commit refused, %s", self.sandbox_id, lost)
            return CommitOutcome(store_error=StoreUnavailableError(f"the sandbox moved to another node: {lost}"))
        except Exception as exc:
            log.warning("journal store refused a commit: %s", exc)
            return CommitOutcome(store_error=store_error(exc))
        return committed(poisoned, self.stored_copy)

    # ---- reads (worker threads) -----------------------------------------------------------
    def read_rows(self, originator_id: str, gt: int, lte: int, limit: int,
                  topics: frozenset[str] | None = None, desc: bool = False) -> list[StoredRow]:
        decode = self._decode
        return [stored_row(decode, version, topic, state)
                for version, topic, state in self._select(originator_id, gt, lte, limit, topics, desc)]

    def read_raw(self, originator_id: str, gt: int, lte: int, limit: int,
                 topics: frozenset[str] | None = None) -> RawRows:
        rows = self._select(originator_id, gt, lte, limit, topics)
        return RawRows(rows, rows[-1][0] if rows else 0, self._decode)

    def _select(self, originator_id: str, gt: int, lte: int, limit: int, topics, desc: bool = False) -> list:
        """``(version, topic, state)`` rows in (gt, lte], ascending (or descending)."""
        where = SQL(" AND topic = ANY(%s)") if topics else SQL("")
        params = [originator_id, gt, lte, *([sorted(topics)] if topics else []), limit]
        statement = SQL("SELECT originator_version, topic, state FROM {} WHERE originator_id = %s"
                        " AND originator_version > %s AND originator_version <= %s{}"
                        " ORDER BY originator_version {} LIMIT %s").format(
            self._events, where, SQL("DESC" if desc else "ASC"))
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, params)
            rows = cursor.fetchall()
        return [(row["originator_version"], row["topic"], bytes(row["state"])) for row in rows]

    # ---- maintenance (the writer thread): fenced like a commit ---------------------------------
    def _fenced(self, statements: list) -> int:
        """Run maintenance statements in one transaction under the lease's fence; returns the
        rows the last statement touched."""
        lease = self._ownership.lease(self.sandbox_id)
        if lease is None:
            raise StoreUnavailableError("this node does not hold the sandbox's lease")
        count = 0
        with self._datastore.transaction(commit=True) as cursor:
            fence(cursor, [lease], schema=self._datastore.schema, table=LEASES_TABLE)
            for statement, params in statements:
                cursor.execute(statement, params)
                count = max(cursor.rowcount, 0)
        return count

    def trim_events(self, originator_id: str, gt: int, lte: int, keep_topics, limit: int,
                    snapshots_before: int = 0) -> int:
        statements = []
        if snapshots_before:
            statements.append((SQL("DELETE FROM {} WHERE originator_id = %s AND originator_version < %s")
                               .format(self._snapshots), (originator_id, snapshots_before)))
        if lte > gt:
            # Sequences are never reused in PostgreSQL: no guard for the newest row (cf. SQLite).
            statements.append((SQL(
                "DELETE FROM {t} WHERE originator_id = %s AND originator_version IN ("
                "SELECT originator_version FROM {t} WHERE originator_id = %s AND originator_version > %s"
                " AND originator_version <= %s AND NOT (topic = ANY(%s)) ORDER BY originator_version LIMIT %s)")
                .format(t=self._events), (originator_id, originator_id, gt, lte, sorted(keep_topics), limit)))
        if not statements:
            return 0
        deleted = self._fenced(statements)
        return deleted if lte > gt else 0

    def reclaim_space(self, keep_bytes: int, max_bytes: int) -> int:
        return 0  # autovacuum reclaims dead rows (pg_store sets its thresholds for retention)

    def delete_stream(self, originator_id: str) -> None:
        self._fenced([(SQL("DELETE FROM {} WHERE originator_id = %s").format(self._events), (originator_id,)),
                      (SQL("DELETE FROM {} WHERE originator_id = %s").format(self._snapshots), (originator_id,))])

    def free_bytes(self) -> None:
        return None  # the database's disk is the database's business

    def seal(self) -> None:
        pass  # every commit is already durable in the database; the pool is the node's

    def close(self) -> None:
        pass


class PostgresJournals:
    """The ``JournalStores`` port over one database: a pair of tables per sandbox."""

    def __init__(self, datastore, ownership: LeaseOwnership) -> None:
        self._datastore = datastore
        self._ownership = ownership

    def list_ids(self) -> list[str]:
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(SQL("SELECT sandbox_id FROM {} ORDER BY sandbox_id").format(
                Identifier(self._datastore.schema, LEASES_TABLE)))
            return [row["sandbox_id"] for row in cursor.fetchall()]

    def open(self, sandbox_id: str) -> PostgresJournal:
        if not self._exists(sandbox_id):  # claim: DDL once, never on the way to an existing one
            create_sandbox_tables(self._datastore, sandbox_id)
        return PostgresJournal(self._datastore, sandbox_id, self._ownership)

    def record(self, sandbox_id: str):
        if not self._exists(sandbox_id):  # deleted meanwhile
            return None
        return PostgresJournal(self._datastore, sandbox_id, self._ownership).stored_copy(sandbox_id)

    def _exists(self, sandbox_id: str) -> bool:
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL AS present",
                           (f'"{self._datastore.schema}"."{table_names(sandbox_id)[0]}"',))
            return bool(cursor.fetchone()["present"])

    def remove(self, sandbox_id: str) -> None:
        drop_sandbox_tables(self._datastore, sandbox_id)

    def forget(self, sandbox_id: str) -> None:
        self.remove(sandbox_id)  # one transaction: nothing is left of it to go later

