"""The PostgreSQL store groundwork: per-sandbox tables through eventsourcing's recorder, fenced inserts."""
from __future__ import annotations

import os

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from eventsourcing.persistence import IntegrityError

from session_supervisor.domain.model import events as ev
from session_supervisor.infra.leases import Leases, LeaseLostError
from session_supervisor.infra.pg_store import (SandboxWrite, connect, create_sandbox_tables,
                                               drop_sandbox_tables, insert, insert_batch, mapper,
                                               recorders, table_names)
from tests.pg.test_leases import wait_expired
from tests.unit.sessions import T0, new_session, run

SB = "sb-0123456789abcdef"


@pytest.fixture
def store(pg_url):
    datastore = connect(pg_url)
    Leases(datastore).create_table()
    yield datastore
    datastore.close()


def session_events(count: int = 3):
    """A real Session's stored events: created, attempt started and ready, then output."""
    session = run(new_session())
    for i in range(count):
        session.record_output("stdout", b"x" * 100 + str(i).encode(), T0 + i)
    m = mapper()
    return session, [m.to_stored_event(e) for e in session.collect_events()]


def tables(datastore) -> list[str]:
    with datastore.transaction() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
        return [row["tablename"] for row in cursor.fetchall()]


def test_connect_takes_a_url_with_a_socket_directory_or_a_key_value_string(pg_cluster, pg_url):
    dbname = conninfo_to_dict(pg_url)["dbname"]
    for dsn in (pg_url, f"host={pg_cluster.socket_dir} dbname={dbname} user=postgres",
                f"postgresql://postgres@{pg_cluster.socket_dir.replace('/', '%2F')}/{dbname}"):
        datastore = connect(dsn, lock_timeout_s=1.5)
        try:
            with datastore.transaction() as cursor:
                cursor.execute("SELECT current_database() AS db, current_setting('lock_timeout') AS lt,"
                               " current_setting('application_name') AS app")
                assert cursor.fetchone() == {"db": dbname, "lt": "1500ms", "app": "sessiond"}
        finally:
            datastore.close()


def test_table_names_are_readable_for_short_ids_and_hashed_below_the_identifier_limit_for_long_ones():
    assert table_names(SB) == (SB + "_events", SB + "_snapshots")
    assert table_names("sb-" + "a" * 32) == ("sb-" + "a" * 32 + "_events", "sb-" + "a" * 32 + "_snapshots")
    long_a, long_b = "sb-" + "a" * 60, "sb-" + "a" * 59 + "b"
    names = table_names(long_a) + table_names(long_b)
    assert all(len(n) <= 63 and n.startswith("sbh_") for n in names)
    assert len(set(names)) == 4  # PostgreSQL would have cut both to one name
    with pytest.raises(ValueError):
        table_names('sb"; DROP TABLE x; --')


def test_a_sandboxs_tables_are_made_once_dropped_with_one_call_and_a_long_id_gets_working_tables(store):
    long_id = "sb-" + "f" * 60
    # The longest readable names (63 bytes): their primary-key index names get cut and
    # PostgreSQL makes them unique itself.
    edge_a, edge_b = "sb-" + "e" * 49 + "a", "sb-" + "e" * 49 + "b"
    for sandbox_id in (SB, SB, long_id, edge_a, edge_b):
        create_sandbox_tables(store, sandbox_id)
    assert max(map(len, table_names(edge_a))) == 63
    assert tables(store) == sorted([*table_names(SB), *table_names(long_id), *table_names(edge_a),
                                    *table_names(edge_b), "sandbox_leases"])
    for sandbox_id in (SB, SB, edge_a, edge_b):
        drop_sandbox_tables(store, sandbox_id)
    assert tables(store) == sorted([*table_names(long_id), "sandbox_leases"])


WAYS = pytest.mark.parametrize("way", [{}, {"pipeline": True}, {"via_recorder": True},
                                        {"pipeline": True, "via_recorder": True}],
                                 ids=["binary", "binary-pipelined", "recorder", "recorder-pipelined"])


@WAYS
def test_a_fenced_insert_stores_a_sessions_events_and_snapshot_and_they_rebuild_it(store, way):
    create_sandbox_tables(store, SB)
    lease = Leases(store).acquire(SB, "a", "http://a.test", 30)
    session, stored = session_events(3)
    snapshot = mapper().to_stored_event(ev.Snapshot.take(session))
    insert(store, SB, lease, stored[:-1], **way)
    insert(store, SB, lease, stored[-1:], [snapshot], **way)

    pair, m = recorders(store, SB), mapper()
    rows = pair.events.select_events(session.id)
    assert [r.originator_version for r in rows] == list(range(1, session.version + 1))
    assert rows[-1].state == stored[-1].state
    (latest,) = pair.snapshots.select_events(session.id, desc=True, limit=1)
    rebuilt = m.to_domain_event(latest).mutate(None)
    for row in pair.events.select_events(session.id, gt=latest.originator_version):
        rebuilt = m.to_domain_event(row).mutate(rebuilt)
    assert (rebuilt.version, rebuilt.phase) == (session.version, session.phase)


