"""Groundwork for the PostgreSQL journal store: one pool per node, two tables per sandbox.

Figures: ``python -m tests.bench.bench_pg_store`` (PostgreSQL 15, unix socket, fsync and
``synchronous_commit`` on, 2 busy vCPUs: read ratios, not absolutes).

* **One ``PostgresDatastore`` per node**: one psycopg pool (a few connections) for every sandbox
  the node runs; thousands of sandboxes must not mean thousands of pools or connections.
* **Two tables per sandbox**, ``<id>_events`` and ``<id>_snapshots``, created by eventsourcing's
  ``PostgresAggregateRecorder(events_table_name=...)``, whose ``select_events`` reads them. That
  recorder takes no ``LOCK TABLE`` and has no notification ids (the application recorder locks
  its table on every insert; no global order is needed here). Costs: 6-20 ms of DDL at claim,
  8 relations and ~50 KB per empty sandbox, ~2.5-10 KB of never-evicted catalog cache per sandbox
  in each connection that wrote to it (recycled with the pool's ``max_lifetime``). Gains: removing
  a 100k-event sandbox is a 12-14 ms ``DROP`` (a shared table: 88-122 ms of DELETE, then VACUUM,
  then bloat), and a sandbox's retention DELETE and VACUUM touch its own small table only.
  A shared table wins one thing: a writer tick over 50 sandboxes is one INSERT (2-3 ms) instead
  of 50 (9-13 ms in one transaction, 6-7 ms pipelined; 38-45 ms as 50 transactions, today's
  SQLite shape). Single-sandbox commits cost the same in both layouts.
* **Inserts** go through four binary arrays (:func:`_binary_insert`), not the recorder's
  ``_insert_stored_events`` (which works inside our transaction too, ``via_recorder=True``):
  its one array of a composite type travels as text, 2.6-3x slower at 100 x 100 B and 8-10x at
  256 KiB (6-9 MiB/s against 54-74). Event blobs are stored EXTERNAL: PostgreSQL's pglz, tried on
  every zstd'd or random blob, cost 3.3x.
* **Fenced writes**: :func:`insert_batch` share-locks and checks every sandbox's lease
  (``leases.fence``) and inserts its events and snapshots in the same transaction (1 x 100 B:
  ~0.7-0.9 ms, 1,000-1,300 commits/s, against 0.36 ms unfenced autocommit). ``pipeline=True``
  makes it one round trip; it pays only for multi-sandbox batches, and eventsourcing's own
  pipelined insert (application recorder) was seen to hang for good on ~0.5 MiB+ batches with
  psycopg 3.3.9, so it is off by default.
* Snapshots are upserts: pause and retention may snapshot a session at the same version (the
  SQLite store uses ``INSERT OR REPLACE`` for the same reason).

Table names: a sandbox id is ``[a-z0-9][a-z0-9-]{0,62}``; PostgreSQL keeps 63 bytes of a name
and silently cuts longer ones (two long ids could then share a table). Ids of up to 53 characters
keep a readable name (quoted: ids have ``-``); longer ones get ``sbh_`` + a 128-bit hash, a
namespace no id can reach (ids have no ``_``).
"""
from __future__ import annotations

import contextlib
import hashlib
import threading
import weakref
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import psycopg.errors
from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresDatastore
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.sql import SQL, Composed, Identifier

from session_supervisor.domain.model.ids import is_sandbox_id

from .codec import OrjsonTranscoder
from .leases import TABLE as LEASES_TABLE, Lease, fence, judge, send_fence

MAX_IDENTIFIER = 63  # NAMEDATALEN - 1
SUFFIXES = ("_events", "_snapshots")
ID_TYPE = "text"  # session ids are ``ses-…`` strings, not UUIDs

# The datastore only knows these five; anything else in the URL (sslmode, options,
# application_name, ...) is handed to libpq as it is.
_DATASTORE_KEYS = ("dbname", "host", "port", "user", "password")


def connect(database_url: str, *, pool_size: int = 2, max_overflow: int = 6, connect_timeout: float = 10.0,
            lock_timeout_s: float = 5.0, idle_in_transaction_timeout_s: float = 10.0,
            schema: str = "") -> PostgresDatastore:
    """One node's datastore from a libpq URL or key=value string, e.g.
    ``postgresql://user:pw@db:5432/sessiond`` or ``postgresql://user@/sessiond?host=/run/pg``
    (a unix socket directory); the pool opens on first use. ``lock_timeout`` bounds every wait
    for a row or table lock (a fenced write behind a takeover, a takeover behind a stuck writer);
    ``idle_in_transaction_session_timeout`` makes the server end a transaction that a stalled
    node left open, so its ``FOR SHARE`` lock cannot block a takeover for ever."""
    params = conninfo_to_dict(database_url)
    base = {key: str(params.pop(key, "") or "") for key in _DATASTORE_KEYS}
    datastore = PostgresDatastore(
        base["dbname"], base["host"], base["port"] or "5432", base["user"], base["password"],
        connect_timeout=connect_timeout, idle_in_transaction_session_timeout=idle_in_transaction_timeout_s,
        pool_size=pool_size, max_overflow=max_overflow, originator_id_type=ID_TYPE, schema=schema)
    # Empty values would reach libpq as `key=''`, not as "use the default" (the user, the
    # socket dir, ...): drop them. The pool is not open yet, so this is what it will use.
    options = f"{params.pop('options', '')} -c lock_timeout={int(lock_timeout_s * 1000)}".strip()
    kwargs = {k: v for k, v in base.items() if v} | params | {"options": options, "row_factory": dict_row}
    kwargs.setdefault("application_name", "sessiond")
    datastore.pool.kwargs = kwargs
    _ensure_type(datastore)
    return datastore


