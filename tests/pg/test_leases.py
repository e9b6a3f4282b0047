"""Leases with epoch fencing, against the private PostgreSQL cluster (two "nodes" = two datastores)."""
from __future__ import annotations

import threading
import time

import pytest

from session_supervisor.infra.leases import Lease, Leases, LeaseLostError, fence
from session_supervisor.infra.pg_store import connect

SB = "sb-0123456789abcdef"
WAIT_S = 10.0


@pytest.fixture
def nodes(pg_url):
    """Two nodes' views of one database: each its own datastore (pool), as two processes have."""
    a, b = connect(pg_url, lock_timeout_s=5.0), connect(pg_url, lock_timeout_s=5.0)
    Leases(a).create_table()
    yield Leases(a), Leases(b)
    a.close()
    b.close()


def wait_expired(leases: Leases, sandbox_id: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not leases.owner(sandbox_id).expired:
        assert time.monotonic() < deadline, "lease did not expire by the database clock"
        time.sleep(0.02)


def test_two_nodes_racing_to_acquire_a_free_lease_get_exactly_one_winner(nodes):
    a, b = nodes
    start = threading.Barrier(2, timeout=WAIT_S)
    results = {}

    def race(name, leases):
        start.wait()
        results[name] = leases.acquire(SB, name, f"http://{name}.test", 30)

    threads = [threading.Thread(target=race, args=(n, l)) for n, l in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    winners = [r for r in results.values() if r is not None]
    assert len(results) == 2 and len(winners) == 1
    assert winners[0].epoch == 1
    owner = a.owner(SB)
    assert (owner.node_id, owner.url, owner.epoch, owner.expired) == (
        winners[0].node_id, winners[0].url, 1, False)


def test_an_unexpired_lease_cannot_be_taken_and_its_owner_renews_it(nodes):
    a, b = nodes
    held = a.acquire(SB, "a", "http://a.test", 30)
    assert b.acquire(SB, "b", "http://b.test", 30) is None
    renewed = a.renew(held, 60)
    assert renewed is not None and renewed.epoch == 1 and renewed.expires_at > held.expires_at


def test_renew_after_expiry_and_another_nodes_takeover_fails_and_the_epoch_went_up(nodes):
    a, b = nodes
    held = a.acquire(SB, "a", "http://a.test", 0.05)
    wait_expired(b, SB)
    taken = b.acquire(SB, "b", "http://b.test", 30)
    assert taken is not None and taken.epoch == held.epoch + 1
    assert a.renew(held, 30) is None
    assert a.release(held) is False
    assert b.owner(SB).node_id == "b"


def test_an_expired_lease_nobody_took_still_renews_and_fences_for_its_owner(nodes):
    a, _ = nodes
    held = a.acquire(SB, "a", "http://a.test", 0.05)
    wait_expired(a, SB)
    with a.datastore.transaction(commit=True) as cursor:
        fence(cursor, [held])  # the epoch is still the newest: nothing can be lost by writing
    assert a.renew(held, 30) is not None
    assert not a.owner(SB).expired


def test_a_stale_epochs_fenced_transaction_is_refused_and_writes_nothing(nodes):
    a, b = nodes
    with a.datastore.transaction(commit=True) as cursor:
        cursor.execute("CREATE TABLE journal (writer text, epoch bigint)")
    stale = a.acquire(SB, "a", "http://a.test", 0.05)
    wait_expired(b, SB)
    fresh = b.acquire(SB, "b", "http://b.test", 30)

    with pytest.raises(LeaseLostError, match=r"held by b at epoch 2, not a at epoch 1"):
        with a.datastore.transaction(commit=True) as cursor:
            fence(cursor, [stale])
            cursor.execute("INSERT INTO journal VALUES ('a', 1)")
    with b.datastore.transaction(commit=True) as cursor:
        fence(cursor, [fresh])
        cursor.execute("INSERT INTO journal VALUES ('b', 2)")
    with b.datastore.transaction() as cursor:
        cursor.execute("SELECT writer, epoch FROM journal")
        assert [tuple(r.values()) for r in cursor.fetchall()] == [("b", 2)]


def test_a_takeover_waits_for_a_fenced_transaction_in_flight_and_then_sees_its_rows(nodes):
    a, b = nodes
    with a.datastore.transaction(commit=True) as cursor:
        cursor.execute("CREATE TABLE journal (writer text)")
    held = a.acquire(SB, "a", "http://a.test", 0.05)
    wait_expired(b, SB)
    taken = {}
    with a.datastore.transaction(commit=True) as cursor:
        fence(cursor, [held])  # the row is now share-locked until this transaction ends
        cursor.execute("INSERT INTO journal VALUES ('a')")
        thief = threading.Thread(target=lambda: taken.update(lease=b.acquire(SB, "b", "http://b.test", 30)))
        thief.start()
        deadline = time.monotonic() + WAIT_S
        while not _someone_waits_for_a_lock(a):
            assert time.monotonic() < deadline, "the takeover never waited for the row lock"
            time.sleep(0.02)
        assert "lease" not in taken  # still blocked: cannot commit between our check and insert
    thief.join(WAIT_S)
    assert taken["lease"].epoch == held.epoch + 1
    with b.datastore.transaction() as cursor:
        cursor.execute("SELECT count(*) AS n FROM journal")
        assert cursor.fetchone()["n"] == 1  # the new owner reads the journal after its acquire


def _someone_waits_for_a_lock(leases: Leases) -> bool:
    with leases.datastore.transaction() as cursor:
        cursor.execute("SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        return cursor.fetchone()["n"] > 0


def test_release_frees_the_sandbox_for_the_next_acquire_at_a_higher_epoch(nodes):
    a, b = nodes
    held = a.acquire(SB, "a", "http://a.test", 30)
    assert a.release(held) is True
    owner = b.owner(SB)
    assert (owner.node_id, owner.url, owner.expired) == (None, None, False)
    with pytest.raises(LeaseLostError, match="released"):
        with a.datastore.transaction(commit=True) as cursor:
            fence(cursor, [held])
    assert b.acquire(SB, "b", "http://b.test", 30).epoch == 2


def test_the_sweep_lists_only_held_leases_that_expired_and_a_node_finds_its_own(nodes):
    a, b = nodes
    a.acquire("sb-expired", "a", "http://a.test", 0.05)
    a.acquire("sb-alive", "a", "http://a.test", 30)
    a.release(a.acquire("sb-paused", "a", "http://a.test", 0.05))
    wait_expired(b, "sb-expired")
    assert [o.sandbox_id for o in b.expired()] == ["sb-expired"]
    assert [o.sandbox_id for o in b.held_by("a")] == ["sb-alive", "sb-expired"]
    assert b.owner("sb-never") is None


def test_a_restarted_node_reclaims_its_own_unexpired_lease_only_when_asked(nodes):
    a, b = nodes
    before = a.acquire(SB, "a", "http://a.test", 30)
    assert b.acquire(SB, "a", "http://a.test", 30) is None
    after = b.acquire(SB, "a", "http://a.test", 30, reclaim_own=True)
    assert after.epoch == before.epoch + 1
    assert a.renew(before, 30) is None  # the old process, if it still lives, is fenced off


def test_one_fence_checks_many_leases_and_names_every_lost_one(nodes):
    a, b = nodes
    mine = a.acquire("sb-mine", "a", "http://a.test", 30)
    gone = a.acquire("sb-gone", "a", "http://a.test", 0.05)
    wait_expired(b, "sb-gone")
    b.acquire("sb-gone", "b", "http://b.test", 30)
    never = Lease("sb-never", "a", "http://a.test", 1, mine.expires_at)
    with pytest.raises(LeaseLostError) as lost:
        with a.datastore.transaction(commit=True) as cursor:
            fence(cursor, [mine, gone, never])
    assert sorted(lost.value.lost) == ["sb-gone", "sb-never"]


def test_nodes_starting_together_all_make_the_lease_table_without_tripping_over_each_other(pg_url):
    """CREATE TABLE IF NOT EXISTS from several connections at once can fail on the catalog's
    unique index in PostgreSQL; start-up DDL runs under an advisory lock."""
    stores = [connect(pg_url, lock_timeout_s=5.0) for _ in range(4)]
    try:
        for round_ in range(5):
            tables = [Leases(store, table=f"race_leases_{round_}") for store in stores]
            start = threading.Barrier(len(tables))
            errors: list[BaseException] = []

            def make(leases: Leases) -> None:
                start.wait()
                try:
                    leases.create_table()
                except BaseException as exc:  # reported below, with the round
                    errors.append(exc)

            threads = [threading.Thread(target=make, args=(t,)) for t in tables]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(WAIT_S)
            assert not errors, f"round {round_}: {errors}"
            assert tables[0].owner(SB) is None
    finally:
        for store in stores:
            store.close()
