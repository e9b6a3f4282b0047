"""PostgreSQL store layout figures for issue 15: ``python -m tests.bench.bench_pg_store [--quick]``.

A private cluster with the server's durable defaults (fsync on, ``synchronous_commit`` on),
on a unix socket. Real Session ``Output`` events mapped with the project's codec (100 B text;
256 KiB random, which the codec stores raw: compressible output reaches the database already
zstd-compressed, so random is what a blob looks like there). Variants run round-robin per
round (the VM is noisy), each round on fresh tables; figures are medians over rounds.

* inserts: the recorder's own ``insert_events`` (autocommit, unfenced) vs our fenced insert
  (lease check + INSERT in one transaction) with the recorder's composite-array statement or
  with binary arrays, plain (BEGIN, fence, insert, COMMIT: 4 round trips) or pipelined (1);
  the same into one shared table (ids prefixed with the sandbox); the application recorder's
  shared table (what eventsourcing's factory builds: ``LOCK TABLE`` per insert; 100 B only);
  for 256 KiB also ``state`` EXTENDED (PostgreSQL's default: pglz tried on every blob; our
  tables use EXTERNAL) and EXTENDED with lz4.
* group commit: 50 sandboxes x 1 event, one ``insert_batch`` vs 50 fenced inserts.
* tables: create and drop time per sandbox, and catalog + disk cost of an empty pair.
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from psycopg.sql import SQL, Identifier

from session_supervisor.infra.leases import Leases, fence
from session_supervisor.infra.pg_store import (SandboxWrite, connect, create_sandbox_tables,
                                               drop_sandbox_tables, insert, insert_batch, mapper,
                                               recorders)
from tests.pgcluster import PgCluster, find_bin_dir
from tests.unit.sessions import T0, new_session, run

NODE, URL = "bench", "http://bench.test"


def output_events(count: int, size: int, session_id: str) -> list[StoredEvent]:
    session = run(new_session())
    blob = os.urandom(size) if size > 4096 else (b"abcdefghij" * (size // 10 + 1))[:size]
    for i in range(count):
        session.record_output("stdout", blob, T0 + i)
    m = mapper()
    out = [m.to_stored_event(e) for e in session.collect_events()]
    # A fresh id per run (the state bytes do not carry it).
    return [StoredEvent(session_id, e.originator_version, e.topic, e.state) for e in out]


def batches(events, per_txn):
    return [events[i:i + per_txn] for i in range(0, len(events), per_txn)]


class Variant:
    def __init__(self, name, setup, write):
        self.name, self.setup, self.write = name, setup, write
        self.rates, self.p50s = [], []


def insert_variants(ds, size):
    leases = Leases(ds)

    def per_sandbox(tag):
        sb = f"sb-{tag}{os.urandom(6).hex()}"
        create_sandbox_tables(ds, sb)
        return sb, leases.acquire(sb, NODE, URL, 3600)

    def unfenced(ctx):
        rec = recorders(ds, ctx[0]).events
        return lambda batch: rec.insert_events(batch)

    def fenced(**way):
        def make(ctx):
            sb, lease = ctx
            return lambda batch: insert(ds, sb, lease, batch, **way)
        return make

    def shared(ctx):
        sb, _ = ctx  # one table for every sandbox: the sandbox goes into the originator id
        rows = lambda batch: [StoredEvent(f"{sb}/{e.originator_id}", e.originator_version, e.topic, e.state)
                              for e in batch]
        return lambda batch: insert(ds, shared_id, lease_shared, rows(batch))

    def app_recorder(ctx):
        return lambda batch: app_rec.insert_events(batch)

    def storage(kind):
        def make(ctx):
            sb, lease = ctx
            with ds.transaction(commit=True) as cursor:
                cursor.execute(SQL(kind).format(Identifier(recorders(ds, sb).events.events_table_name)))
            return lambda batch: insert(ds, sb, lease, batch)
        return make

    shared_id = f"sb-shared{os.urandom(4).hex()}"
    create_sandbox_tables(ds, shared_id)
    lease_shared = leases.acquire(shared_id, NODE, URL, 3600)
    app_rec = PostgresApplicationRecorder(ds, events_table_name=f"app_events_{os.urandom(4).hex()}")
    app_rec.create_table()
    variants = [
        Variant("recorder.insert_events: unfenced, autocommit", lambda: per_sandbox("u"), unfenced),
        Variant("fenced, recorder's composite-array INSERT", lambda: per_sandbox("r"), fenced(via_recorder=True)),
        Variant("fenced, binary arrays (the default)", lambda: per_sandbox("b"), fenced()),
        Variant("fenced, binary arrays, pipelined", lambda: per_sandbox("p"), fenced(pipeline=True)),
        Variant("fenced, binary arrays, one shared table", lambda: per_sandbox("s"), shared),
    ]
    if size <= 4096:
        # Its pipelined insert hangs (server in ClientRead) on batches of about 512 KiB and more.
        variants.append(Variant("application recorder (shared, LOCK TABLE)", lambda: per_sandbox("a"), app_recorder))
    else:
        # The tables are made with state STORAGE EXTERNAL; PostgreSQL's default tries pglz.
        variants.append(Variant("fenced, binary, state EXTENDED (pglz tried)", lambda: per_sandbox("e"),
                                storage("ALTER TABLE {} ALTER COLUMN state SET STORAGE EXTENDED")))
        variants.append(Variant("fenced, binary, state EXTENDED + lz4", lambda: per_sandbox("z"),
                                storage("ALTER TABLE {0} ALTER COLUMN state SET STORAGE EXTENDED,"
                                        " ALTER COLUMN state SET COMPRESSION lz4")))
    return variants


def bench_inserts(ds, size, per_txn, total, rounds):
    variants = insert_variants(ds, size)
    for r in range(rounds):
        for v in variants:
            ctx = v.setup()
            write = v.write(ctx)
            work = batches(output_events(total, size, f"ses-{r:04x}{os.urandom(4).hex()}"), per_txn)
            lat = []
            start = time.perf_counter()
            for batch in work:
                t = time.perf_counter()
                write(batch)
                lat.append(time.perf_counter() - t)
            elapsed = time.perf_counter() - start
            v.rates.append(sum(map(len, work)) / elapsed)
            v.p50s.append(statistics.median(lat) * 1000)
    return variants


def bench_group_commit(ds, sandboxes, rounds):
    """One writer tick with one new event in each of ``sandboxes`` sandboxes."""
    leases = Leases(ds)
    ids = [f"sb-g{i:04d}{os.urandom(4).hex()}" for i in range(sandboxes)]
    held = {}
    for sb in ids:
        create_sandbox_tables(ds, sb)
        held[sb] = leases.acquire(sb, NODE, URL, 3600)
    shared_id = f"sb-gshared{os.urandom(4).hex()}"
    shared = create_sandbox_tables(ds, shared_id)

    def one_shared_statement(evs):
        # What one shared table allows: every sandbox's rows in one INSERT (ids prefixed).
        rows = [StoredEvent(f"{sb}/{e.originator_id}", e.originator_version, e.topic, e.state)
                for sb in ids for e in evs[sb]]
        with ds.transaction(commit=True) as cursor:
            fence(cursor, list(held.values()))
            cursor.execute(shared.insert_events, ([e.originator_id for e in rows], [e.originator_version for e in rows],
                                                  [e.topic for e in rows], [e.state for e in rows]))

    ways = {
        "one txn per sandbox": lambda evs: [insert(ds, sb, held[sb], evs[sb]) for sb in ids],
        "insert_batch, one txn": lambda evs: insert_batch(ds, [SandboxWrite(held[sb], evs[sb]) for sb in ids]),
        "insert_batch, one txn, pipelined": lambda evs: insert_batch(
            ds, [SandboxWrite(held[sb], evs[sb]) for sb in ids], pipeline=True),
        "one shared table, one INSERT": one_shared_statement,
    }
    rates = {name: [] for name in ways}
    for r in range(rounds):
        for name, way in ways.items():
            evs = {sb: output_events(1, 100, f"ses-{r:04x}{os.urandom(4).hex()}")[-1:] for sb in ids}
            t = time.perf_counter()
            way(evs)
            rates[name].append(sandboxes / (time.perf_counter() - t))
    for sb in ids + [shared_id]:
        drop_sandbox_tables(ds, sb)
    return {name: statistics.median(v) for name, v in rates.items()}


def bench_removal(ds, rows):
    """Removing one sandbox's ``rows``-event journal while another sandbox commits 1-event
    transactions: DROP of its tables vs DELETE of its rows from one shared table (then VACUUM).
    The aggregate recorder takes no LOCK TABLE, so neither should stall the other writer."""
    leases = Leases(ds)
    out = {}
    for layout in ("per-sandbox tables: DROP", "shared table: DELETE", "shared table: VACUUM"):
        if layout == "shared table: VACUUM":
            continue  # measured with the DELETE below
        victim, writer = f"sb-v{os.urandom(4).hex()}", f"sb-w{os.urandom(4).hex()}"
        for sb in (victim, writer):
            create_sandbox_tables(ds, sb)
        lv, lw = leases.acquire(victim, NODE, URL, 3600), leases.acquire(writer, NODE, URL, 3600)
        shared = layout.startswith("shared")
        target = writer if shared else victim  # shared: the victim's rows live in the writer's table
        evs = output_events(rows, 100, "ses-00000001-001")
        prefix = f"{victim}/" if shared else ""
        for chunk in batches(evs, 5000):
            insert(ds, target, lw if shared else lv,
                   [StoredEvent(prefix + e.originator_id, e.originator_version, e.topic, e.state) for e in chunk])
        stop, lat = threading.Event(), []
        def write():
            v = 0
            while not stop.is_set():
                v += 1
                e = evs[0]
                t = time.perf_counter()
                insert(ds, writer, lw, [StoredEvent(f"{writer}/w", v, e.topic, e.state)])
                lat.append(time.perf_counter() - t)
        baseline_thread = threading.Thread(target=write)
        baseline_thread.start()
        time.sleep(0.5)
        n0 = len(lat)
        t = time.perf_counter()
        if shared:
            table = recorders(ds, writer).events.events_table_name
            with ds.transaction(commit=True) as cursor:
                cursor.execute(SQL("DELETE FROM {} WHERE originator_id >= %s AND originator_id < %s").format(
                    Identifier(table)), (f"{victim}/", f"{victim}0"))
            took = time.perf_counter() - t
            n1 = len(lat)
            t = time.perf_counter()
            with ds.get_connection() as conn:  # VACUUM cannot run in a transaction block
                conn.execute(SQL("VACUUM {}").format(Identifier(table)))
            vac = time.perf_counter() - t
        else:
            drop_sandbox_tables(ds, victim)
            took = time.perf_counter() - t
            n1 = len(lat)
        time.sleep(0.3)
        stop.set()
        baseline_thread.join(30)
        before = statistics.median(lat[:n0]) * 1000
        out[layout] = f"{took * 1000:.0f} ms; other writer's commits during it: max {max(lat[n0:n1 + 1]) * 1000:.1f} ms (p50 before {before:.2f} ms)"
        if shared:
            n2 = len(lat)
            out["shared table: VACUUM after it"] = f"{vac * 1000:.0f} ms; other writer's max {max(lat[n1:n2 + 1]) * 1000:.1f} ms"
            drop_sandbox_tables(ds, victim)
        drop_sandbox_tables(ds, writer)
    return out


def cache_memory(ds) -> int:
    """The backend's relation/catalog cache (PostgreSQL never evicts it while the connection
    lives): what touching many sandboxes' tables costs each pooled connection."""
    with ds.transaction() as cursor:
        cursor.execute("SELECT sum(total_bytes) AS b FROM pg_backend_memory_contexts"
                       " WHERE name IN ('CacheMemoryContext') OR parent = 'CacheMemoryContext'")
        return int(cursor.fetchone()["b"])