def _ensure_type(datastore: PostgresDatastore) -> None:
    """The recorders' composite type, once per schema. Two nodes starting together may both try:
    the loser gets DuplicateObject or (same race, one step earlier) a unique violation on
    pg_type; the library itself suppresses only the first."""
    probe = PostgresAggregateRecorder(datastore, events_table_name="probe")
    for statement in probe.sql_create_statements:
        if "CREATE TYPE" in statement.as_string():
            with datastore.transaction(commit=True) as cursor, contextlib.suppress(
                    psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
                cursor.execute(statement, prepare=False)
    datastore.register_type_adapters()


def table_names(sandbox_id: str) -> tuple[str, str]:
    """``(events, snapshots)`` table names of a sandbox (see the module docstring)."""
    if not is_sandbox_id(sandbox_id):
        raise ValueError(f"not a sandbox id: {sandbox_id!r}")
    stem = sandbox_id
    if len(stem) + max(map(len, SUFFIXES)) > MAX_IDENTIFIER:
        stem = "sbh_" + hashlib.blake2b(sandbox_id.encode(), digest_size=16).hexdigest()
    return stem + SUFFIXES[0], stem + SUFFIXES[1]


@dataclass
class SandboxRecorders:
    events: PostgresAggregateRecorder
    snapshots: PostgresAggregateRecorder
    insert_events: Composed  # the binary-array inserts (see _binary_insert)
    insert_snapshots: Composed


# Making a pair costs ~140 µs (SQL composition), a third of a one-event commit: keep them, per
# datastore (weakly: a closed datastore takes its entries with it).
_recorders: "weakref.WeakKeyDictionary[PostgresDatastore, dict[str, SandboxRecorders]]" = \
    weakref.WeakKeyDictionary()
_recorders_lock = threading.Lock()


def recorders(datastore: PostgresDatastore, sandbox_id: str) -> SandboxRecorders:
    """The two recorders of a sandbox: ``events.select_events(...)`` and the like read with them."""
    with _recorders_lock:
        cached = _recorders.setdefault(datastore, {})
        pair = cached.get(sandbox_id)
    if pair is not None:
        return pair
    events_table, snapshots_table = table_names(sandbox_id)
    events = PostgresAggregateRecorder(datastore, events_table_name=events_table)
    snapshots = PostgresAggregateRecorder(datastore, events_table_name=snapshots_table)
    snapshots.insert_events_statement += _UPSERT
    pair = SandboxRecorders(events, snapshots, _binary_insert(datastore.schema, events_table),
                            _binary_insert(datastore.schema, snapshots_table) + _UPSERT)
    with _recorders_lock:
        cached[sandbox_id] = pair
    return pair


_UPSERT = SQL(" ON CONFLICT (originator_id, originator_version) DO UPDATE"
              " SET topic = EXCLUDED.topic, state = EXCLUDED.state")


def _binary_insert(schema: str, table: str) -> Composed:
    """The recorder's INSERT, with the rows sent as four arrays in binary format instead of one
    array of the composite ``stored_event_text`` (which psycopg sends as text: bytea as escaped
    hex inside a composite inside an array). Same table, same columns; measured 1.2x faster for
    1 x 100 B events, 2.6x for 100 x 100 B, 9x for 256 KiB blobs."""
    return SQL("INSERT INTO {} (originator_id, originator_version, topic, state)"
               " SELECT * FROM unnest(%b::text[], %b::int8[], %b::text[], %b::bytea[])").format(
        Identifier(schema, table))


def create_sandbox_tables(datastore: PostgresDatastore, sandbox_id: str) -> SandboxRecorders:
    """Both tables in one transaction (idempotent). Not ``recorder.create_table()``: that runs
    CREATE TYPE in a transaction of its own each time, which fails (suppressed) after the first."""
    pair = recorders(datastore, sandbox_id)
    events_table, snapshots_table = table_names(sandbox_id)
    with datastore.transaction(commit=True) as cursor:
        pair.events._create_table(cursor)
        pair.snapshots._create_table(cursor)
        # EXTERNAL: no pglz attempt on event blobs. The codec already zstd-compresses what
        # compresses; pglz failing on the rest cost 3x at 256 KiB (33 vs 100 MiB/s measured).
        # The recorder creates its tables with autovacuum_vacuum_threshold = 100,000,000 (an
        # append-only log); retention deletes and snapshot upserts need vacuuming like any table.
        cursor.execute(SQL("ALTER TABLE {} ALTER COLUMN state SET STORAGE EXTERNAL,"
                           " SET (autovacuum_vacuum_threshold = 10000, autovacuum_vacuum_scale_factor = 0.2)")
                       .format(Identifier(datastore.schema, events_table)))
        cursor.execute(SQL("ALTER TABLE {} SET (autovacuum_vacuum_threshold = 100,"
                           " autovacuum_vacuum_scale_factor = 0.2)").format(Identifier(datastore.schema, snapshots_table)))
    return pair


def drop_sandbox_tables(datastore: PostgresDatastore, sandbox_id: str) -> None:
    """A deleted sandbox's journal goes with one statement (idempotent)."""
    events_table, snapshots_table = table_names(sandbox_id)
    schema = datastore.schema
    with datastore.transaction(commit=True) as cursor:
        cursor.execute(SQL("DROP TABLE IF EXISTS {}, {}").format(
            Identifier(schema, events_table), Identifier(schema, snapshots_table)))
    with _recorders_lock:
        _recorders.get(datastore, {}).pop(sandbox_id, None)


def mapper() -> Mapper:
    """Domain events <-> stored events with the project's codec (no compressor: the codec
    compresses large blobs itself)."""
    return Mapper(transcoder=OrjsonTranscoder())


@dataclass
class SandboxWrite:
    """One sandbox's share of a commit: its lease (the fencing token names the sandbox) and
    its rows."""
    lease: Lease
    events: Sequence[StoredEvent] = ()
    snapshots: Sequence[StoredEvent] = field(default_factory=tuple)


def insert_batch(datastore: PostgresDatastore, writes: Iterable[SandboxWrite], *,
                 pipeline: bool = False, via_recorder: bool = False, leases_table: str = LEASES_TABLE) -> None:
    """One transaction for several sandboxes (the writer's group commit): fence every lease,
    insert every event and snapshot, commit. Raises ``LeaseLostError`` naming every sandbox
    whose lease is gone; nothing of the batch is then committed, and the caller retries
    without those sandboxes (they belong to another node now)."""
    writes = [w for w in writes if w.events or w.snapshots]
    if not writes:
        return
    leases = [w.lease for w in writes]
    with datastore.get_connection() as conn:
        if not pipeline:
            with conn.transaction():
                cursor = conn.cursor()
                fence(cursor, leases, schema=datastore.schema, table=leases_table)
                _insert_rows(datastore, cursor, writes, via_recorder)
            return
        # Pipelined, the whole transaction is one round trip: the fence's rows are read after
        # the inserts were queued but before COMMIT is sent. The inserts ran under its row locks
        # and nothing commits unless it passes, so the check is as strict as fencing first.
        with conn.pipeline(), conn.transaction():
            cursor = conn.cursor()
            fenced = send_fence(cursor, leases, schema=datastore.schema, table=leases_table)
            _insert_rows(datastore, cursor, writes, via_recorder)
            try:
                rows = fenced.fetchall()  # the sync: errors of the inserts surface here
            except psycopg.Error as exc:
                # A stale writer's inserts often collide with the new owner's versions: report
                # the lost lease, the cause, rather than the duplicate key it led to.
                with contextlib.suppress(psycopg.Error):
                    judge(fenced.fetchall(), leases)
                raise exc
            judge(rows, leases)


def _insert_rows(datastore, cursor, writes: Sequence[SandboxWrite], via_recorder: bool) -> None:
    for write in writes:
        pair = recorders(datastore, write.lease.sandbox_id)
        for rows, recorder, statement in ((write.events, pair.events, pair.insert_events),
                                          (write.snapshots, pair.snapshots, pair.insert_snapshots)):
            if not rows:
                continue
            if via_recorder:
                recorder._insert_stored_events(cursor, rows)
            else:
                cursor.execute(statement, ([e.originator_id for e in rows], [e.originator_version for e in rows],
                                           [e.topic for e in rows], [e.state for e in rows]))


def insert(datastore: PostgresDatastore, sandbox_id: str, lease: Lease,
           stored_events: Sequence[StoredEvent], stored_snapshots: Sequence[StoredEvent] = (),
           *, pipeline: bool = False, via_recorder: bool = False) -> None:
    """One sandbox's fenced commit (see :func:`insert_batch`)."""
    if lease.sandbox_id != sandbox_id:
        raise ValueError(f"lease of {lease.sandbox_id} cannot fence a write to {sandbox_id}")
    insert_batch(datastore, [SandboxWrite(lease, stored_events, stored_snapshots)],
                 pipeline=pipeline, via_recorder=via_recorder)
