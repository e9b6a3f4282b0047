"""The private test cluster: a server of its own, reached over its unix socket only."""
from __future__ import annotations

import psycopg


def test_each_test_gets_an_empty_database_of_its_own_on_a_socket_only_server(pg_cluster, pg_url):
    with psycopg.connect(pg_url, connect_timeout=10) as conn:
        conn.execute("CREATE TABLE mine (x int)")
        conn.commit()
        (listen,) = conn.execute("SHOW listen_addresses").fetchone()
        (tables,) = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert listen == ""
    assert tables == 1
    assert (pg_cluster.dir / ".s.PGSQL.5432").exists()


def test_a_second_test_does_not_see_the_first_ones_tables(pg_url):
    with psycopg.connect(pg_url, connect_timeout=10) as conn:
        (tables,) = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == 0