def bench_tables(ds, ds_url, count):
    def db_size():
        with ds.transaction() as cursor:
            cursor.execute("SELECT pg_database_size(current_database()) AS b,"
                           " (SELECT count(*) FROM pg_class) AS rels")
            row = cursor.fetchone()
            return row["b"], row["rels"]

    ids = [f"sb-t{i:05d}{os.urandom(4).hex()}" for i in range(count)]
    size0, rels0 = db_size()
    create = []
    for sb in ids:
        t = time.perf_counter()
        create_sandbox_tables(ds, sb)
        create.append(time.perf_counter() - t)
    size1, rels1 = db_size()
    lease = Leases(ds)
    # Every pooled connection that writes to a sandbox keeps its tables' descriptors cached.
    ds2 = connect(ds_url, pool_size=1, max_overflow=0)
    before = cache_memory(ds2)
    held = {sb: lease.acquire(sb, NODE, URL, 3600) for sb in ids}
    for sb in ids:
        insert(ds2, sb, held[sb], output_events(1, 100, "ses-00000002-001")[:1])
    cache_per_sandbox = (cache_memory(ds2) - before) / count
    ds2.close()
    # Half of them get a journal first: DROP of a table with rows (1,000 x 100 B) vs empty.
    full = ids[: count // 2]
    for sb in full:
        insert(ds, sb, held[sb], output_events(1000, 100, "ses-00000001-001"))
    drop_full, drop_empty = [], []
    for sb in ids:
        t = time.perf_counter()
        drop_sandbox_tables(ds, sb)
        (drop_full if sb in full else drop_empty).append(time.perf_counter() - t)
    ms = lambda xs: f"p50 {statistics.median(xs) * 1000:.2f} ms, p90 {sorted(xs)[int(len(xs) * .9)] * 1000:.2f} ms"
    return {"create pair": ms(create), "drop pair (empty)": ms(drop_empty),
            "drop pair (1,000 events)": ms(drop_full),
            "relations per sandbox": (rels1 - rels0) / count,
            "bytes per empty sandbox": (size1 - size0) / count,
            "backend cache bytes per sandbox written": cache_per_sandbox}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
    parser.add_argument("--only", default="inserts,group,removal,tables", help="comma-separated parts")
    parser.add_argument("--sizes", default="100,262144", help="event sizes for the insert part")
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    scale = 10 if args.quick else 1
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("no PostgreSQL server binaries (apt-get install postgresql)")
    with PgCluster(bin_dir, durable=True) as cluster:
        ds = connect(cluster.url())
        with ds.transaction() as cursor:
            cursor.execute("SELECT current_setting('synchronous_commit') AS sc, current_setting('fsync') AS f,"
                           " version() AS v")
            row = cursor.fetchone()
        print(f"{row['v'].split(',')[0]}; fsync={row['f']} synchronous_commit={row['sc']}; unix socket")
        Leases(ds).create_table()
        only = set(args.only.split(","))
        for size, per_txn, total in () if "inserts" not in only else ((100, 1, 2000 // scale), (100, 100, 20000 // scale),
                                     (256 * 1024, 1, 200 // scale), (256 * 1024, 100, 400 // scale)):
            if str(size) not in args.sizes.split(","):
                continue
            print(f"\n## {size} B events, {per_txn} per transaction, {total} events per run, {rounds} rounds")
            for v in bench_inserts(ds, size, per_txn, total, rounds):
                mib = statistics.median(v.rates) * size / 2**20
                print(f"  {v.name:55s} {statistics.median(v.rates):9.0f} ev/s  ({mib:7.1f} MiB/s)"
                      f"  txn p50 {statistics.median(v.p50s):7.2f} ms")
        if "group" in only:
            print("\n## group commit: one writer tick, 50 sandboxes x 1 event (100 B)")
            for name, rate in bench_group_commit(ds, 50, 12 if not args.quick else 2).items():
                print(f"  {name:55s} {rate:9.0f} ev/s  (tick {50 / rate * 1000:6.1f} ms)")
        if "removal" in only:
            print("\n## removing a sandbox with 100,000 events (100 B) while another commits")
            for key, value in bench_removal(ds, 100_000 // scale).items():
                print(f"  {key}: {value}")
        if "tables" in only:
            print("\n## tables")
            for key, value in bench_tables(ds, cluster.url(), 200 // scale * 2).items():
                print(f"  {key}: {value}")
        ds.close()


if __name__ == "__main__":
    main()
