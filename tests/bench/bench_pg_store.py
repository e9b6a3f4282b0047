"""PostgreSQL store layout figures for issue 15: ``python -m tests.bench.bench_pg_store [--quick]``.

A private cluster with the server's durable defaults (fsync on, ``synchronous_commit`` on),
on a unix socket. Real Session ``Output`` events mapped with the project's codec (100 B text;
256 KiB random, which the codec stores raw: compressible output reaches the database already
zstd-compressed, so random is what a blob looks like there). Variants run round-robin per
round (the VM is noisy), each round on fresh tables; figures are medians over rounds.

* inserts: the recorder's own ``insert_events`` (autocommit, unfenced) vs our fenced insert,
  plain (5 round trips) and pipelined (1), into a per-sandbox table; the same fenced insert into
  one shared table (ids prefixed with the sandbox); the application recorder's shared table
  (what eventsourcing's factory builds: ``LOCK TABLE`` per insert); for 256 KiB also the
  per-sandbox table with ``state`` stored EXTERNAL (no pglz attempt on blobs).
* group commit: 50 sandboxes x 1 event, one ``insert_batch`` vs 50 fenced inserts.
* tables: create and drop time per sandbox, and catalog + disk cost of an empty pair.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from session_supervisor.infra.leases import Leases
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

    def lib(ctx):
        sb, _ = ctx
        rec = recorders(ds, sb).events
        return lambda batch: rec.insert_events(batch)

    def fenced(pipeline):
        def make(ctx):
            sb, lease = ctx
            return lambda batch: insert(ds, sb, lease, batch, pipeline=pipeline)
        return make

    def shared(ctx):
        sb, lease = ctx
        # One table for every sandbox: the sandbox goes into the originator id.
        rows = lambda batch: [StoredEvent(f"{sb}/{e.originator_id}", e.originator_version, e.topic, e.state)
                              for e in batch]
        return lambda batch: insert(ds, shared_id, lease_shared, rows(batch))

    def app_recorder(ctx):
        return lambda batch: app_rec.insert_events(batch)

    def external(ctx):
        sb, lease = ctx
        from psycopg.sql import SQL, Identifier
        with ds.transaction(commit=True) as cursor:
            cursor.execute(SQL("ALTER TABLE {} ALTER COLUMN state SET STORAGE EXTERNAL").format(
                Identifier(recorders(ds, sb).events.events_table_name)))
        return lambda batch: insert(ds, sb, lease, batch)

    shared_id = f"sb-shared{os.urandom(4).hex()}"
    create_sandbox_tables(ds, shared_id)
    lease_shared = leases.acquire(shared_id, NODE, URL, 3600)
    app_rec = PostgresApplicationRecorder(ds, events_table_name=f"app_events_{os.urandom(4).hex()}")
    app_rec.create_table()
    variants = [
        Variant("recorder.insert_events (unfenced, per-sandbox table)", lambda: per_sandbox("l"), lib),
        Variant("fenced, plain (per-sandbox table)", lambda: per_sandbox("p"), fenced(False)),
        Variant("fenced, pipelined (per-sandbox table)", lambda: per_sandbox("f"), fenced(True)),
        Variant("fenced, pipelined, one shared table", lambda: per_sandbox("s"), shared),
        Variant("application recorder (shared table, LOCK TABLE)", lambda: per_sandbox("a"), app_recorder),
    ]
    if size > 4096:
        variants.append(Variant("fenced, pipelined, state STORAGE EXTERNAL", lambda: per_sandbox("e"), external))
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
    leases = Leases(ds)
    ids = [f"sb-g{i:04d}{os.urandom(4).hex()}" for i in range(sandboxes)]
    held = {}
    for sb in ids:
        create_sandbox_tables(ds, sb)
        held[sb] = leases.acquire(sb, NODE, URL, 3600)
    one, each = [], []
    version = 10
    for r in range(rounds):
        evs = {sb: output_events(1, 100, f"ses-{r:04x}{os.urandom(4).hex()}")[-1:] for sb in ids}
        t = time.perf_counter()
        insert_batch(ds, [SandboxWrite(held[sb], evs[sb]) for sb in ids])
        one.append(sandboxes / (time.perf_counter() - t))
        evs = {sb: output_events(1, 100, f"ses-{r:04x}{os.urandom(4).hex()}")[-1:] for sb in ids}
        t = time.perf_counter()
        for sb in ids:
            insert(ds, sb, held[sb], evs[sb])
        each.append(sandboxes / (time.perf_counter() - t))
        version += 1
    for sb in ids:
        drop_sandbox_tables(ds, sb)
    return statistics.median(one), statistics.median(each)


def bench_tables(ds, count):
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
    # Half of them get a journal first: DROP of a table with rows (1,000 x 100 B) vs empty.
    lease = Leases(ds)
    full = ids[: count // 2]
    for sb in full:
        insert(ds, sb, lease.acquire(sb, NODE, URL, 3600), output_events(1000, 100, "ses-00000001-001"))
    drop_full, drop_empty = [], []
    for sb in ids:
        t = time.perf_counter()
        drop_sandbox_tables(ds, sb)
        (drop_full if sb in full else drop_empty).append(time.perf_counter() - t)
    ms = lambda xs: f"p50 {statistics.median(xs) * 1000:.2f} ms, p90 {sorted(xs)[int(len(xs) * .9)] * 1000:.2f} ms"
    return {"create pair": ms(create), "drop pair (empty)": ms(drop_empty),
            "drop pair (1,000 events)": ms(drop_full),
            "relations per sandbox": (rels1 - rels0) / count,
            "bytes per empty sandbox": (size1 - size0) / count}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, one round")
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
        for size, per_txn, total in ((100, 1, 2000 // scale), (100, 100, 20000 // scale),
                                     (256 * 1024, 1, 200 // scale), (256 * 1024, 100, 400 // scale)):
            print(f"\n## {size} B events, {per_txn} per transaction, {total} events per run, {rounds} rounds")
            for v in bench_inserts(ds, size, per_txn, total, rounds):
                mib = statistics.median(v.rates) * size / 2**20
                print(f"  {v.name:55s} {statistics.median(v.rates):9.0f} ev/s  ({mib:7.1f} MiB/s)"
                      f"  txn p50 {statistics.median(v.p50s):7.2f} ms")
        one, each = bench_group_commit(ds, 50, 5 if not args.quick else 1)
        print(f"\n## group commit, 50 sandboxes x 1 event: one insert_batch {one:.0f} ev/s, "
              f"50 fenced inserts {each:.0f} ev/s (x{one / each:.1f})")
        print("\n## tables")
        for key, value in bench_tables(ds, 200 // scale * 2).items():
            print(f"  {key}: {value}")
        ds.close()


if __name__ == "__main__":
    main()