@WAYS
def test_a_snapshot_at_the_same_version_replaces_the_older_one(store, way):
    create_sandbox_tables(store, SB)
    lease = Leases(store).acquire(SB, "a", "http://a.test", 30)
    session, stored = session_events(1)
    insert(store, SB, lease, stored)
    first = mapper().to_stored_event(ev.Snapshot.take(session))
    session.last_activity_ns += 1  # what moved between pause and retention at one version
    second = mapper().to_stored_event(ev.Snapshot.take(session))
    insert(store, SB, lease, [], [first], **way)
    insert(store, SB, lease, [], [second], **way)
    (only,) = recorders(store, SB).snapshots.select_events(session.id)
    assert only.state == second.state


@WAYS
def test_a_stale_owners_insert_is_refused_by_the_epoch_even_where_its_versions_collide(store, pg_url, way):
    create_sandbox_tables(store, SB)
    node_b = connect(pg_url)
    try:
        stale = Leases(store).acquire(SB, "a", "http://a.test", 0.05)
        wait_expired(Leases(node_b), SB)
        fresh = Leases(node_b).acquire(SB, "b", "http://b.test", 30)
        session, stored = session_events(2)
        insert(node_b, SB, fresh, stored[:3])
        with pytest.raises(LeaseLostError, match="held by b at epoch 2"):
            insert(store, SB, stale, stored[3:], **way)  # new versions: fenced only
        with pytest.raises(LeaseLostError, match="held by b at epoch 2"):
            insert(store, SB, stale, stored, **way)  # colliding versions too
        assert [r.originator_version for r in recorders(store, SB).events.select_events(session.id)] == [1, 2, 3]
    finally:
        node_b.close()


@WAYS
def test_the_owner_still_gets_a_duplicate_version_refused(store, way):
    create_sandbox_tables(store, SB)
    lease = Leases(store).acquire(SB, "a", "http://a.test", 30)
    _, stored = session_events(1)
    insert(store, SB, lease, stored)
    with pytest.raises((IntegrityError, psycopg.IntegrityError)):
        insert(store, SB, lease, stored[-1:], **way)


def test_a_group_commit_over_two_sandboxes_commits_nothing_when_one_lease_is_lost(store):
    leases, other = Leases(store), "sb-fedcba9876543210"
    for sandbox_id in (SB, other):
        create_sandbox_tables(store, sandbox_id)
    mine = leases.acquire(SB, "a", "http://a.test", 30)
    lost = leases.acquire(other, "a", "http://a.test", 30)
    leases.release(lost)
    session, stored = session_events(1)
    with pytest.raises(LeaseLostError) as refused:
        insert_batch(store, [SandboxWrite(mine, stored), SandboxWrite(lost, stored)])
    assert list(refused.value.lost) == [other]
    assert recorders(store, SB).events.select_events(session.id) == []
    insert_batch(store, [SandboxWrite(mine, stored)])  # the writer's retry without the lost one
    assert len(recorders(store, SB).events.select_events(session.id)) == len(stored)


def test_insert_refuses_a_lease_of_another_sandbox(store):
    lease = Leases(store).acquire(SB, "a", "http://a.test", 30)
    with pytest.raises(ValueError):
        insert(store, "sb-other", lease, session_events(1)[1])


def test_large_binary_output_comes_back_byte_for_byte(store):
    create_sandbox_tables(store, SB)
    lease = Leases(store).acquire(SB, "a", "http://a.test", 30)
    session = run(new_session())
    blobs = [os.urandom(256 * 1024), bytes(range(256)) * 1024, b"\0" * 300_000]
    for i, blob in enumerate(blobs):
        session.record_output("stdout", blob, T0 + i)
    m = mapper()
    insert(store, SB, lease, [m.to_stored_event(e) for e in session.collect_events()])
    back = [m.to_domain_event(r) for r in recorders(store, SB).events.select_events(session.id)]
    assert [e.data for e in back if isinstance(e, ev.Output)] == blobs


def test_event_blobs_skip_pglz_and_retention_deletes_get_autovacuumed(store):
    create_sandbox_tables(store, SB)
    create_sandbox_tables(store, SB)  # idempotent, settings included
    events, snapshots = table_names(SB)
    with store.transaction() as cursor:
        cursor.execute("SELECT attstorage FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'state'",
                       (f'"{events}"',))
        assert cursor.fetchone()["attstorage"] == "e"
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN (%s, %s)", (events, snapshots))
        options = {row["relname"]: row["reloptions"] for row in cursor.fetchall()}
    assert "autovacuum_vacuum_threshold=10000" in options[events]
    assert "autovacuum_vacuum_threshold=100" in options[snapshots]
