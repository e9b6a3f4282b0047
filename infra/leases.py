"""Which node runs a sandbox: one lease row per sandbox in PostgreSQL, fenced by an epoch.

A row holds the owner node, the URL other nodes proxy to, an expiry and an ``epoch`` that
goes up by one on every acquisition. The owner renews the row while the runtime runs; when the
owner dies the row expires and any node may take the sandbox over, which bumps the epoch.

Expiry is a *liveness* signal only; the epoch is the *safety* token. Every commit of the owner
runs :func:`fence` first, in the same transaction: it re-reads the row with ``FOR SHARE`` and
refuses unless it still names (our node, our epoch). The row lock matters: a takeover is an
UPDATE of that row, which waits for our transaction to end, so no takeover can commit between
our check and our inserts, and the new owner (which reads the journal only after its acquire
committed) sees everything we committed. ``FOR SHARE`` and not ``FOR KEY SHARE``: the takeover
changes no key column, so its ``FOR NO KEY UPDATE`` lock would not conflict with a key-share lock.
A fenced writer whose lease merely *expired* (nobody took over yet) may still commit: its epoch
is still the newest, so nothing is lost or duplicated; a renew afterwards succeeds as well.

Every time comes from the database clock (``clock_timestamp()``), never from a node's clock:
nodes only measure durations (renew every lease/3 on a monotonic clock). Statements run with the
datastore's session ``lock_timeout`` (set by ``pg_store.connect``), so a wait behind a stuck
writer is bounded.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Sequence

from psycopg import Cursor
from psycopg.rows import dict_row
from psycopg.sql import SQL, Identifier

TABLE = "sandbox_leases"


class LeaseLostError(Exception):
    """The lease is no longer ours: another node took the sandbox over (a higher epoch), or it
    was released or deleted. The transaction that saw this must not commit."""

    def __init__(self, lost: dict[str, str]) -> None:
        self.lost = lost  # sandbox id -> why
        super().__init__("; ".join(f"lease of {sid} lost: {why}" for sid, why in sorted(lost.items())))


@dataclass(frozen=True)
class Lease:
    """What a holder keeps: the fencing token is (node_id, epoch)."""
    sandbox_id: str
    node_id: str
    url: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True)
class Owner:
    """A row as another node sees it (for proxying and for sweeps)."""
    sandbox_id: str
    node_id: str | None  # None: released (paused), free to acquire
    url: str | None
    epoch: int
    expires_at: datetime | None
    expired: bool  # judged by the database clock at read time


DDL_LOCK = 0x5E55_10D0  # advisory lock key: the nodes' start-up DDL, one node at a time


class Leases:
    def __init__(self, datastore, table: str = TABLE) -> None:
        self.datastore = datastore  # eventsourcing PostgresDatastore (pg_store.connect)
        self.table = table
        self._t = Identifier(datastore.schema, table)

    def create_table(self) -> None:
        with self.datastore.transaction(commit=True) as cursor:
            # Nodes started together would race: two CREATE TABLE IF NOT EXISTS at once can
            # both miss the table and one fails on the catalog's unique index (seen: the second
            # node of the README walkthrough exited at start). One at a time, under a lock that
            # ends with the transaction.
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
            cursor.execute(SQL(
                "CREATE TABLE IF NOT EXISTS {t} ("
                " sandbox_id text PRIMARY KEY,"
                " owner_node text,"
                " owner_url text,"
                " epoch bigint NOT NULL,"
                " expires_at timestamptz,"
                " acquired_at timestamptz)").format(t=self._t))
            # The sweep's question ("whose lease ran out?") without a scan of every sandbox.
            cursor.execute(SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (expires_at) "
                               "WHERE owner_node IS NOT NULL").format(
                i=Identifier(self.table + "_expiry_idx"), t=self._t))

    # ---- the holder's side -------------------------------------------------------------------
    def acquire(self, sandbox_id: str, node_id: str, url: str, seconds: float,
                *, reclaim_own: bool = False) -> Lease | None:
        """Take a free, released or expired lease (epoch + 1); None while another node holds an
        unexpired one. ``reclaim_own``: also take it over from our own node id (a restarted
        node recovering its sandboxes without waiting for expiry; the epoch still goes up, so a
        leftover process with the same node id is fenced off)."""
        own = SQL(" OR l.owner_node = EXCLUDED.owner_node") if reclaim_own else SQL("")
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(SQL(
                "INSERT INTO {t} AS l (sandbox_id, owner_node, owner_url, epoch, expires_at, acquired_at)"
                " VALUES (%s, %s, %s, 1, clock_timestamp() + make_interval(secs => %s), clock_timestamp())"
                " ON CONFLICT (sandbox_id) DO UPDATE SET owner_node = EXCLUDED.owner_node,"
                " owner_url = EXCLUDED.owner_url, epoch = l.epoch + 1,"
                " expires_at = EXCLUDED.expires_at, acquired_at = EXCLUDED.acquired_at"
                " WHERE l.owner_node IS NULL OR l.expires_at <= clock_timestamp(){own}"
                " RETURNING epoch, expires_at").format(t=self._t, own=own),
                (sandbox_id, node_id, url, float(seconds)))
            row = cursor.fetchone()
        if row is None:
            return None
        return Lease(sandbox_id, node_id, url, row["epoch"], row["expires_at"])

    def renew(self, lease: Lease, seconds: float) -> Lease | None:
        """Push the expiry out; None when the lease is lost (taken over, released, deleted).
        An expired lease nobody took yet renews fine: its epoch is still the newest."""
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(SQL(
                "UPDATE {t} SET expires_at = clock_timestamp() + make_interval(secs => %s)"
                " WHERE sandbox_id = %s AND owner_node = %s AND epoch = %s RETURNING expires_at"
            ).format(t=self._t), (float(seconds), lease.sandbox_id, lease.node_id, lease.epoch))
            row = cursor.fetchone()
        if row is None:
            return None
        return Lease(lease.sandbox_id, lease.node_id, lease.url, lease.epoch, row["expires_at"])

    def release(self, lease: Lease) -> bool:
        """Give the sandbox up (pause): the row stays with its epoch, so the next acquire goes
        one higher. False when it was not ours any more."""
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(SQL(
                "UPDATE {t} SET owner_node = NULL, owner_url = NULL, expires_at = NULL"
                " WHERE sandbox_id = %s AND owner_node = %s AND epoch = %s").format(t=self._t),
                (lease.sandbox_id, lease.node_id, lease.epoch))
            return cursor.rowcount == 1

    def delete(self, lease: Lease) -> bool:
        """Remove the row with the sandbox (fenced: only the holder deletes). A new row starts
        at epoch 1 again: safe because sandbox ids are random and never come back."""
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(SQL("DELETE FROM {t} WHERE sandbox_id = %s AND owner_node = %s AND epoch = %s")
                           .format(t=self._t), (lease.sandbox_id, lease.node_id, lease.epoch))
            return cursor.rowcount == 1

    # ---- everyone's side ---------------------------------------------------------------------
    _OWNER = ("SELECT sandbox_id, owner_node, owner_url, epoch, expires_at,"
              " coalesce(expires_at <= clock_timestamp(), false) AS expired FROM {t}")

    def owner(self, sandbox_id: str) -> Owner | None:
        """Who runs the sandbox (None: no row, never acquired or deleted)."""
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute(SQL(self._OWNER + " WHERE sandbox_id = %s").format(t=self._t), (sandbox_id,))
            row = cursor.fetchone()
        return _owner(row) if row else None

    def expired(self, limit: int = 100) -> list[Owner]:
        """Held leases whose owner stopped renewing, oldest first (for a takeover sweep)."""
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute(SQL(self._OWNER + " WHERE owner_node IS NOT NULL"
                               " AND expires_at <= clock_timestamp() ORDER BY expires_at LIMIT %s")
                           .format(t=self._t), (limit,))
            return [_owner(row) for row in cursor.fetchall()]

    def held_by(self, node_id: str) -> list[Owner]:
        """The rows naming a node (a restarted node's sandboxes to recover or give up)."""
        with self.datastore.transaction(commit=False) as cursor:
            cursor.execute(SQL(self._OWNER + " WHERE owner_node = %s ORDER BY sandbox_id FOR SHARE")
                           .format(t=self._t), (node_id,))
            return [_owner(row) for row in cursor.fetchall()]


def _owner(row: dict) -> Owner:
    return Owner(row["sandbox_id"], row["owner_node"], row["owner_url"], row["epoch"],
                 row["expires_at"], row["expired"])


def fence(cursor: Cursor, leases: Iterable[Lease], *, schema: str = "public", table: str = TABLE) -> None:
    """Inside an open transaction: lock each lease's row ``FOR SHARE`` and raise
    :class:`LeaseLostError` (naming every lost one) unless each still holds (node, epoch).

    Rows are locked in sandbox-id order in one statement (one round trip for a whole group
    commit). Share locks never conflict with each other, so fenced writers do not wait on one
    another; only a takeover, renew or release of the same row waits for the commit.
    """
    leases = list(leases)
    if leases:
        judge(send_fence(cursor, leases, schema=schema, table=table).fetchall(), leases)


def send_fence(cursor: Cursor, leases: Sequence[Lease], *, schema: str = "public",
               table: str = TABLE) -> Cursor:
    """The first half of :func:`fence`: the locking read, on a cursor of its own. In pipeline
    mode it is only queued; its rows arrive at the next sync (``fetchall``)."""
    rows = cursor.connection.cursor(row_factory=dict_row)
    rows.execute(SQL("SELECT sandbox_id, owner_node, epoch FROM {t} WHERE sandbox_id = ANY(%s)"
                     " ORDER BY sandbox_id FOR SHARE").format(t=Identifier(schema, table)),
                 (sorted({lease.sandbox_id for lease in leases}),))
    return rows


def judge(rows: list[dict], leases: Sequence[Lease]) -> None:
    """The second half of :func:`fence`: raise unless every lease matches its row."""
    found = {row["sandbox_id"]: row for row in rows}
    lost = {}
    for lease in leases:
        row = found.get(lease.sandbox_id)
        if row is None:
            lost[lease.sandbox_id] = "no lease row"
        elif row["owner_node"] is None:
            lost[lease.sandbox_id] = f"released (epoch {row['epoch']})"
        elif (row["owner_node"], row["epoch"]) != (lease.node_id, lease.epoch):
            lost[lease.sandbox_id] = (f"held by {row['owner_node']} at epoch {row['epoch']}, "
                                      f"not {lease.node_id} at epoch {lease.epoch}")
    if lost:
        raise LeaseLostError(lost)
